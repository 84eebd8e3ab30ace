"""Per-turn overhead of `satchel.turns.Session` against a bare `openai` SDK loop.

A long conversation (200 turns by default: a system prompt, then one ~1.5 KB observation frame
per user turn, a short answer per assistant turn, plus ~400 characters of reasoning for the
open-weight adapter) runs through two loops that share one `httpx.MockTransport` handler:

* `Session.turn` with the adapter the example profile builds (`openai.chat_completions.v1` with
  `manual_rolling`, `open_source.chat_completions.v1` with `continuous_conversation`), and
* a hand-written loop calling `client.chat.completions.create` with the same growing message
  list (replaying `reasoning_content` for the open-weight adapter, dropping the same oldest turns
  in the trimming row) and reading the answer, reasoning and usage the same way, and
* the same loop sending as satchel's adapters send (the messages in `extra_body`: the same bytes,
  without the SDK's walk over every message), so satchel's own work shows apart from that saving.

Each adapter runs streamed (the example profiles' default) and non-streamed, with a trim limit
so large that the window is held (the main figure), plus one streamed `manual_rolling` row whose
limit makes the window trim every dozen turns or so.

The handler replays precomputed response bytes (token-sized stream chunks), so serving a request
costs little and the same for every loop. A warm-up round over the first turns checks that the
loops send byte-identical requests and see the same usage. Each timed run advances the
conversations in lockstep, one turn each, rotating which goes first, so drift and background
load hit all alike; turns are timed in CPU time of this process. A row reports the median of
`--repeat` runs: ms per turn for each loop, the overhead ratio satchel / bare and the ratio to
the loop that sends as satchel does (medians of the paired runs). The goal is at most 1.3x.
The last line printed is one JSON object whose `overhead_ratio` is the worst ratio of the
held-window rows, followed by every row's figures.
"""

from __future__ import annotations

import argparse
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

import httpx
import openai
from rich.console import Console
from rich.table import Table

from satchel.providers import Profile, build_adapter, example_profiles, parse_profiles
from satchel.providers.openai_sdk import sdk_arguments
from satchel.turns import Message, ModelResponse, Session

GOAL = 1.3
OPENAI_ID = "openai.chat_completions.v1"
OPEN_SOURCE_ID = "open_source.chat_completions.v1"
ENV = {"OPENAI_API_KEY": "sk-bench", "OPEN_WEIGHT_API_KEY": "bench"}
HELD_LIMIT_TOKENS = 50_000_000
TRIM_LIMIT_TOKENS = 20_000
TRIM_TARGET_FRACTION = 0.7
FRAME_ROWS, FRAME_COLS = 22, 64
ANSWER = "ACTION3\nThe key is two cells to the right; moving there before the timer runs out."
REASONING_SEED = 7
REASONING_CHARS = 400
TOKEN_CHARS = 4
WARMUP_TURNS = 60

Conversation = Callable[[Sequence[Message]], Iterator[int]]


# ---- the conversation -------------------------------------------------------------------------


def system_prompt() -> Message:
    rules = (
        "You play a grid game one action per turn. Each user turn shows the current frame: "
        "'#' is a wall, '.' floor, '@' you, 'K' a key, 'D' a door, digits are timers. "
        "Answer with exactly one action among ACTION1 (up), ACTION2 (down), ACTION3 (right), "
        "ACTION4 (left), ACTION5 (interact), on the first line, then one short sentence. "
    )
    return {"role": "system", "content": rules * 3}


def frames(count: int) -> list[Message]:
    """`count` user turns, each an observation frame of about 1.5 KB."""
    out: list[Message] = []
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


def message_tokens(message: Message) -> int:
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

    def __init__(self, *, model: str, reasoning: str | None, stream: bool) -> None:
        self.stream = stream
        self.digests: list[bytes] | None = None
        self.json_headers = [("content-type", "application/json"), ("x-request-id", "req_b")]
        self.sse_headers = [("content-type", "text/event-stream"), ("x-request-id", "req_b")]
        message: dict[str, Any] = {"role": "assistant", "content": ANSWER, "refusal": None}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        completion = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1_780_000_000,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": USAGE,
        }
        self.body = json.dumps(completion).encode()
        deltas: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant"}, None)]
        deltas += [({"reasoning_content": p}, None) for p in pieces(reasoning or "")]
        deltas += [({"content": p}, None) for p in pieces(ANSWER)]
        deltas.append(({}, "stop"))
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


# ---- the two loops ------------------------------------------------------------------------------


def answer_text(response: ModelResponse) -> str:
    return response.text


def satchel_conversation(profile: Profile, http: httpx.Client) -> Conversation:
    adapter = build_adapter(profile, http_client=http, env=ENV)
    policy = profile.retry_policy()
    system = system_prompt()

    def run(turns: Sequence[Message]) -> Iterator[int]:
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


def bare_conversation(
    profile: Profile,
    http: httpx.Client,
    *,
    replay: str | None,
    window: BareWindow | None,
    shortcut: bool = False,
) -> Conversation:
    client = openai.OpenAI(
        api_key=ENV[profile.client.api_key_env or "OPENAI_API_KEY"],
        base_url=profile.client.base_url,
        timeout=profile.client.timeout_s,
        max_retries=profile.client.max_retries,
        http_client=cast(Any, http),
    )
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

    def run(turns: Sequence[Message]) -> Iterator[int]:
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
            answer: Message = {"role": "assistant", "content": text}
            if replay and reasoning:
                answer[replay] = reasoning
            messages.append(answer)
            if window is not None:
                window.add(message_tokens(frame) + message_tokens(answer))
            yield used

    return run


# ---- measurement --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    adapter_id: str
    stream: bool
    trim: bool = False

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
    base = next(p for p in example_profiles().values() if p.runtime.adapter_id == case.adapter_id)
    data = base.model_dump(mode="json", exclude_none=True)
    data["request"]["stream"] = case.stream
    if case.adapter_id == OPENAI_ID:
        limit = TRIM_LIMIT_TOKENS if case.trim else HELD_LIMIT_TOKENS
        data["runtime"]["trim"] = {"limit_tokens": limit, "target_fraction": TRIM_TARGET_FRACTION}
    return parse_profiles([data], "benchmarks/turns.py")[base.id]


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


def measure(case: Case, turns: Sequence[Message], repeat: int) -> Row:
    profile = profile_for(case)
    replay = "reasoning_content" if case.adapter_id == OPEN_SOURCE_ID else None
    reasoning = reasoning_text() if replay else None
    model = str(profile.request["model"])
    server = WireServer(model=model, reasoning=reasoning, stream=case.stream)
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    windows = [
        BareWindow(TRIM_LIMIT_TOKENS, int(TRIM_LIMIT_TOKENS * TRIM_TARGET_FRACTION))
        if case.trim
        else None
        for _ in range(2)
    ]
    satchel = satchel_conversation(profile, http)
    bare = bare_conversation(profile, http, replay=replay, window=windows[0])
    shortcut = bare_conversation(profile, http, replay=replay, window=windows[1], shortcut=True)

    warm = turns[:WARMUP_TURNS]
    server.digests = []
    satchel_used = list(satchel(warm))
    satchel_sent = server.digests
    for loop in (bare, shortcut):
        server.digests = []
        if list(loop(warm)) != satchel_used or server.digests != satchel_sent:
            raise SystemExit(f"{case.adapter_id} {case.mode}: the loops sent different requests")
    server.digests = None

    runs = [lockstep(satchel(turns), bare(turns), shortcut(turns)) for _ in range(repeat)]
    http.close()
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
    Case(OPENAI_ID, stream=True, trim=True),
)


def table(rows: Sequence[Row], repeat: int) -> Table:
    out = Table(
        title=f"satchel Session vs the bare openai SDK loop, CPU time, median of {repeat} runs",
        caption=(
            f"ratio = satchel / bare (median of paired runs; goal <= {GOAL}x); as sent = the bare"
            " loop sending as satchel does (messages in extra_body)"
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
    args = parser.parse_args(argv)
    if args.turns < 1 or args.repeat < 1:
        parser.error("--turns and --repeat must be at least 1")
    turns = frames(args.turns)
    progress = Console(stderr=True)
    rows: list[Row] = []
    for number, case in enumerate(CASES, 1):
        progress.print(
            f"[{number}/{len(CASES)}] {case.adapter_id}, {case.mode}: "
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
