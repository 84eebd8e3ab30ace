"""Property: over any sequence of turns, attempts and native compactions, the Anthropic Messages
adapter's accepted state is the state built from accepted turns alone, every request carries
exactly that state, no rejected attempt's blocks (nor an uncommitted compaction's) reach a later
request, and every request's usage is billed once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_kit import CLAUDE, ENV, action, profile, user

from anthropicwire import Answer, MessagesServer, Summary
from chatwire import Failure
from satchel.harness import build_session
from satchel.turns import TurnFailed

TRIGGER = 1_000
ATTEMPTS = 3
SYSTEM = "rules"
BETA = "compact-2026-09-04"
Block = dict[str, Any]
Native = dict[str, Any]
REJECTED: dict[str, Callable[[int], Answer | Failure]] = {
    "invalid": lambda tokens: Answer("no action", input_tokens=tokens),
    "truncated": lambda tokens: Answer("ACTION cut", stop_reason="max_tokens", input_tokens=tokens),
    "refused": lambda tokens: Answer(
        "", stop_reason="refusal", refusal="cyber", input_tokens=tokens
    ),
    "paused": lambda tokens: Answer("ACTION", stop_reason="pause_turn", input_tokens=tokens),
    "inline": lambda tokens: Answer("ACTION x", compaction="inline", input_tokens=tokens),
    "transient": lambda tokens: Failure(529, type="overloaded_error"),
    "broken": lambda tokens: Answer("ACTION", interrupt_after=3, input_tokens=tokens),
}


@dataclass(frozen=True)
class Attempt:
    outcome: str  # "valid" or a key of REJECTED
    tokens: (
        int  # the answer's input tokens; an accepted one past the trigger schedules a compaction
    )
    compaction: str  # how this attempt's native compaction goes, when one is due


@dataclass(frozen=True)
class Step:
    buffered: int
    attempts: tuple[Attempt, ...]


ATTEMPT = st.builds(
    Attempt,
    outcome=st.sampled_from(["valid", "valid", "valid", *REJECTED]),
    tokens=st.sampled_from([10, 400, 1_500]),
    compaction=st.sampled_from(["ok", "ok", "no_block", "unsigned"]),
)
STEPS = st.lists(
    st.builds(
        Step,
        buffered=st.integers(0, 2),
        attempts=st.lists(ATTEMPT, min_size=1, max_size=4).map(tuple),
    ),
    min_size=1,
    max_size=6,
)
FATAL = [Failure(401, type="authentication_error")] * 2
SUMMARIES = {"ok": Summary(), "no_block": Summary(blocks=0), "unsigned": Summary(signature=None)}


def replayed(block: Block) -> Block:
    """A served block as the next request sends it."""
    if block.get("type") == "text":
        return {k: v for k, v in block.items() if k != "parsed_output"}
    if block.get("type") == "compaction" and block.get("encrypted_content", "") is None:
        return {k: v for k, v in block.items() if k != "encrypted_content"}
    return block


def signatures(blocks: list[Block]) -> set[str]:
    return {b["signature"] for b in blocks if b.get("signature")}


def sent_signatures(messages: list[Native]) -> set[str]:
    return {
        sig
        for message in messages
        if isinstance(message["content"], list)
        for sig in signatures(message["content"])
    }


def summary_message(output: list[Block] | None) -> Native | None:
    """The message a compaction answer stands for, or None when the adapter must refuse it."""
    if output is None or len(output) != 1:
        return None
    block = output[0]
    if block.get("type") != "compaction" or not block.get("content") or not block.get("signature"):
        return None
    return {"role": "assistant", "content": [replayed(block)]}


def script(step: Step, number: int, *, due: bool, stream: bool) -> tuple[list[Any], int, bool]:
    """The server's replies for one turn, in the order the session will ask for them; how many
    requests the turn must make; whether it must be accepted."""
    replies: list[Any] = []
    for attempt in step.attempts[:ATTEMPTS]:  # the retry policy allows ATTEMPTS attempts
        if due:
            replies.append(SUMMARIES[attempt.compaction])
            if attempt.compaction != "ok":
                continue
        outcome = attempt.outcome
        if outcome == "broken" and not stream:
            outcome = "invalid"  # a JSON answer cannot break mid-way
        if outcome == "valid":
            replies.append(Answer(f"ACTION {number}", input_tokens=attempt.tokens))
            return [*replies, *FATAL], len(replies), True
        replies.append(REJECTED[outcome](attempt.tokens))
    # past a plan shorter than the policy, a fatal error ends the turn
    asked = len(replies) + (len(step.attempts) < ATTEMPTS)
    return [*replies, *FATAL], asked, False


def billed(reply: Any, usage: dict[str, Any] | None, stream: bool) -> tuple[int, int, int]:
    """(input, output, requests) the adapter must bill for one request."""
    if usage is None:
        if isinstance(reply, Answer) and stream and reply.interrupt_after is not None:
            # the stream broke after `message_start`, whose usage had already arrived
            return reply.input_tokens, min(reply.output_tokens, 1), 1
        return 0, 0, 0
    counted = usage.get("iterations") or [usage]  # the iterations stand for the top level
    read = sum(e.get("cache_read_input_tokens", 0) for e in counted)
    written = sum(e.get("cache_creation_input_tokens", 0) for e in counted)
    fresh = sum(e["input_tokens"] for e in counted)
    return fresh + read + written, sum(e["output_tokens"] for e in counted), 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.booleans(), plan=STEPS)
def test_only_accepted_turns_shape_the_state_and_later_requests(
    stream: bool, plan: list[Step]
) -> None:
    edits = {"agent.MAX_RETRIES": ATTEMPTS - 1, "runtime.compaction.trigger_tokens": TRIGGER}
    server = MessagesServer()
    session = build_session(
        profile(CLAUDE, stream=stream, settings=edits),
        http_client=server.client(),
        env=ENV,
        sleep=lambda seconds: None,
    )
    settings_sent: dict[str, Any] = {
        "model": "claude-opus-5",
        "max_tokens": 128_000,
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "low"},
        "cache_control": {"type": "ephemeral"},
        "system": SYSTEM,
        **({"stream": True} if stream else {}),
    }
    system: str | None = None  # the reference, built from accepted turns alone
    reference: list[Native] = []
    pending: list[Native] = []
    last_size: int | None = None
    forbidden: set[str] = set()
    expected = [0, 0, 0]  # input, output, requests
    for number, step in enumerate(plan):
        extra = [user(f"buffered {number}.{k}") for k in range(step.buffered)]
        if extra:
            session.buffer(extra)
            pending += extra
        new = user(f"frame {number}")
        # the system prompt goes with the frames until a turn that carried it is accepted
        frames = [new] if system is not None else [{"role": "system", "content": SYSTEM}, new]
        due = last_size is not None and last_size >= TRIGGER
        server.script.clear()
        replies, asked, must_accept = script(step, number, due=due, stream=stream)
        server.push(*replies)
        first = len(server.requests)
        try:
            session.turn(frames, action)
            accepted = True
        except TurnFailed:
            accepted = False
        made = list(
            zip(
                server.requests[first:],
                server.headers[first:],
                server.outputs[first:],
                server.usages[first:],
                replies,
                strict=False,  # the replies end with a spare fatal error
            )
        )
        assert (len(made), accepted) == (asked, must_accept)
        prefix: list[Native] | None = None if due else reference
        attempt: set[str] = set()  # signatures served in the attempt in progress
        for index, (body, headers, output, usage, reply) in enumerate(made):
            messages = body["messages"]
            assert not (forbidden & sent_signatures(messages)), "a rejected block came back"
            assert BETA in headers["anthropic-beta"].split(",")
            if "compaction" in body:
                assert due, "a compaction was asked for while none was due"
                assert body == {
                    **settings_sent,
                    "compaction": {"type": "summarize"},
                    "messages": reference,
                }
                message = summary_message(output)
                prefix = None if message is None else [message]
                attempt = signatures(output or [])
                if message is None:  # the attempt ends here
                    forbidden |= attempt
            else:
                assert prefix is not None, "an action was asked without its compaction"
                assert body == {**settings_sent, "messages": [*prefix, *pending, new]}
                attempt |= signatures(output or [])
                last = accepted and index == len(made) - 1
                if last:
                    assert output is not None
                    assistant = {"role": "assistant", "content": [replayed(b) for b in output]}
                    reference = [*prefix, *pending, new, assistant]
                    assert isinstance(reply, Answer)
                    last_size = reply.input_tokens + reply.output_tokens
                else:
                    forbidden |= attempt
                attempt = set()
                if due:
                    prefix = None
            expected = [a + b for a, b in zip(expected, billed(reply, usage, stream), strict=True)]
        if accepted:
            system, pending = SYSTEM, []
        assert not (forbidden & sent_signatures(reference))
        assert session.state.payload == {
            "system": system,
            "messages": reference,
            "pending": pending,
        }
    total = session.total_usage
    assert [total.input_tokens, total.output_tokens, total.requests] == expected
    answered = zip(server.usages, server.outputs, strict=True)
    assert total.requests == sum(1 for u, o in answered if u is not None or o is not None)
