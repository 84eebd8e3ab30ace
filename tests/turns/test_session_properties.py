"""Property: whatever happens to attempts, only accepted turns shape state, requests and usage.

A reference model replays the accepted turns' inputs, buffered inputs and answers (and, after a
compaction, the rebuilt shape) and predicts every request the scripted server must receive. For
DeepSeek an answer is one call to the owned answer tool, replayed with its reasoning and followed by
the fixed tool result; every action request carries the tool and thinking mode, summaries no tool.
For Gemini Interactions the conversation is the request's `input` steps: each accepted user input,
then every step the model generated as served (thoughts with their signatures), the bridge after a
compaction, the pending inputs; the system instruction travels apart and nothing is stored.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import googlewire
from chatwire import Answer, Call, Called, ChatServer, DeepSeekServer, Failure, deepseek_usage
from satchel.compaction import BRIDGE_TEMPLATE, SUMMARY_PROMPT
from satchel.providers.chat.deepseek_state import ANSWER_TOOL, ANSWER_TOOL_NAME, TOOL_RESULT
from satchel.turns import AcceptedTurn, NeutralMessage, RetryPolicy, Session, TurnFailed, Usage
from turns.kit import (
    Sleeps,
    compactor,
    deepseek_adapter,
    dumped,
    google_adapter,
    is_summary,
    open_source_adapter,
    openai_adapter,
    parse_action,
    system,
    user,
)

ACTION_OUTCOMES = (
    *("valid",) * 6,
    "invalid",
    "empty",
    "truncated",
    "refusal",
    "interrupted",
    "server_error",
    "rate_limited",
    "overflow",
    "overflow",
    "fatal",
)
SUMMARY_OUTCOMES = (
    *("ok",) * 5,
    "overflow",
    "overflow",
    "server_error",
    "empty",
    "truncated",
    "refusal",
    "interrupted",
    "fatal",
)
KINDS = {
    "invalid": "invalid_answer",
    "empty": "invalid_response",
    "truncated": "truncated",
    "refusal": "refusal",
    "server_error": "transient",
    "rate_limited": "transient",
    "overflow": "context_overflow",
    "fatal": "provider_error",
}
REPLAYS = (("reasoning_content",), ("reasoning",), ("reasoning_content", "reasoning"))
THINKING = {"type": "enabled"}
ABSENT = object()  # an expected request key that must not be sent
# Gemini has no refusal field: a safety stop is a failed interaction, an invalid response.
GOOGLE_KINDS = {**KINDS, "refusal": "invalid_response"}


@dataclass
class Interaction:
    """A Gemini answer and the steps the server generated for it (signatures included)."""

    answer: googlewire.Answer
    steps: list[dict[str, Any]]

    @property
    def text(self) -> str:
        return self.answer.text

    @property
    def reasoning(self) -> str | None:
        shown = [summary_text(s) for s in self.steps if s["type"] == "thought"]
        return "\n\n".join(text for text in shown if text) or None


Reply = Answer | Called | Failure | Interaction | googlewire.Failure | None


def failure_kind(outcome: str, stream: bool, google: bool = False) -> str:
    if outcome == "interrupted":
        return "interrupted_stream" if stream else "transient"
    return (GOOGLE_KINDS if google else KINDS)[outcome]


def backoff(failures: int) -> float:
    return min(30.0, 2.0 ** (failures - 1))


class OutcomeServer(ChatServer):
    """Serves each request the next scripted outcome of its kind, with unique usage counts.

    Every rejected answer carries a unique marker in its text and reasoning (so does the
    reasoning of an accepted summary); `reported` sums the usage the server actually sent.
    """

    def __init__(self) -> None:
        super().__init__()
        self.actions: deque[str] = deque()
        self.summaries: deque[str] = deque()
        self.outcomes: list[tuple[str, str, Reply]] = []
        self.reported = Usage()
        self.turn_usage: dict[str, Usage] = {}
        self.leaks: list[tuple[int, str]] = []
        self._numbers = itertools.count(1)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        kind = "summary" if is_summary(body) else "action"
        queue = self.summaries if kind == "summary" else self.actions
        outcome = queue.popleft() if queue else ("ok" if kind == "summary" else "overrun")
        number = next(self._numbers)
        reply = self.reply(kind, outcome, number, stream=bool(body.get("stream")))
        self.outcomes.append((kind, outcome, reply))
        if kind == "summary" or outcome != "valid":
            self.leaks.append((len(self.requests), f"LEAK{number:05d}Z"))
        if reply is None:
            self.requests.append(body)
            raise httpx.ConnectError("connection dropped")
        usage = reported_usage(reply, stream=bool(body.get("stream")))
        if usage is not None:
            self.reported = self.reported + usage
            self.turn_usage[kind] = self.turn_usage.get(kind, Usage()) + usage
        self.script.appendleft(reply)
        return super().handle(request)

    def reply(self, kind: str, outcome: str, n: int, *, stream: bool) -> Reply:
        marker = f"LEAK{n:05d}Z"
        counts: dict[str, Any] = {
            "prompt_tokens": 1000 + 37 * n,
            "completion_tokens": 7 + 3 * n,
            "cached_tokens": n,
            "reasoning_tokens": n % 5,
        }
        if kind == "action" and self.deepseek:
            called = deepseek_reply(outcome, n, marker, stream=stream)
            if called is not None or outcome == "interrupted":
                return called
        if outcome == "valid":
            return Answer(f"ACT {n}", reasoning=None if n % 4 == 0 else f"thought {n}", **counts)
        if outcome == "ok":
            return Answer(f"SUMMARY {n}", reasoning=f"summary thoughts {marker}", **counts)
        word = "SUMMARY" if kind == "summary" else "ACT"
        answers = {
            "invalid": Answer(f"nonsense {marker}", reasoning=f"bad {marker}", **counts),
            "empty": Answer(" ", reasoning=marker, **counts),
            "truncated": Answer(
                f"{word} {marker}", reasoning=marker, finish_reason="length", **counts
            ),
            "refusal": Answer(f"{word} {marker}", reasoning=marker, refusal=marker, **counts),
        }
        if outcome in answers:
            return answers[outcome]
        if outcome == "interrupted":
            if not stream:
                return None
            return Answer(f"{word} {marker}", reasoning=marker, interrupt_after=2, **counts)
        failures = {
            "server_error": Failure(500, message=marker, type="server_error"),
            "rate_limited": Failure(429, message=marker, type="rate_limit_error"),
            "overflow": Failure(400, message=marker, code="context_length_exceeded"),
            "fatal": Failure(401, message=marker, type="authentication_error"),
        }
        return failures.get(outcome, Failure(500, message="no outcome left", type="overrun"))

    deepseek = False


class DeepSeekOutcomeServer(OutcomeServer, DeepSeekServer):
    """`OutcomeServer` whose action answers are DeepSeek answer-tool calls; summaries stay text."""

    deepseek = True


SUMMARY_STEP = {"type": "user_input", "content": [{"type": "text", "text": SUMMARY_PROMPT}]}


def summary_text(step: dict[str, Any]) -> str:
    return "".join(part["text"] for part in step.get("summary", ()))


class GoogleOutcomeServer(googlewire.InteractionsServer):
    """`OutcomeServer` for Gemini Interactions: each request's next scripted outcome, its
    answers carrying unique usage and, when rejected (or a summary), a marker in the text, the
    thought summary and the signature."""

    google = True

    def __init__(self) -> None:
        super().__init__()
        self.actions: deque[str] = deque()
        self.summaries: deque[str] = deque()
        self.outcomes: list[tuple[str, str, Reply]] = []
        self.reported = Usage()
        self.turn_usage: dict[str, Usage] = {}
        self.leaks: list[tuple[int, str]] = []
        self._numbers = itertools.count(1)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        kind = "summary" if body["input"][-1] == SUMMARY_STEP else "action"
        queue = self.summaries if kind == "summary" else self.actions
        outcome = queue.popleft() if queue else ("ok" if kind == "summary" else "overrun")
        number = next(self._numbers)
        stream = bool(body.get("stream"))
        reply = self.reply(kind, outcome, number, stream=stream)
        if kind == "summary" or outcome != "valid":
            self.leaks.append((len(self.requests), f"LEAK{number:05d}Z"))
        if reply is None:
            self.requests.append(body)
            self.outcomes.append((kind, outcome, None))
            raise httpx.ConnectError("connection dropped")
        self.script.appendleft(reply)
        response = super().handle(request)
        steps = self.served[-1]
        served: Reply = reply
        if isinstance(reply, googlewire.Answer) and steps is not None:
            served = Interaction(reply, steps)
        self.outcomes.append((kind, outcome, served))
        usage = reported_usage(served, stream=stream)
        if usage is not None:
            self.reported = self.reported + usage
            self.turn_usage[kind] = self.turn_usage.get(kind, Usage()) + usage
        return response

    def reply(
        self, kind: str, outcome: str, n: int, *, stream: bool
    ) -> googlewire.Answer | googlewire.Failure | None:
        marker = f"LEAK{n:05d}Z"
        counts: dict[str, Any] = {
            "input_tokens": 1000 + 37 * n,
            "output_tokens": 7 + 3 * n,
            "cached_tokens": n,
            "thought_tokens": n % 5,
        }
        answer = googlewire.Answer
        if outcome == "valid":
            # No thought, a thought with no summary, or a summarized one; signed by the server.
            thought = None if n % 4 == 0 else "" if n % 4 == 1 else f"thought {n}"
            return answer(f"ACT {n}", thought=thought, steps_in_completed=n % 3 == 0, **counts)
        rejected: dict[str, Any] = {"thought": f"bad {marker}", "signature": f"sig{marker}"}
        if outcome == "ok":
            return answer(f"SUMMARY {n}", **{**rejected, "thought": f"summary {marker}"}, **counts)
        word = "SUMMARY" if kind == "summary" else "ACT"
        answers = {
            "invalid": answer(f"nonsense {marker}", **rejected, **counts),
            "empty": answer(" ", **rejected, **counts),
            "truncated": answer(f"{word} {marker}", status="incomplete", **rejected, **counts),
            "refusal": answer(
                f"{word} {marker}", status="failed", error_code="SAFETY", **rejected, **counts
            ),
        }
        if outcome in answers:
            return answers[outcome]
        if outcome == "interrupted":
            if not stream:
                return None
            return answer(f"{word} {marker}", interrupt_after=2, **rejected, **counts)
        overflow = f"The input token count (2000000) exceeds the maximum number of tokens {marker}"
        failures = {
            "server_error": googlewire.Failure(500, marker, "INTERNAL"),
            "rate_limited": googlewire.Failure(429, marker, "RESOURCE_EXHAUSTED"),
            "overflow": googlewire.Failure(400, overflow, "INVALID_ARGUMENT"),
            "fatal": googlewire.Failure(401, marker, "UNAUTHENTICATED"),
        }
        return failures.get(outcome, googlewire.Failure(500, "no outcome left", "INTERNAL"))


def reported_usage(reply: Reply, *, stream: bool) -> Usage | None:
    """The usage the server reports with `reply`: none for a failure or a dropped stream."""
    if isinstance(reply, Interaction):
        answer = reply.answer
        if answer.interrupt_after is not None and stream:
            return None
        output = answer.output_tokens + answer.thought_tokens
        return Usage.from_counts(
            input_tokens=answer.input_tokens,
            output_tokens=output,
            total_tokens=answer.input_tokens + output,
            reasoning_tokens=answer.thought_tokens,
            cache_read_tokens=answer.cached_tokens,
        )
    if isinstance(reply, Answer) and (reply.interrupt_after is None or not stream):
        return Usage.from_counts(
            input_tokens=reply.prompt_tokens,
            output_tokens=reply.completion_tokens,
            reasoning_tokens=reply.reasoning_tokens,
            cache_read_tokens=reply.cached_tokens,
        )
    if isinstance(reply, Called) and reply.usage and (reply.interrupt_after is None or not stream):
        counts = reply.usage
        return Usage.from_counts(
            input_tokens=counts["prompt_tokens"],
            output_tokens=counts["completion_tokens"],
            total_tokens=counts["total_tokens"],
            reasoning_tokens=counts["completion_tokens_details"]["reasoning_tokens"],
            cache_read_tokens=counts["prompt_cache_hit_tokens"],
        )
    return None


def deepseek_reply(outcome: str, n: int, marker: str, *, stream: bool) -> Called | None:
    """The DeepSeek action answer for `outcome`, or None where it is not an answer."""
    usage = deepseek_usage(1000 + 37 * n, 7 + 3 * n, cached=n, reasoning=n % 5)

    def called(text: str, reasoning: str | None, **extra: Any) -> Called:
        call = Call(f"call_{n:05d}", arguments=json.dumps({"answer": text}))
        return Called((call,), reasoning, usage=usage, **extra)

    if outcome == "valid":
        return called(f"ACT {n}", None if n % 4 == 0 else f"thought {n}")
    answers = {
        "invalid": called(f"nonsense {marker}", f"bad {marker}"),
        "empty": called(" ", marker),
        "truncated": called(f"ACT {marker}", marker, finish_reason="length"),
        "refusal": called(f"ACT {marker}", marker, finish_reason="content_filter"),
    }
    if outcome in answers:
        return answers[outcome]
    if outcome == "interrupted":
        return called(f"ACT {marker}", marker, interrupt_after=2) if stream else None
    return None


def answered(reply: Answer | Called | Interaction) -> str:
    """The answer text the session hands to the parser."""
    if isinstance(reply, Called):
        text = json.loads(reply.calls[0].arguments)["answer"]
        assert isinstance(text, str)
        return text
    return reply.text


@dataclass
class RefTurn:
    items: list[NeutralMessage]
    reasoning: str | None


@dataclass
class Reference:
    """The accepted conversation, built only from accepted turns and buffered inputs."""

    fields: tuple[str, ...]
    deepseek: bool = False
    google = False
    conversation = "messages"  # the request key the conversation travels in
    preamble: list[NeutralMessage] = field(default_factory=list)
    bridge: NeutralMessage | None = None
    turns: list[RefTurn] = field(default_factory=list)
    pending: list[NeutralMessage] = field(default_factory=list)
    compactions: int = 0

    def history(self, turns: list[RefTurn] | None = None) -> list[NeutralMessage]:
        lead = [self.bridge] if self.bridge else []
        return [*lead, *(m for t in (self.turns if turns is None else turns) for m in t.items)]

    def request(self, new: list[NeutralMessage]) -> list[NeutralMessage]:
        return [*self.preamble, *self.history(), *self.pending, *new]

    def summary_request(self, turns: list[RefTurn]) -> list[NeutralMessage]:
        return [*self.preamble, *self.history(turns), user(SUMMARY_PROMPT)]

    def bridge_item(self, summary: str) -> NeutralMessage:
        return user(BRIDGE_TEMPLATE.format(summary=summary))

    def commit(self, new: list[NeutralMessage], reply: Any) -> None:
        inputs = [*self.pending, *new]
        if not self.history() and not self.preamble:
            lead = 0
            while lead < len(inputs) and inputs[lead]["role"] == "system":
                lead += 1
            self.preamble, inputs = inputs[:lead], inputs[lead:]
        if isinstance(reply, Called):
            self.turns.append(RefTurn([*inputs, *self.called(reply)], reply.reasoning))
            self.pending = []
            return
        answer: NeutralMessage = {"role": "assistant", "content": reply.text}
        if reply.reasoning and self.fields:
            answer.update(dict.fromkeys(self.fields, reply.reasoning))
        self.turns.append(RefTurn([*inputs, answer], reply.reasoning))
        self.pending = []

    @staticmethod
    def called(reply: Called) -> list[NeutralMessage]:
        """An accepted DeepSeek answer as replayed: the call with its reasoning, then its result."""
        (call,) = reply.calls
        answer: NeutralMessage = {"role": "assistant", "content": reply.content or ""}
        if reply.reasoning is not None:
            answer["reasoning_content"] = reply.reasoning
        answer["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": ANSWER_TOOL_NAME, "arguments": call.arguments},
            }
        ]
        return [answer, {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT}]

    def keys(self, kind: str, new: list[NeutralMessage] | None = None) -> dict[str, Any]:
        """The request keys besides `messages` each request must carry (or, ABSENT, leave out)."""
        if not self.deepseek:
            return {}
        tools = [ANSWER_TOOL] if kind == "action" else ABSENT
        return {"tools": tools, "tool_choice": ABSENT, "thinking": THINKING}

    def payload(self) -> dict[str, Any]:
        return {"preamble": self.preamble, "messages": self.history(), "pending": self.pending}

    def boundaries(self) -> list[tuple[Any, ...]]:
        start = 1 if self.bridge else 0
        out = []
        for turn in self.turns:
            shown = tuple(self.readable(m) for m in turn.items)
            out.append((start, start + len(turn.items), shown, turn.reasoning))
            start += len(turn.items)
        return out

    def readable(self, message: NeutralMessage) -> NeutralMessage:
        out = {"role": message["role"], "content": message["content"]}
        for name in self.fields:
            if name in message:
                out["reasoning"] = message[name]
                break
        for name in ("tool_calls", "tool_call_id"):
            if name in message:
                out[name] = message[name]
        return out


def google_step(message: NeutralMessage) -> dict[str, Any]:
    return {"type": "user_input", "content": [{"type": "text", "text": message["content"]}]}


@dataclass
class GoogleTurn:
    items: list[dict[str, Any]]
    reasoning: str | None


@dataclass
class GoogleReference:
    """`Reference` for Gemini Interactions: the accepted conversation as `input` steps, the
    session's system instruction apart."""

    google = True
    conversation = "input"
    system: str | None = None
    bridge: dict[str, Any] | None = None
    turns: list[GoogleTurn] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    compactions: int = 0

    def history(self, turns: list[GoogleTurn] | None = None) -> list[dict[str, Any]]:
        lead = [self.bridge] if self.bridge else []
        return [*lead, *(s for t in (self.turns if turns is None else turns) for s in t.items)]

    @staticmethod
    def users(new: list[NeutralMessage]) -> list[dict[str, Any]]:
        return [google_step(m) for m in new if m["role"] == "user"]

    @staticmethod
    def system_of(new: list[NeutralMessage]) -> str | None:
        return next((str(m["content"]) for m in new if m["role"] == "system"), None)

    def request(self, new: list[NeutralMessage]) -> list[dict[str, Any]]:
        return [*self.history(), *self.pending, *self.users(new)]

    def summary_request(self, turns: list[GoogleTurn]) -> list[dict[str, Any]]:
        return [*self.history(turns), SUMMARY_STEP]

    def bridge_item(self, summary: str) -> dict[str, Any]:
        return google_step(user(BRIDGE_TEMPLATE.format(summary=summary)))

    def commit(self, new: list[NeutralMessage], reply: Interaction) -> None:
        items = [*self.pending, *self.users(new), *reply.steps]
        self.turns.append(GoogleTurn(items, reply.reasoning))
        self.system = self.system_of(new) or self.system
        self.pending = []

    def keys(self, kind: str, new: list[NeutralMessage] | None = None) -> dict[str, Any]:
        system = self.system_of(new or []) or self.system
        return {"store": False, "system_instruction": ABSENT if system is None else system}

    def payload(self) -> dict[str, Any]:
        return {"system": self.system, "steps": self.history(), "pending": self.pending}

    def boundaries(self) -> list[tuple[Any, ...]]:
        start = 1 if self.bridge else 0
        out = []
        for turn in self.turns:
            shown = tuple(self.readable(step) for step in turn.items)
            out.append((start, start + len(turn.items), shown, turn.reasoning))
            start += len(turn.items)
        return out

    @staticmethod
    def readable(step: dict[str, Any]) -> NeutralMessage:
        text = "".join(part["text"] for part in step.get("content", ()))
        if step["type"] == "user_input":
            return {"role": "user", "content": text}
        if step["type"] == "thought":
            return {"role": "assistant", "content": "", "reasoning": summary_text(step)}
        return {"role": "assistant", "content": text}


@dataclass
class Prediction:
    accepted: str | None = None
    calls: int = 0
    recovered: bool = False
    kinds: list[str] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)
    compaction_sleeps: list[float] = field(default_factory=list)
    compacted: bool = False


Served = Iterator[tuple[dict[str, Any], tuple[str, str, Reply]]]


def expect(
    served: Served,
    kind: str,
    outcome: str,
    messages: list[Any],
    keys: dict[str, Any] | None = None,
    conversation: str = "messages",
) -> Any:
    entry = next(served, None)
    assert entry is not None, f"expected a {kind} request ({outcome}); none was made"
    body, (got_kind, got_outcome, reply) = entry
    assert (got_kind, got_outcome) == (kind, outcome)
    assert body[conversation] == messages
    for key, value in (keys or {}).items():
        if value is ABSENT:
            assert key not in body, f"{key} sent in a {kind} request"
        else:
            assert body.get(key) == value, f"{key} of a {kind} request"
    return reply


@dataclass
class Limits:
    max_attempts: int
    summary_attempts: int
    compacting: bool
    stream: bool


def replay_turn(
    ref: Any,
    new: list[NeutralMessage],
    actions: list[str],
    summaries: list[str],
    served: Served,
    limits: Limits,
) -> Prediction:
    """Walk the served requests as the contract predicts them, updating `ref` on commit."""
    left, out = deque(actions), Prediction()
    summary_left = deque(summaries)
    counted = transient = 0
    while True:
        outcome = left.popleft()
        out.calls += 1
        counted += 1
        reply = expect(
            served, "action", outcome, ref.request(new), ref.keys("action", new), ref.conversation
        )
        if outcome == "valid":
            ref.commit(new, reply)
            out.accepted = answered(reply)
            return out
        kind = failure_kind(outcome, limits.stream, ref.google)
        out.kinds.append(kind)
        if outcome == "overflow":
            if not limits.compacting or out.recovered:
                return out
            out.recovered = True
            counted -= 1
            if not replay_compaction(ref, summary_left, served, limits, out):
                return out
            continue
        if outcome == "fatal" or counted >= limits.max_attempts:
            return out
        if kind == "transient":
            transient += 1
            out.sleeps.append(backoff(transient))


def replay_compaction(
    ref: Any, left: deque[str], served: Served, limits: Limits, out: Prediction
) -> bool:
    candidate, tail = list(ref.turns), []
    failures = transient = 0
    while True:
        if not candidate:
            return False
        outcome = left.popleft() if left else "ok"
        reply = expect(
            served,
            "summary",
            outcome,
            ref.summary_request(candidate),
            ref.keys("summary"),
            ref.conversation,
        )
        if outcome == "overflow":
            tail.insert(0, candidate.pop())
            continue
        if outcome == "ok":
            ref.bridge = ref.bridge_item(reply.text)
            ref.turns = tail
            ref.compactions += 1
            out.compacted = True
            return True
        failures += 1
        if outcome == "fatal" or failures >= limits.summary_attempts:
            return False
        if failure_kind(outcome, limits.stream, ref.google) == "transient":
            transient += 1
            out.compaction_sleeps.append(backoff(transient))


@dataclass(frozen=True)
class Step:
    buffered: int
    system: bool
    users: int
    actions: list[str]
    summaries: list[str]


@dataclass(frozen=True)
class Run:
    max_attempts: int
    summary_attempts: int
    stream: bool
    replay: tuple[str, ...]
    steps: list[Step]


@st.composite
def runs(draw: st.DrawFn, compacting: bool) -> Run:
    """Random runs; with a compactor, half the turns open with an overflow to recover from."""
    attempts = draw(st.integers(1, 3))
    actions = st.lists(
        st.sampled_from(ACTION_OUTCOMES), min_size=attempts + 1, max_size=attempts + 1
    )
    if compacting:
        actions = st.tuples(st.booleans(), actions).map(
            lambda drawn: ["overflow", *drawn[1][:-1]] if drawn[0] else drawn[1]
        )
    step = st.builds(
        Step,
        buffered=st.integers(0, 2),
        system=st.booleans(),
        users=st.integers(1, 2),
        actions=actions,
        summaries=st.lists(st.sampled_from(SUMMARY_OUTCOMES), max_size=3),
    )
    return Run(
        max_attempts=attempts,
        summary_attempts=draw(st.integers(1, 3)),
        stream=draw(st.booleans()),
        replay=draw(st.sampled_from(REPLAYS)),
        steps=draw(st.lists(step, min_size=2, max_size=5)),
    )


CONFIGS = (
    "openai-rolling",
    "open-source",
    "open-source-compacting",
    "deepseek",
    "deepseek-compacting",
    "google",
    "google-compacting",
)


@pytest.mark.parametrize("config", CONFIGS)
@settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_only_accepted_turns_shape_state_requests_and_usage(
    config: str, data: st.DataObject
) -> None:
    compacting = config.endswith("-compacting")
    run = data.draw(runs(compacting))
    deepseek = config.startswith("deepseek")
    google = config.startswith("google")
    server: Any = DeepSeekOutcomeServer() if deepseek else OutcomeServer()
    ref: Any = None
    if google:
        server = GoogleOutcomeServer()
        adapter: Any = google_adapter(server, stream=run.stream)
        ref = GoogleReference()
    elif config == "openai-rolling":
        adapter = openai_adapter(server, stream=run.stream)
        fields: tuple[str, ...] = ()
    elif deepseek:
        adapter = deepseek_adapter(server, stream=run.stream)
        fields = ("reasoning_content",)  # the one field DeepSeek replays; `run.replay` unused
    else:
        adapter = open_source_adapter(server, stream=run.stream, replay=run.replay)
        fields = run.replay
    sleeps, compaction_sleeps = Sleeps(), Sleeps()
    session = Session(
        adapter,
        policy=RetryPolicy(max_attempts=run.max_attempts),
        compactor=compactor(adapter, max_attempts=run.summary_attempts, sleep=compaction_sleeps)
        if compacting
        else None,
        sleep=sleeps,
    )
    limits = Limits(run.max_attempts, run.summary_attempts, compacting, run.stream)
    if ref is None:
        ref = Reference(fields, deepseek)
    accepted_usage = Usage()
    carried = Usage()  # an installed compaction of an abandoned turn: billed to the next one
    for index, step in enumerate(run.steps):
        if step.buffered:
            buffered = [user(f"buffered {index}.{k}") for k in range(step.buffered)]
            session.buffer(buffered)
            ref.pending.extend([google_step(m) for m in buffered] if google else buffered)
            assert session.state.payload == ref.payload()
        # Gemini fixes the system instruction with the session's first accepted turn: the same
        # one may come again, and none may come after turns were accepted without it.
        if google:
            allowed = ref.system is not None or not ref.history()
            new = [system("rules")] if step.system and allowed else []
        else:
            new = [system(f"rules {index}")] if step.system else []
        new += [user(f"frame {index}.{k}") for k in range(step.users)]
        server.actions, server.summaries = deque(step.actions), deque(step.summaries)
        server.turn_usage = {}
        first = len(server.requests)
        abandoned_before = session.abandoned_usage
        sleeps.clear()
        compaction_sleeps.clear()

        result: AcceptedTurn[str] | TurnFailed
        try:
            result = session.turn(new, parse_action)
        except TurnFailed as exc:
            result = exc

        served = zip(server.requests[first:], server.outcomes[first:], strict=True)
        prediction = replay_turn(ref, new, step.actions, step.summaries, served, limits)
        assert next(served, None) is None, "more requests than the policy allows"
        action_usage = server.turn_usage.get("action", Usage())
        summary_usage = server.turn_usage.get("summary", Usage())
        spent = action_usage + summary_usage
        installed = summary_usage if prediction.compacted else Usage()
        if prediction.accepted is not None:
            assert isinstance(result, AcceptedTurn)
            assert result.action == prediction.accepted
            assert result.attempts == prediction.calls
            assert [failure.kind for failure in result.failures] == prediction.kinds
            assert result.usage == carried + spent
            compaction = carried + installed
            assert result.compaction_usage == (compaction if compaction.requests else None)
            accepted_usage = accepted_usage + result.usage
            carried = Usage()
        else:
            assert isinstance(result, TurnFailed)
            assert result.attempts == prediction.calls
            lost = action_usage if prediction.compacted else spent
            assert result.usage == lost
            assert session.abandoned_usage == abandoned_before + lost
            carried = carried + installed
            assert session.pending_usage == carried
        assert prediction.calls <= run.max_attempts + int(prediction.recovered)
        assert sleeps == prediction.sleeps
        assert compaction_sleeps == prediction.compaction_sleeps

        state = session.state
        assert state.payload == ref.payload()
        got = [
            (b.start_item, b.end_item, b.messages, b.reasoning_summary)
            for b in state.accepted_turns
        ]
        assert got == ref.boundaries()
        assert session.compactions == ref.compactions
        assert session.total_usage == server.reported
        assert session.total_usage == accepted_usage + session.abandoned_usage + carried

        state_text = dumped(state.to_json())
        for position, marker in server.leaks:
            assert marker not in state_text
            for body in server.requests[position + 1 :]:
                assert marker not in dumped(body)
