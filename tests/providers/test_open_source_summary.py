"""The harness-summary capability of `open_source.chat_completions.v1`."""

from __future__ import annotations

import json

import pytest
from provider_kit import DELETE, OPEN, action, adapter, assistant, profile, sent, system, user

from chatwire import Answer, ChatServer
from satchel.turns import (
    InvalidResponseError,
    RuntimeState,
    Session,
    StateError,
    SummaryCompactionAdapter,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
PREAMBLE = system("You play the game. Answer with one ACTION.")
THOUGHTS = ["  think one\n", "think\ttwo  ", "\nthink three\n\n"]
PENDING = user("GAME_OVER: the level restarts")


def history(stream: bool) -> tuple[SummaryCompactionAdapter, ChatServer, RuntimeState]:
    """Three accepted turns with reasoning, then one buffered input."""
    server = ChatServer(
        *(Answer(f"ACTION{n + 1}", reasoning=thought) for n, thought in enumerate(THOUGHTS))
    )
    adapt = adapter(profile(OPEN, stream=stream), server)
    assert isinstance(adapt, SummaryCompactionAdapter)
    run = Session(adapt, sleep=lambda seconds: None)
    run.turn([PREAMBLE, user("frame 1")], action)
    run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)
    run.buffer([PENDING])
    return adapt, server, run.state


def turn_items(n: int) -> list[dict[str, str]]:
    return [user(f"frame {n}"), assistant(f"ACTION{n}", reasoning_content=THOUGHTS[n - 1])]


@STREAM
def test_summarize_sends_accepted_history_and_prompt_without_pending_inputs(
    stream: bool,
) -> None:
    adapt, server, state = history(stream)
    before = json.dumps(state.to_json())
    server.push(Answer("  The agent opened two doors.\n", prompt_tokens=900, completion_tokens=40))

    reply = adapt.summarize(state, "Summarize the conversation.")

    body = server.requests[-1]
    assert body["messages"] == [
        PREAMBLE,
        *turn_items(1),
        *turn_items(2),
        *turn_items(3),
        user("Summarize the conversation."),
    ]
    assert "GAME_OVER" not in json.dumps(body)
    assert body["max_tokens"] == 8000
    assert body["model"] == "Qwen/Qwen3-32B"
    assert bool(body.get("stream")) is stream
    if stream:
        assert body["stream_options"] == {"include_usage": True}
    assert reply.text == "The agent opened two doors."
    assert reply.complete is True
    assert reply.usage == Usage(input_tokens=900, output_tokens=40, total_tokens=940, requests=1)
    assert json.dumps(state.to_json()) == before


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        ({}, {"max_tokens": 8000}),
        (
            {"request.max_tokens": DELETE, "request.max_completion_tokens": 4096},
            {"max_completion_tokens": 8000},
        ),
        ({"runtime.compaction.summary_max_output_tokens": DELETE}, {"max_tokens": 32768}),
    ],
    ids=["max_tokens", "max_completion_tokens", "request-limit"],
)
def test_the_summary_request_carries_its_own_output_cap(
    edits: dict[str, object], expected: dict[str, int]
) -> None:
    server = ChatServer(Answer("ACTION1"), Answer("summary"))
    adapt = adapter(profile(OPEN, settings=edits), server)
    run = Session(adapt, sleep=lambda seconds: None)
    run.turn([user("frame 1")], action)
    assert isinstance(adapt, SummaryCompactionAdapter)
    adapt.summarize(run.state, "Summarize.")
    body = server.requests[-1]
    limits = {k: body[k] for k in ("max_tokens", "max_completion_tokens") if k in body}
    assert limits == expected


INCOMPLETE = [
    pytest.param(Answer("partial", finish_reason="length"), id="length"),
    pytest.param(Answer(""), id="empty"),
    pytest.param(Answer("   \n"), id="blank"),
    pytest.param(Answer("summary", tool_call=True), id="tool-call"),
    pytest.param(Answer("", refusal="no"), id="refusal"),
]


@STREAM
@pytest.mark.parametrize("answer", INCOMPLETE)
def test_an_unfinished_summary_is_reported_incomplete(stream: bool, answer: Answer) -> None:
    adapt, server, state = history(stream)
    server.push(answer)
    reply = adapt.summarize(state, "Summarize.")
    assert reply.complete is False
    assert reply.usage.requests == 1


@STREAM
def test_a_summary_without_usage_is_refused(stream: bool) -> None:
    adapt, server, state = history(stream)
    server.push(Answer("summary", usage=False))
    with pytest.raises(InvalidResponseError):
        adapt.summarize(state, "Summarize.")


def test_unwind_latest_turn_returns_its_exact_native_items() -> None:
    adapt, _, state = history(True)
    before = json.dumps(state.to_json())

    shorter, unwound = adapt.unwind_latest_turn(state)

    assert list(unwound.items) == turn_items(3)
    assert unwound.items[1]["reasoning_content"] == THOUGHTS[2]
    assert unwound.boundary == state.accepted_turns[-1]
    assert shorter.payload["messages"] == [*turn_items(1), *turn_items(2)]
    assert shorter.accepted_turns == state.accepted_turns[:2]
    assert shorter.payload["preamble"] == [PREAMBLE]
    assert shorter.payload["pending"] == [PENDING]
    adapt.check_state(shorter)
    assert json.dumps(state.to_json()) == before


def test_unwinding_an_empty_state_is_refused() -> None:
    adapt = adapter(profile(OPEN), ChatServer())
    with pytest.raises(StateError, match="accepted_turns"):
        adapt.unwind_latest_turn(adapt.initial_state())


@pytest.mark.parametrize("unwound", [1, 2, 3])
def test_rebuild_puts_the_bridge_first_then_the_exact_tail(unwound: int) -> None:
    adapt, _, state = history(True)
    tail = []
    shorter = state
    for _ in range(unwound):
        shorter, turn = adapt.unwind_latest_turn(shorter)
        tail.insert(0, turn)

    rebuilt = adapt.rebuild(shorter, "BRIDGE: summary so far", tail)

    adapt.check_state(rebuilt)
    kept = range(4 - unwound, 4)
    expected = [user("BRIDGE: summary so far")]
    for n in kept:
        expected.extend(turn_items(n))
    assert rebuilt.payload["messages"] == expected
    assert rebuilt.payload["preamble"] == [PREAMBLE]
    assert rebuilt.payload["pending"] == [PENDING]
    assert [(t.start_item, t.end_item) for t in rebuilt.accepted_turns] == [
        (1 + 2 * i, 3 + 2 * i) for i in range(unwound)
    ]
    for turn, original in zip(rebuilt.accepted_turns, state.accepted_turns[-unwound:], strict=True):
        assert turn.messages == original.messages
        assert turn.reasoning_summary == original.reasoning_summary
        assert rebuilt.payload["messages"][turn.start_item : turn.end_item] == list(
            state.payload["messages"][original.start_item : original.end_item]
        )


def test_a_rebuilt_state_continues_and_unwinds_again() -> None:
    adapt, server, state = history(True)
    shorter, third = adapt.unwind_latest_turn(state)
    rebuilt = adapt.rebuild(shorter, "BRIDGE", [third])
    server.push(Answer("ACTION4", reasoning="four"))
    run = Session(adapt, state=rebuilt, sleep=lambda seconds: None)

    run.turn([user("frame 4")], action)

    assert sent(server) == [PREAMBLE, user("BRIDGE"), *turn_items(3), PENDING, user("frame 4")]
    after_fourth, fourth = adapt.unwind_latest_turn(run.state)
    assert list(fourth.items) == [
        PENDING,
        user("frame 4"),
        assistant("ACTION4", reasoning_content="four"),
    ]
    _, again = adapt.unwind_latest_turn(after_fourth)
    assert list(again.items) == turn_items(3)
