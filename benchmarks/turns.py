"""Per-turn overhead of `satchel.turns.Session` against a bare SDK loop (`openai`, `anthropic`).

A long conversation (200 turns by default: a system prompt, then one ~1.5 KB observation frame
per user turn, a short answer per assistant turn, plus ~400 characters of reasoning for the
open-weight, Responses and Messages adapters) runs through three loops over one server of
precomputed bytes behind `httpx.MockTransport` (`httpx2.MockTransport` for the `anthropic` SDK):

* `Session.turn` with the adapter the example profile builds (`openai.chat_completions.v1` with
  `manual_rolling`; `open_source.chat_completions.v1`, `openai.responses.v1`,
  `xai.responses.v1`, `anthropic.messages.v1`, `deepseek.chat_completions.v1` and
  `google.interactions.v1` with `continuous_conversation`; each DeepSeek answer is one call to its
  answer tool, replayed with its reasoning and the call's result; each Gemini answer a signed
  thought step with its summary and the output step (`_interactions_wire.py`), compared between
  the loops as JSON with sorted keys, since the SDK writes the steps it is given as parameters in
  its own key order),
* a hand-written loop calling the SDK with the same growing conversation and reading the answer,
  reasoning and usage the same way: for Chat Completions, `client.chat.completions.create` with
  the message list (replaying `reasoning_content` for the open-weight adapter, dropping the same
  oldest turns in the trimming row); for Responses, `client.responses.create` with its own
  `input` list (the system message, then each user frame and every output item of each answer
  as `to_dict(mode="json")` returns it, less the reasoning items' `status`: the adapters' exact
  replay); for Messages, `client.beta.messages.create` with the system prompt apart and its own
  `messages` list (each user frame as text, each answer's content blocks as `to_dict` returns
  them or, streamed, as built from the raw events: start block, deltas appended, signature
  set), usage totalled as satchel's `Usage` counts it (input, cache reads and writes, output),
  and
* the same loop sending as satchel's adapters send (the conversation in `extra_body`: the same
  bytes, without the SDK's walk over every message or item), so satchel's own work shows apart
  from that saving.

Each adapter runs streamed (the example profiles' default) and non-streamed, with a trim limit
so large that the window is held (the main figure), plus one streamed `manual_rolling` row whose
limit makes the window trim every dozen turns or so. The Responses rows run the example profiles
`gpt-5.6-sol-responses-continuous` and `grok-4.6-xai-responses-native`, the Messages rows
`claude-opus-5-messages-native`; the last two without their `runtime.compaction` (native
compaction past 200k or 175k tokens; the Messages betas stay), so that no compaction call falls
into the timed rows; the Sessions get no compactor either.

The server replays precomputed response bytes (token-sized stream chunks), so serving a request
costs little and the same for every loop. A Responses answer is the documented `response` object,
or its server-sent events (`response.created` through `response.completed`, the summary and the
text in deltas): a reasoning item with a summary and a fresh `encrypted_content` each turn, then
the assistant message. A Messages answer (`_messages_wire.py`) is the `message` object, or its
events (`message_start` through `message_stop`, the thinking and the text in deltas, the
signature in one `signature_delta`): a thinking block with a fresh signature each turn, then the
text, `end_turn`. For both, each loop has its own lane of that server, rewound before
conversations start, so every loop gets turn k's answer at turn k and replays the same items.
A warm-up round over the first turns checks that the loops send byte-identical requests and see
the same usage. Each timed run advances the conversations in lockstep, one turn each, rotating
which goes first, so drift and background load hit all alike; turns are timed in CPU time of
this process. A row reports the median of `--repeat` runs: ms per turn for each loop, the
overhead ratio satchel / bare and the ratio to the loop that sends as satchel does (medians of
the paired runs). The goal is at most 1.3x for every adapter. The last line printed is one JSON
object whose `overhead_ratio` is the worst ratio of the held-window rows (`per_adapter`: each
adapter's worst), followed by every row's figures. `--adapter ID` (repeatable) runs only those
adapters' rows.
"""

from __future__ import annotations

import argparse
import base64
import gc
import hashlib
import itertools
import json
import math
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
import httpx
import httpx2
import openai
from google import genai
from google.genai import types as genai_types
from rich.console import Console
from rich.table import Table

from _interactions_wire import InteractionsServer
from _messages_wire import MessagesServer
from satchel.providers import Profile, build_adapter, example_profiles, parse_profiles
from satchel.providers.chat.deepseek_state import ANSWER_TOOL, TOOL_RESULT
from satchel.providers.kit.sdk import sdk_arguments
from satchel.turns import ModelResponse, NeutralMessage, Session

GOAL = 1.3
OPENAI_ID = "openai.chat_completions.v1"
OPEN_SOURCE_ID = "open_source.chat_completions.v1"
OPENAI_RESPONSES_ID = "openai.responses.v1"
XAI_RESPONSES_ID = "xai.responses.v1"
ANTHROPIC_ID = "anthropic.messages.v1"
DEEPSEEK_ID = "deepseek.chat_completions.v1"
GOOGLE_ID = "google.interactions.v1"
RESPONSES_IDS = frozenset({OPENAI_RESPONSES_ID, XAI_RESPONSES_ID})
# The example profile each adapter's rows run (the benchmark edits its own copy).
PROFILE_IDS = {
    OPENAI_ID: "gpt-5-mini-chat-rolling",
    OPEN_SOURCE_ID: "qwen3-open-weight-continuous",
    OPENAI_RESPONSES_ID: "gpt-5.6-sol-responses-continuous",
    XAI_RESPONSES_ID: "grok-4.6-xai-responses-native",
    ANTHROPIC_ID: "claude-opus-5-messages-native",
    DEEPSEEK_ID: "deepseek-thinking-continuous",
    GOOGLE_ID: "gemini-3.5-pro-interactions-continuous",
}
# The adapters whose example profile compacts natively; the benchmark's copy does not.
NATIVE_COMPACTION_IDS = frozenset({XAI_RESPONSES_ID, ANTHROPIC_ID})
ENV = {
    "OPENAI_API_KEY": "sk-bench",
    "OPEN_WEIGHT_API_KEY": "bench",
    "XAI_API_KEY": "xai-bench",
    "ANTHROPIC_API_KEY": "sk-ant-bench",
    "DEEPSEEK_API_KEY": "ds-bench",
    "GEMINI_API_KEY": "gm-bench",
}
HELD_LIMIT_TOKENS = 50_000_000
TRIM_LIMIT_TOKENS = 20_000
TRIM_TARGET_FRACTION = 0.7
FRAME_ROWS, FRAME_COLS = 22, 64
ANSWER = "ACTION3\nThe key is two cells to the right; moving there before the timer runs out."
REASONING_SEED = 7
REASONING_CHARS = 400
ENCRYPTED_BYTES = 1024  # each turn's encrypted reasoning blob, before base64
TOKEN_CHARS = 4
WARMUP_TURNS = 60

Conversation = Callable[[Sequence[NeutralMessage]], Iterator[int]]


# ---- the conversation -------------------------------------------------------------------------


def system_prompt() -> NeutralMessage:
    rules = (
        "You play a grid game one action per turn. Each user turn shows the current frame: "
        "'#' is a wall, '.' floor, '@' you, 'K' a key, 'D' a door, digits are timers. "
        "Answer with exactly one action among ACTION1 (up), ACTION2 (down), ACTION3 (right), "
        "ACTION4 (left), ACTION5 (interact), on the first line, then one short sentence. "
    )
    return {"role": "system", "content": rules * 3}


def frames(count: int) -> list[NeutralMessage]:
    """`count` user turns, each an observation frame of about 1.5 KB."""
    out: list[NeutralMessage] = []
    for index in range(count):
        rng = random.Random(index)
        rows = ["".join(rng.choices(".....#", k=FRAME_COLS)) for _ in range(FRAME_ROWS)]
        row, col = rng.randrange(FRAME_ROWS), rng.randrange(FRAME_COLS)
        rows[row] = rows[row][:col] + "@" + rows[row][col + 1 :]
        header = f"Step {index + 1}. Score {index // 7}. Lives 3. Frame:\n"
        out.append({"role": "user", "content": header + "\n".join(rows)})
    return out


def reasoning_text() -> str:
    rng = random.Random(REASONING_SEED)
    words = ("the", "key", "door", "wall", "move", "right", "up", "timer", "path", "cell", "then")
    text = ""
    while len(text) < REASONING_CHARS:
        text += rng.choice(words) + " "
    return text.strip() + "."


def pieces(text: str) -> list[str]:
    """Token-sized pieces, as a server streams them."""
    return [text[i : i + TOKEN_CHARS] for i in range(0, len(text), TOKEN_CHARS)]


def message_tokens(message: NeutralMessage) -> int:
    """The estimate the manual_rolling window uses: `ceil(chars / 3.5) + 4`."""
    chars = sum(len(value) for key, value in message.items() if key != "role")
    return math.ceil(chars / 3.5) + 4


# ---- the mock server ----------------------------------------------------------------------------


USAGE = {
    "prompt_tokens": 12_000,
    "completion_tokens": 120,
    "total_tokens": 12_120,
    "prompt_tokens_details": {"cached_tokens": 11_000},
    "completion_tokens_details": {"reasoning_tokens": 100},
}


class _Replay(httpx.SyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


class WireServer:
    """Answers every request with the same precomputed Chat Completions bytes.

    One instance serves both loops of a row. While `digests` is a list, each request body's
    digest is appended to it (the warm-up round uses this to compare the two loops).
    """

    def __init__(
        self, *, model: str, reasoning: str | None, stream: bool, tool: bool = False
    ) -> None:
        self.stream = stream
        self.digests: list[bytes] | None = None
        self.json_headers = [("content-type", "application/json"), ("x-request-id", "req_b")]
        self.sse_headers = [("content-type", "text/event-stream"), ("x-request-id", "req_b")]
        content = "" if tool else ANSWER
        finish = "tool_calls" if tool else "stop"
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if tool:
            message["tool_calls"] = [ANSWER_CALL]
        completion = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1_780_000_000,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": USAGE,
        }
        self.body = json.dumps(completion).encode()
        deltas: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant"}, None)]
        deltas += [({"reasoning_content": p}, None) for p in pieces(reasoning or "")]
        if tool:
            function = ANSWER_CALL["function"]
            opening = {**ANSWER_CALL, "index": 0, "function": {"name": function["name"]}}
            deltas.append(({"tool_calls": [opening]}, None))
            deltas += [
                ({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}, None)
                for p in pieces(function["arguments"])
            ]
        else:
            deltas += [({"content": p}, None) for p in pieces(ANSWER)]
        deltas.append(({}, finish))
        events = [
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 1_780_000_000,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            for delta, finish in deltas
        ]
        events.append(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 1_780_000_000,
                "model": model,
                "choices": [],
                "usage": USAGE,
            }
        )
        self.chunks = [f"data: {json.dumps(event)}\n\n".encode() for event in events]
        self.chunks.append(b"data: [DONE]\n\n")

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.digests is not None:
            self.digests.append(hashlib.blake2b(request.content, digest_size=16).digest())
        if self.stream:
            return httpx.Response(200, headers=self.sse_headers, stream=_Replay(self.chunks))
        return httpx.Response(200, headers=self.json_headers, content=self.body)


ANSWER_CALL: dict[str, Any] = {
    "id": "call_bench",
    "type": "function",
    "function": {
        "name": ANSWER_TOOL["function"]["name"],
        "arguments": json.dumps({"answer": ANSWER}),
    },
}


RESPONSES_USAGE = {
    "input_tokens": 12_000,
    "input_tokens_details": {"cached_tokens": 11_000},
    "output_tokens": 120,
    "output_tokens_details": {"reasoning_tokens": 100},
    "total_tokens": 12_120,
}


def response_object(model: str, turn: int) -> dict[str, Any]:
    """Turn `turn`'s completed `response`: a reasoning item with a summary and an encrypted blob
    of its own, then the assistant message."""
    rng = random.Random(f"response {turn}")
    encrypted = "gAAAAAB" + base64.b64encode(rng.randbytes(ENCRYPTED_BYTES)).decode()
    reasoning = {
        "id": f"rs_{rng.randbytes(24).hex()}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": reasoning_text()}],
        "encrypted_content": encrypted,
        "status": "completed",
    }
    message = {
        "id": f"msg_{rng.randbytes(24).hex()}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
    }
    return {
        "id": f"resp_{rng.randbytes(24).hex()}",
        "object": "response",
        "created_at": 1_780_000_000 + turn,
        "status": "completed",
        "model": model,
        "output": [reasoning, message],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": RESPONSES_USAGE,
    }


def response_events(response: dict[str, Any]) -> list[bytes]:
    """`response` as the server-sent events that stream it, one chunk per event, the reasoning
    summary and the text in token-sized deltas."""
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            added = {k: v for k, v in item.items() if k != "encrypted_content"}
            added |= {"summary": [], "status": "in_progress"}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": added}
            )
            for number, part in enumerate(item["summary"]):
                at = {**where, "summary_index": number}
                empty = {**part, "text": ""}
                events.append(
                    {"type": "response.reasoning_summary_part.added", **at, "part": empty}
                )
                events += [
                    {"type": "response.reasoning_summary_text.delta", **at, "delta": piece}
                    for piece in pieces(part["text"])
                ]
                text = part["text"]
                events.append({"type": "response.reasoning_summary_text.done", **at, "text": text})
                events.append({"type": "response.reasoning_summary_part.done", **at, "part": part})
        else:
            added = {**item, "status": "in_progress", "content": []}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": added}
            )
            for number, part in enumerate(item["content"]):
                at = {**where, "content_index": number}
                empty = {**part, "text": ""}
                events.append({"type": "response.content_part.added", **at, "part": empty})
                events += [
                    {"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []}
                    for piece in pieces(part["text"])
                ]
                events.append(
                    {
                        "type": "response.output_text.done",
                        **at,
                        "text": part["text"],
                        "logprobs": [],
                    }
                )
                events.append({"type": "response.content_part.done", **at, "part": part})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    out = []
    for number, event in enumerate(events):
        data = json.dumps({**event, "sequence_number": number})
        out.append(f"event: {event['type']}\ndata: {data}\n\n".encode())
    return out


class ResponsesServer:
    """Answers turn k of every conversation with the same precomputed Responses bytes.

    Each loop talks to its own `Lane` (a client and the turn its conversation is at); `rewind`
    sets every lane back to turn 0 before conversations start. `digests` as in `WireServer`.
    """

    def __init__(self, *, model: str, turns: int, stream: bool) -> None:
        self.stream = stream
        self.digests: list[bytes] | None = None
        self.lanes: list[Lane] = []
        self.json_headers = [("content-type", "application/json"), ("x-request-id", "req_b")]
        self.sse_headers = [("content-type", "text/event-stream"), ("x-request-id", "req_b")]
        answers = [response_object(model, turn) for turn in range(turns)]
        self.bodies = [] if stream else [json.dumps(answer).encode() for answer in answers]
        self.streams = [response_events(answer) for answer in answers] if stream else []

    def lane(self) -> Lane:
        lane = Lane(self)
        self.lanes.append(lane)
        return lane

    def rewind(self) -> None:
        for lane in self.lanes:
            lane.turn = 0

    def answer(self, request: httpx.Request, turn: int) -> httpx.Response:
        if self.digests is not None:
            self.digests.append(hashlib.blake2b(request.content, digest_size=16).digest())
        if self.stream:
            return httpx.Response(200, headers=self.sse_headers, stream=_Replay(self.streams[turn]))
        return httpx.Response(200, headers=self.json_headers, content=self.bodies[turn])


@dataclass(slots=True)
class Lane:
    """One loop's way to a `ResponsesServer`: its own client, and its conversation's turn."""

    server: ResponsesServer
    turn: int = 0
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        turn, self.turn = self.turn, self.turn + 1
        return self.server.answer(request, turn)


# ---- the loops ----------------------------------------------------------------------------------


def answer_text(response: ModelResponse) -> str:
    return response.text


def satchel_conversation(profile: Profile, http: httpx.Client | httpx2.Client) -> Conversation:
    adapter = build_adapter(profile, http_client=http, env=ENV)
    policy = profile.retry_policy()
    system = system_prompt()

    def run(turns: Sequence[NeutralMessage]) -> Iterator[int]:
        session = Session(adapter, policy=policy)
        for index, frame in enumerate(turns):
            accepted = session.turn([system, frame] if index == 0 else [frame], answer_text)
            yield accepted.usage.total_tokens

    return run


@dataclass(slots=True)
class BareWindow:
    """The manual_rolling trim written by hand: drop the oldest whole turns past the limit."""

    limit: int
    target: int
    sizes: deque[int] = field(default_factory=deque)
    tokens: int = 0
    trims: int = 0

    def reset(self) -> None:
        self.sizes.clear()
        self.tokens = self.trims = 0

    def cut(self, fixed: int) -> int:
        """How many leading history messages to drop before the next request."""
        if fixed + self.tokens <= self.limit:
            return 0
        dropped = 0
        while self.sizes and fixed + self.tokens > self.target:
            self.tokens -= self.sizes.popleft()
            dropped += 2
        self.trims += dropped > 0
        return dropped

    def add(self, tokens: int) -> None:
        self.sizes.append(tokens)
        self.tokens += tokens


def bare_client(profile: Profile, http: httpx.Client) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=ENV[profile.client.api_key_env or "OPENAI_API_KEY"],
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=cast(Any, http),
    )


def bare_conversation(
    profile: Profile,
    http: httpx.Client,
    *,
    replay: str | None,
    window: BareWindow | None,
    shortcut: bool = False,
) -> Conversation:
    client = bare_client(profile, http)
    settings = dict(profile.request)
    stream = bool(settings.pop("stream", False))
    if stream:
        settings["stream_options"] = {"include_usage": True}
    system = system_prompt()
    system_tokens = message_tokens(system)

    def create(messages: list[Any], **more: Any) -> Any:
        body = {"messages": messages, **settings, **more}
        return client.chat.completions.create(
            **(sdk_arguments(body, "messages") if shortcut else body)
        )

    def ask(messages: list[Any]) -> tuple[str, str | None, int]:
        if not stream:
            completion = create(messages, stream=False)
            message = completion.choices[0].message
            reasoning = (message.model_extra or {}).get(replay) if replay else None
            assert completion.usage is not None
            return message.content or "", reasoning, completion.usage.total_tokens
        text: list[str] = []
        thought: list[str] = []
        used = 0
        for chunk in create(messages, stream=True):
            if chunk.usage is not None:
                used = chunk.usage.total_tokens
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                if replay and delta.model_extra and (piece := delta.model_extra.get(replay)):
                    thought.append(piece)
        return "".join(text), "".join(thought) or None, used

    def run(turns: Sequence[NeutralMessage]) -> Iterator[int]:
        messages: list[Any] = [system]
        if window is not None:
            window.reset()
        for frame in turns:
            if window is not None:
                dropped = window.cut(system_tokens + message_tokens(frame))
                if dropped:
                    del messages[1 : 1 + dropped]
            messages.append(frame)
            text, reasoning, used = ask(messages)
            answer: NeutralMessage = {"role": "assistant", "content": text}
            if replay and reasoning:
                answer[replay] = reasoning
            messages.append(answer)
            if window is not None:
                window.add(message_tokens(frame) + message_tokens(answer))
            yield used

    return run


def bare_tool_conversation(
    profile: Profile, http: httpx.Client, *, shortcut: bool = False
) -> Conversation:
    """The DeepSeek loop by hand: the answer tool on every request, each answer's reasoning
    and call replayed with the call's result."""
    client = bare_client(profile, http)
    settings = dict(profile.request)
    stream = bool(settings.pop("stream", False))
    if stream:
        settings["stream_options"] = {"include_usage": True}
    settings["tools"] = [ANSWER_TOOL]
    system = system_prompt()

    def create(messages: list[Any], **more: Any) -> Any:
        body = {"messages": messages, **settings, **more}
        return client.chat.completions.create(
            **(sdk_arguments(body, "messages") if shortcut else body)
        )

    def ask(messages: list[Any]) -> tuple[str, str, dict[str, Any], int]:
        if not stream:
            completion = create(messages, stream=False)
            message = completion.choices[0].message
            assert completion.usage is not None and message.tool_calls
            call = message.tool_calls[0]
            native = {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            reasoning = (message.model_extra or {})["reasoning_content"]
            return message.content or "", reasoning, native, completion.usage.total_tokens
        text: list[str] = []
        thought: list[str] = []
        arguments: list[str] = []
        call_id = name = ""
        used = 0
        for chunk in create(messages, stream=True):
            if chunk.usage is not None:
                used = chunk.usage.total_tokens
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                if delta.model_extra and (piece := delta.model_extra.get("reasoning_content")):
                    thought.append(piece)
                for call in delta.tool_calls or []:
                    call_id = call.id or call_id
                    if call.function is not None:
                        name = call.function.name or name
                        arguments.append(call.function.arguments or "")
        native = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": "".join(arguments)},
        }
        return "".join(text), "".join(thought), native, used

    def run(turns: Sequence[NeutralMessage]) -> Iterator[int]:
        messages: list[Any] = [system]
        for frame in turns:
            messages.append(frame)
            text, reasoning, call, used = ask(messages)
            assert json.loads(call["function"]["arguments"])["answer"]
            messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    "reasoning_content": reasoning,
                    "tool_calls": [call],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": TOOL_RESULT})
            yield used

    return run


def bare_responses_conversation(
    profile: Profile, http: httpx.Client, *, shortcut: bool = False
) -> Conversation:
    """The Responses loop by hand: its own `input` list, every output item replayed."""
    client = bare_client(profile, http)
    settings = dict(profile.request)
    stream = bool(settings.get("stream"))
    system = system_prompt()

    def create(items: list[Any]) -> Any:
        body = {**settings, "input": items}
        return client.responses.create(**(sdk_arguments(body, "input") if shortcut else body))

    def ask(items: list[Any]) -> tuple[str, list[dict[str, Any]], int]:
        if not stream:
            response = create(items)
            assert response.usage is not None
            output = [item.to_dict(mode="json") for item in response.output]
            return response.output_text, output, response.usage.total_tokens
        text: list[str] = []
        output = []
        used = 0
        for event in create(items):
            kind = event.type
            if kind == "response.output_text.delta":
                text.append(event.delta)
            elif kind == "response.output_item.done":
                output.append(event.item.to_dict(mode="json"))
            elif kind == "response.completed" and event.response.usage is not None:
                used = event.response.usage.total_tokens
        return "".join(text), output, used

    def run(turns: Sequence[NeutralMessage]) -> Iterator[int]:
        items: list[Any] = [{"role": system["role"], "content": system["content"]}]
        for frame in turns:
            items.append({"role": "user", "content": frame["content"]})
            _text, output, used = ask(items)
            for item in output:
                if item.get("type") == "reasoning":
                    item.pop("status", None)
            items += output
            yield used

    return run


def bare_interactions_conversation(
    profile: Profile, http: httpx.Client, *, shortcut: bool = False
) -> Conversation:
    """The Interactions loop by hand: the system instruction apart, its own `input` steps (each
    user frame, then every step of each answer as the SDK gives it)."""
    options = genai_types.HttpOptions(
        base_url=profile.client.base_url,
        httpx_client=http,
        retry_options=genai_types.HttpRetryOptions(attempts=profile.client.max_retries + 1),
    )
    client = genai.Client(api_key=ENV[profile.client.api_key_env or ""], http_options=options)
    settings = {**profile.request, "store": False}
    stream = bool(settings.get("stream"))
    system = system_prompt()["content"]

    def create(steps: list[Any]) -> Any:
        conversation = {"extra_body": {"input": steps}} if shortcut else {"input": steps}
        return client.interactions.create(
            **settings, **conversation, system_instruction=system, automatic_continuation=False
        )

    def ask(steps: list[Any]) -> tuple[str, list[dict[str, Any]], int]:
        if not stream:
            answered = create(steps).to_dict(mode="json", warnings=False)
            output = answered["steps"]
            text = "".join(
                p["text"] for s in output if s["type"] == "model_output" for p in s["content"]
            )
            return text, output, answered["usage"]["total_tokens"]
        built: dict[int, dict[str, Any]] = {}
        used = 0
        for event in create(steps):
            kind = event.event_type
            if kind == "step.start":
                built[event.index] = event.step.to_dict(mode="json", warnings=False)
            elif kind == "step.delta":
                step, delta = built[event.index], event.delta
                if delta.type == "thought_summary":
                    parts = step.setdefault("summary", [{"type": "text", "text": ""}])
                    parts[-1]["text"] += delta.content.text
                elif delta.type == "thought_signature":
                    step["signature"] = delta.signature
                elif delta.type == "text":
                    parts = step.setdefault("content", [{"type": "text", "text": ""}])
                    parts[-1]["text"] += delta.text
            elif kind == "interaction.completed":
                used = event.interaction.usage.total_tokens
        output = [built[index] for index in sorted(built)]
        text = "".join(
            p["text"] for s in output if s["type"] == "model_output" for p in s["content"]
        )
        return text, output, used

    def run(turns: Sequence[NeutralMessage]) -> Iterator[int]:
        steps: list[Any] = []
        for frame in turns:
            steps.append(
                {"type": "user_input", "content": [{"type": "text", "text": frame["content"]}]}
            )
            _text, output, used = ask(steps)
            steps += output
            yield used

    return run


def bare_messages_conversation(
    profile: Profile, http: httpx2.Client, *, shortcut: bool = False
) -> Conversation:
    """The Messages loop by hand: the system prompt apart, every content block replayed."""
    client = anthropic.Anthropic(
        api_key=ENV[profile.client.api_key_env or "ANTHROPIC_API_KEY"],
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=http,
    )
    settings = dict(profile.request)
    stream = bool(settings.get("stream"))
    system = system_prompt()["content"]
    usage_keys = (
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "output_tokens",
    )

    def create(messages: list[Any]) -> Any:
        body = {**settings, "system": system, "messages": messages}
        arguments = sdk_arguments(body, "messages") if shortcut else body
        return client.beta.messages.create(**arguments)

    def ask(messages: list[Any]) -> tuple[str, list[dict[str, Any]], int]:
        if not stream:
            message = create(messages)
            content = [block.to_dict(mode="json", warnings=False) for block in message.content]
            used = sum(getattr(message.usage, key) or 0 for key in usage_keys)
        else:
            blocks: dict[int, dict[str, Any]] = {}
            counts: dict[str, int] = {}
            for event in create(messages):
                kind = event.type
                if kind == "content_block_delta":
                    block, delta = blocks[event.index], event.delta
                    if delta.type == "text_delta":
                        block["text"] += delta.text
                    elif delta.type == "thinking_delta":
                        block["thinking"] += delta.thinking
                    elif delta.type == "signature_delta":
                        block["signature"] = delta.signature
                elif kind == "content_block_start":
                    blocks[event.index] = event.content_block.to_dict(mode="json", warnings=False)
                elif kind in ("message_start", "message_delta"):
                    usage = event.message.usage if kind == "message_start" else event.usage
                    for key in usage_keys:
                        if (count := getattr(usage, key)) is not None:
                            counts[key] = count
            content = [blocks[index] for index in sorted(blocks)]
            used = sum(counts.values())
        text = "".join(block["text"] for block in content if block["type"] == "text")
        return text, content, used

    def run(turns: Sequence[NeutralMessage]) -> Iterator[int]:
        messages: list[Any] = []
        for frame in turns:
            messages.append({"role": "user", "content": frame["content"]})
            _text, content, used = ask(messages)
            messages.append({"role": "assistant", "content": content})
            yield used

    return run


# ---- measurement --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    adapter_id: str
    stream: bool
    trim: bool = False

    @property
    def server(self) -> str:
        """The wire the case's server speaks: chat, responses or messages."""
        if self.adapter_id == ANTHROPIC_ID:
            return "messages"
        return "responses" if self.adapter_id in RESPONSES_IDS else "chat"

    @property
    def mode(self) -> str:
        mode = "stream" if self.stream else "non-stream"
        return f"{mode}, trimming" if self.trim else mode


@dataclass(frozen=True, slots=True)
class Row:
    """One case's timed runs: per-run totals in seconds, the loops paired run by run."""

    case: Case
    turns: int
    bare_runs: tuple[float, ...]
    shortcut_runs: tuple[float, ...]
    satchel_runs: tuple[float, ...]
    trims: int

    @property
    def bare_ms(self) -> float:
        return statistics.median(self.bare_runs) / self.turns * 1000

    @property
    def shortcut_ms(self) -> float:
        return statistics.median(self.shortcut_runs) / self.turns * 1000

    @property
    def satchel_ms(self) -> float:
        return statistics.median(self.satchel_runs) / self.turns * 1000

    @property
    def ratio(self) -> float:
        return statistics.median(
            s / b for s, b in zip(self.satchel_runs, self.bare_runs, strict=True)
        )

    @property
    def shortcut_ratio(self) -> float:
        return statistics.median(
            s / b for s, b in zip(self.satchel_runs, self.shortcut_runs, strict=True)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "adapter": self.case.adapter_id,
            "mode": self.case.mode,
            "stream": self.case.stream,
            "trimming": self.case.trim,
            "trims": self.trims,
            "turns": self.turns,
            "bare_ms_per_turn": round(self.bare_ms, 4),
            "bare_shortcut_ms_per_turn": round(self.shortcut_ms, 4),
            "satchel_ms_per_turn": round(self.satchel_ms, 4),
            "extra_ms_per_turn": round(self.satchel_ms - self.bare_ms, 4),
            "ratio": round(self.ratio, 4),
            "ratio_to_shortcut_loop": round(self.shortcut_ratio, 4),
            "run_ratios": [
                round(s / b, 4) for s, b in zip(self.satchel_runs, self.bare_runs, strict=True)
            ],
        }


def profile_for(case: Case) -> Profile:
    base = example_profiles()[PROFILE_IDS[case.adapter_id]]
    data = base.model_dump(mode="json", exclude_none=True)
    data["request"]["stream"] = case.stream
    if case.adapter_id in NATIVE_COMPACTION_IDS:
        data["runtime"].pop("compaction", None)  # keep compaction calls out of the timed rows
    if case.adapter_id == OPENAI_ID:
        limit = TRIM_LIMIT_TOKENS if case.trim else HELD_LIMIT_TOKENS
        data["runtime"]["trim"] = {"limit_tokens": limit, "target_fraction": TRIM_TARGET_FRACTION}
    return parse_profiles([data], "benchmarks/turns.py")[base.id]


def _nothing() -> None:
    pass


def lockstep(*loops: Iterator[int]) -> list[float]:
    """Run the conversations turn by turn, rotating which goes first; CPU seconds of each."""
    clock = time.process_time
    spent = [0.0] * len(loops)
    gc.collect()
    for turn in itertools.count():
        used = []
        for offset in range(len(loops)):
            index = (turn + offset) % len(loops)
            started = clock()
            used.append(next(loops[index], None))
            spent[index] += clock() - started
        if all(value is None for value in used):
            return spent
        if any(value is None for value in used):
            raise SystemExit("the conversations ended at different turns")
    raise AssertionError("unreachable")


def measure(case: Case, turns: Sequence[NeutralMessage], repeat: int) -> Row:
    profile = profile_for(case)
    model = str(profile.request["model"])
    windows: list[BareWindow | None] = [None, None]
    server: WireServer | ResponsesServer | MessagesServer | InteractionsServer
    clients: list[httpx.Client] | list[httpx2.Client]
    if case.server == "responses":
        server = responses = ResponsesServer(model=model, turns=len(turns), stream=case.stream)
        lanes = [responses.lane() for _ in range(3)]
        clients = [lane.http for lane in lanes]
        satchel = satchel_conversation(profile, clients[0])
        bare = bare_responses_conversation(profile, clients[1])
        shortcut = bare_responses_conversation(profile, clients[2], shortcut=True)
        rewind = responses.rewind
    elif case.server == "messages":
        server = messages = MessagesServer(
            model=model,
            turns=len(turns),
            stream=case.stream,
            thinking=reasoning_text(),
            answer=ANSWER,
            pieces=pieces,
        )
        clients = [messages.lane().http for _ in range(3)]
        satchel = satchel_conversation(profile, clients[0])
        bare = bare_messages_conversation(profile, clients[1])
        shortcut = bare_messages_conversation(profile, clients[2], shortcut=True)
        rewind = messages.rewind
    elif case.adapter_id == GOOGLE_ID:
        server = interactions = InteractionsServer(
            model=model, stream=case.stream, thought=reasoning_text(), answer=ANSWER, pieces=pieces
        )
        clients = [interactions.http]
        satchel = satchel_conversation(profile, interactions.http)
        bare = bare_interactions_conversation(profile, interactions.http)
        shortcut = bare_interactions_conversation(profile, interactions.http, shortcut=True)
        rewind = _nothing
    elif case.adapter_id == DEEPSEEK_ID:
        server = WireServer(model=model, reasoning=reasoning_text(), stream=case.stream, tool=True)
        http = httpx.Client(transport=httpx.MockTransport(server.handle))
        clients = [http]
        satchel = satchel_conversation(profile, http)
        bare = bare_tool_conversation(profile, http)
        shortcut = bare_tool_conversation(profile, http, shortcut=True)
        rewind = _nothing
    else:
        replay = "reasoning_content" if case.adapter_id == OPEN_SOURCE_ID else None
        reasoning = reasoning_text() if replay else None
        server = WireServer(model=model, reasoning=reasoning, stream=case.stream)
        http = httpx.Client(transport=httpx.MockTransport(server.handle))
        clients = [http]
        if case.trim:
            target = int(TRIM_LIMIT_TOKENS * TRIM_TARGET_FRACTION)
            windows = [BareWindow(TRIM_LIMIT_TOKENS, target) for _ in range(2)]
        satchel = satchel_conversation(profile, http)
        bare = bare_conversation(profile, http, replay=replay, window=windows[0])
        shortcut = bare_conversation(profile, http, replay=replay, window=windows[1], shortcut=True)
        rewind = _nothing

    warm = turns[:WARMUP_TURNS]
    rewind()
    server.digests = []
    satchel_used = list(satchel(warm))
    satchel_sent = server.digests
    for loop in (bare, shortcut):
        rewind()
        server.digests = []
        if list(loop(warm)) != satchel_used or server.digests != satchel_sent:
            raise SystemExit(f"{case.adapter_id} {case.mode}: the loops sent different requests")
    server.digests = None

    runs = []
    for _ in range(repeat):
        rewind()
        runs.append(lockstep(satchel(turns), bare(turns), shortcut(turns)))
    for client in clients:
        client.close()
    return Row(
        case=case,
        turns=len(turns),
        bare_runs=tuple(run[1] for run in runs),
        shortcut_runs=tuple(run[2] for run in runs),
        satchel_runs=tuple(run[0] for run in runs),
        trims=windows[0].trims if windows[0] is not None else 0,
    )


CASES = (
    Case(OPENAI_ID, stream=True),
    Case(OPENAI_ID, stream=False),
    Case(OPEN_SOURCE_ID, stream=True),
    Case(OPEN_SOURCE_ID, stream=False),
    Case(OPENAI_RESPONSES_ID, stream=True),
    Case(OPENAI_RESPONSES_ID, stream=False),
    Case(XAI_RESPONSES_ID, stream=True),
    Case(XAI_RESPONSES_ID, stream=False),
    Case(ANTHROPIC_ID, stream=True),
    Case(ANTHROPIC_ID, stream=False),
    Case(DEEPSEEK_ID, stream=True),
    Case(DEEPSEEK_ID, stream=False),
    Case(GOOGLE_ID, stream=True),
    Case(GOOGLE_ID, stream=False),
    Case(OPENAI_ID, stream=True, trim=True),
)


def table(rows: Sequence[Row], repeat: int) -> Table:
    out = Table(
        title=f"satchel Session vs a bare SDK loop, CPU time, median of {repeat} runs",
        caption=(
            f"ratio = satchel / bare (median of paired runs; goal <= {GOAL}x); as sent = the bare"
            " loop sending as satchel does (messages or input items in extra_body)"
        ),
    )
    for name in ("adapter", "mode", "turns"):
        out.add_column(name)
    for name in ("bare ms/turn", "as sent ms/turn", "satchel ms/turn", "ratio", "to as sent"):
        out.add_column(name, justify="right")
    for row in rows:
        mode = f"{row.case.mode} ({row.trims} trims)" if row.case.trim else row.case.mode
        colour = "green" if row.ratio <= GOAL else "red"
        out.add_row(
            row.case.adapter_id,
            mode,
            str(row.turns),
            f"{row.bare_ms:.3f}",
            f"{row.shortcut_ms:.3f}",
            f"{row.satchel_ms:.3f}",
            f"[{colour}]{row.ratio:.3f}x[/{colour}]",
            f"{row.shortcut_ratio:.3f}x",
        )
    return out


def summary(rows: Sequence[Row], repeat: int) -> dict[str, Any]:
    main_rows = [row for row in rows if not row.case.trim]
    per_adapter: dict[str, float] = {}
    for row in main_rows:
        worst = per_adapter.get(row.case.adapter_id, 0.0)
        per_adapter[row.case.adapter_id] = round(max(worst, row.ratio), 4)
    trim_rows = [row.ratio for row in rows if row.case.trim]
    return {
        "benchmark": "turns",
        "turns": rows[0].turns if rows else 0,
        "repeat": repeat,
        "goal": GOAL,
        "overhead_ratio": round(max(row.ratio for row in main_rows), 4),
        "ratio_to_shortcut_loop": round(max(row.shortcut_ratio for row in main_rows), 4),
        "trimming_overhead_ratio": round(max(trim_rows), 4) if trim_rows else None,
        "per_adapter": per_adapter,
        "rows": [row.to_json() for row in rows],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200, help="turns per conversation")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per loop (median)")
    parser.add_argument(
        "--adapter", action="append", choices=sorted(PROFILE_IDS), help="only its rows (repeat)"
    )
    args = parser.parse_args(argv)
    if args.turns < 1 or args.repeat < 1:
        parser.error("--turns and --repeat must be at least 1")
    cases = [case for case in CASES if not args.adapter or case.adapter_id in args.adapter]
    turns = frames(args.turns)
    progress = Console(stderr=True)
    rows: list[Row] = []
    for number, case in enumerate(cases, 1):
        progress.print(
            f"[{number}/{len(cases)}] {case.adapter_id}, {case.mode}: "
            f"{args.repeat} x {args.turns} turns per loop",
            markup=False,
            highlight=False,
        )
        rows.append(measure(case, turns, args.repeat))
    Console(width=max(Console().width, 120)).print(table(rows, args.repeat))
    print(json.dumps(summary(rows, args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
