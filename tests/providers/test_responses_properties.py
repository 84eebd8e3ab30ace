"""Property: over any sequence of turns, attempts and compactions, a Responses adapter's accepted
state is the state built from accepted turns alone, every request carries exactly that state, and
no rejected attempt's items (nor an uncommitted compaction's) reach a later request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_kit import ENV, RESPONSES, XAI, profile, user

from chatwire import Failure
from responseswire import Compacted, Output, ResponsesServer
from satchel.harness import build_session
from satchel.turns import InvalidAnswer, ModelResponse, TurnFailed, Usage

TRIGGER = 1_000
ATTEMPTS = 3
Item = dict[str, Any]
REJECTED: dict[str, Callable[[int], Output | Failure]] = {
    "invalid": lambda tokens: Output("no action", input_tokens=tokens),
    "truncated": lambda tokens: Output(
        "ACTION cut",
        status="incomplete",
        incomplete_reason="max_output_tokens",
        input_tokens=tokens,
    ),
    "failed": lambda tokens: Output("ACTION", status="failed", input_tokens=tokens),
    "refused": lambda tokens: Output("", refusal="no", input_tokens=tokens),
    "transient": lambda tokens: Failure(503, type="server_error"),
    "broken": lambda tokens: Output("ACTION", interrupt_after=3, input_tokens=tokens),
}


@dataclass(frozen=True)
class Attempt:
    outcome: str  # "valid" or a key of REJECTED
    tokens: (
        int  # the answer's input tokens; an accepted one past the trigger schedules a compaction
    )
    compaction_ok: bool  # how this attempt's native compaction goes, when one is due
    inline: bool  # a valid OpenAI answer also carries an inline compaction item


@dataclass(frozen=True)
class Step:
    buffered: int
    attempts: tuple[Attempt, ...]


ATTEMPT = st.builds(
    Attempt,
    outcome=st.sampled_from(["valid", "valid", *REJECTED]),
    tokens=st.sampled_from([10, 400, 1_500]),
    compaction_ok=st.booleans(),
    inline=st.booleans(),
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


def parse(response: ModelResponse) -> str:
    if not response.text.startswith("ACTION"):
        raise InvalidAnswer("not an action")
    return response.text


def replayed(item: Item) -> Item:
    drop = {"reasoning": "status", "compaction": "created_by"}.get(item["type"])
    return {k: v for k, v in item.items() if k != drop}


def blobs(items: list[Item]) -> set[str]:
    return {item["encrypted_content"] for item in items if item.get("encrypted_content")}


def script(
    step: Step, number: int, *, due: bool, stream: bool, inline_ok: bool
) -> tuple[list[Any], int | None]:
    """The server's replies for one turn, in the order the session will ask for them, and the
    size of the valid answer among them (None when there is none)."""
    replies: list[Any] = []
    size = None
    for attempt in step.attempts:
        if due:
            replies.append(Compacted() if attempt.compaction_ok else Compacted(blobs=()))
            if not attempt.compaction_ok:
                continue
        outcome = attempt.outcome
        if outcome == "broken" and not stream:
            outcome = "invalid"  # a JSON answer cannot break mid-way
        if outcome == "valid":
            blob = f"inline-{number}" if attempt.inline and inline_ok else None
            replies.append(Output(f"ACTION {number}", input_tokens=attempt.tokens, compaction=blob))
            size = attempt.tokens + 5
            break
        replies.append(REJECTED[outcome](attempt.tokens))
    return [*replies, *[Failure(401, type="authentication_error")] * (2 * ATTEMPTS)], size


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(profile_id=st.sampled_from([RESPONSES, XAI]), stream=st.booleans(), plan=STEPS)
def test_only_accepted_turns_shape_the_state_and_later_requests(
    profile_id: str, stream: bool, plan: list[Step]
) -> None:
    native = profile_id == XAI
    edits: dict[str, Any] = {"agent.MAX_RETRIES": ATTEMPTS - 1}
    if native:
        edits["runtime.compaction.trigger_tokens"] = TRIGGER
    server = ResponsesServer()
    session = build_session(
        profile(profile_id, stream=stream, settings=edits),
        http_client=server.client(),
        env=ENV,
        sleep=lambda seconds: None,
    )
    items: list[Item] = []  # the reference, built from accepted turns alone
    pending: list[Item] = []
    last_size: int | None = None
    forbidden: set[str] = set()
    for number, step in enumerate(plan):
        extra = [user(f"buffered {number}.{k}") for k in range(step.buffered)]
        if extra:
            session.buffer(extra)
            pending += extra
        new = user(f"frame {number}")
        due = native and last_size is not None and last_size >= TRIGGER
        server.script.clear()
        replies, size = script(step, number, due=due, stream=stream, inline_ok=not native)
        server.push(*replies)
        first = len(server.requests)
        try:
            session.turn([new], parse)
            accepted = True
        except TurnFailed:
            accepted = False
        made = list(
            zip(server.paths[first:], server.requests[first:], server.outputs[first:], strict=True)
        )
        prefix: list[Item] | None = None if due else items
        seen: set[str] = set()
        for path, body, output in made:
            assert not (forbidden & blobs(body["input"])), "a rejected item reached a request"
            if path.endswith("compact"):
                assert body == {"model": "grok-4.6", "input": items}
                ok = output is not None and len(blobs(output)) == 1
                prefix = [replayed(item) for item in output] if ok and output else None
            else:
                assert prefix is not None, "an action was asked without its compaction"
                assert body["input"] == [*prefix, *pending, new]
            seen |= blobs(output or [])
        if accepted:
            _, _, output = made[-1]
            assert output is not None and prefix is not None
            start = len(prefix)
            items = [*prefix, *pending, new, *map(replayed, output)]
            cuts = [k for k, item in enumerate(items) if item.get("type") == "compaction"]
            if cuts and cuts[-1] >= start:
                items = items[cuts[-1] :]
            pending = []
            last_size = size
        forbidden |= seen - blobs(items)
        assert session.state.payload == {"items": items, "pending": pending}
        assert not (forbidden & blobs(session.state.payload["items"]))
    reported = sum(
        (
            Usage(u["input_tokens"], u["output_tokens"], u["total_tokens"], 0, 0, 0, None, 1)
            for u in server.usages
            if u is not None
        ),
        Usage(),
    )
    total = session.total_usage
    assert (total.input_tokens, total.output_tokens, total.requests) == (
        reported.input_tokens,
        reported.output_tokens,
        reported.requests,
    )
