"""Property: whatever happens to attempts, only accepted turns shape state, requests and usage.

A reference model replays the accepted turns' inputs, buffered inputs and answers (and, after a
compaction, the rebuilt shape) and predicts every request the scripted server must receive. For
DeepSeek an answer is one call to the owned answer tool, replayed with its reasoning and followed by
the fixed tool result; every action request carries the tool and thinking mode, summaries no tool.
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

from chatwire import Answer, Call, Called, ChatServer, DeepSeekServer, Failure, deepseek_usage
from satchel.compaction import BRIDGE_TEMPLATE, SUMMARY_PROMPT
from satchel.providers.deepseek_chat import ANSWER_TOOL, ANSWER_TOOL_NAME, TOOL_RESULT
from satchel.turns import AcceptedTurn, Message, RetryPolicy, Session, TurnFailed, Usage
from turns.kit import (
    Sleeps,
    compactor,
    deepseek_adapter,
    dumped,
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
Reply = Answer | Called | Failure | None


def failure_kind(outcome: str, stream: bool) -> str:
    if outcome == "interrupted":
        return "interrupted_stream" if stream else "transient"
    return KINDS[outcome]


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
        self.served: list[tuple[str, str, Reply]] = []
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
        self.served.append((kind, outcome, reply))
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


def reported_usage(reply: Reply, *, stream: bool) -> Usage | None:
    """The usage the server reports with `reply`: none for a failure or a dropped stream."""
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


def answered(reply: Answer | Called) -> str:
    """The answer text the session hands to the parser."""
    if isinstance(reply, Called):
        text = json.loads(reply.calls[0].arguments)["answer"]
        assert isinstance(text, str)
        return text
    return reply.text


@dataclass
class RefTurn:
    items: list[Message]
    reasoning: str | None


@dataclass
class Reference:
    """The accepted conversation, built only from accepted turns and buffered inputs."""

    fields: tuple[str, ...]
    deepseek: bool = False
    preamble: list[Message] = field(default_factory=list)
    bridge: Message | None = None
    turns: list[RefTurn] = field(default_factory=list)
    pending: list[Message] = field(default_factory=list)
    compactions: int = 0

    def history(self, turns: list[RefTurn] | None = None) -> list[Message]:
        lead = [self.bridge] if self.bridge else []
        return [*lead, *(m for t in (self.turns if turns is None else turns) for m in t.items)]

    def request(self, new: list[Message]) -> list[Message]:
        return [*self.preamble, *self.history(), *self.pending, *new]

    def summary_request(self, turns: list[RefTurn]) -> list[Message]:
        return [*self.preamble, *self.history(turns), user(SUMMARY_PROMPT)]

    def commit(self, new: list[Message], reply: Answer | Called) -> None:
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
        answer: Message = {"role": "assistant", "content": reply.text}
        if reply.reasoning and self.fields:
            answer.update(dict.fromkeys(self.fields, reply.reasoning))
        self.turns.append(RefTurn([*inputs, answer], reply.reasoning))
        self.pending = []

    @staticmethod
    def called(reply: Called) -> list[Message]:
        """An accepted DeepSeek answer as replayed: the call with its reasoning, then its result."""
        (call,) = reply.calls
        answer: Message = {"role": "assistant", "content": reply.content or ""}
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

    def keys(self, kind: str) -> dict[str, Any]:
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

    def readable(self, message: Message) -> Message:
        out = {"role": message["role"], "content": message["content"]}
        for name in self.fields:
            if name in message:
                out["reasoning"] = message[name]
                break
        for name in ("tool_calls", "tool_call_id"):
            if name in message:
                out[name] = message[name]
        return out


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
    messages: list[Message],
    keys: dict[str, Any] | None = None,
) -> Any:
    entry = next(served, None)
    assert entry is not None, f"expected a {kind} request ({outcome}); none was made"
    body, (got_kind, got_outcome, reply) = entry
    assert (got_kind, got_outcome) == (kind, outcome)
    assert body["messages"] == messages
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
    ref: Reference,
    new: list[Message],
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
        reply = expect(served, "action", outcome, ref.request(new), ref.keys("action"))
        if outcome == "valid":
            ref.commit(new, reply)
            out.accepted = answered(reply)
            return out
        kind = failure_kind(outcome, limits.stream)
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
    ref: Reference, left: deque[str], served: Served, limits: Limits, out: Prediction
) -> bool:
    candidate, tail = list(ref.turns), []
    failures = transient = 0
    while True:
        if not candidate:
            return False
        outcome = left.popleft() if left else "ok"
        reply = expect(
            served, "summary", outcome, ref.summary_request(candidate), ref.keys("summary")
        )
        if outcome == "overflow":
            tail.insert(0, candidate.pop())
            continue
        if outcome == "ok":
            ref.bridge = user(BRIDGE_TEMPLATE.format(summary=reply.text))
            ref.turns = tail
            ref.compactions += 1
            out.compacted = True
            return True
        failures += 1
        if outcome == "fatal" or failures >= limits.summary_attempts:
            return False
        if failure_kind(outcome, limits.stream) == "transient":
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
    server = DeepSeekOutcomeServer() if deepseek else OutcomeServer()
    if config == "openai-rolling":
        adapter: Any = openai_adapter(server, stream=run.stream)
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
    ref = Reference(fields, deepseek)
    accepted_usage = Usage()
    carried = Usage()  # an installed compaction of an abandoned turn: billed to the next one
    for index, step in enumerate(run.steps):
        if step.buffered:
            buffered = [user(f"buffered {index}.{k}") for k in range(step.buffered)]
            session.buffer(buffered)
            ref.pending.extend(buffered)
            assert session.state.payload == ref.payload()
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

        served = zip(server.requests[first:], server.served[first:], strict=True)
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
