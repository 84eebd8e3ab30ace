"""Harness summary compaction over the open-source adapter and the scripted server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from chatwire import Answer, ChatServer, Failure
from satchel.compaction import (
    BRIDGE_TEMPLATE,
    SUMMARY_PROMPT,
    HarnessSummaryCompactor,
    HarnessSummaryPolicy,
)
from satchel.providers import OpenSourceChatAdapter
from satchel.turns import (
    CompactionFailed,
    ConfigurationError,
    ContextOverflowError,
    FatalAttemptError,
    InterruptedStreamError,
    RuntimeState,
    Session,
    SummaryReply,
    TransientError,
    TurnBoundary,
    Usage,
)
from turns.kit import (
    Sleeps,
    action_bodies,
    client,
    compactor,
    open_source_adapter,
    openai_adapter,
    parse_action,
    summary_bodies,
    system,
    user,
)

REPLAY = ("reasoning_content", "reasoning")
OVERFLOW = Failure(400, message="prompt is too long", code="context_length_exceeded")


def reply(text: str, prompt: int = 10, completion: int = 5, **extra: Any) -> Answer:
    return Answer(text, prompt_tokens=prompt, completion_tokens=completion, **extra)


def usage(prompt: int, completion: int, requests: int = 1) -> Usage:
    return Usage(prompt, completion, prompt + completion, 0, 0, 0, None, requests)


def bridge(summary: str) -> dict[str, Any]:
    return user(BRIDGE_TEMPLATE.format(summary=summary))


def assistant(text: str, reasoning: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **dict.fromkeys(REPLAY, reasoning)}


def played(
    server: ChatServer, turns: int = 3, *, stream: bool = False, **options: Any
) -> tuple[Session, OpenSourceChatAdapter, HarnessSummaryCompactor, Sleeps]:
    """A session with `turns` accepted turns and one buffered input waiting."""
    adapter = open_source_adapter(server, stream=stream, replay=REPLAY)
    sleeps = Sleeps()
    summary = compactor(adapter, sleep=sleeps, **options)
    session = Session(adapter, compactor=summary, sleep=Sleeps())
    for n in range(1, turns + 1):
        server.push(reply(f"ACT {n}", reasoning=f"exact reasoning {n}"))
        lead = [system("rules")] if n == 1 else []
        session.turn([*lead, user(f"frame {n}")], parse_action)
    session.buffer([user("GAME_OVER")])
    server.requests.clear()
    return session, adapter, summary, sleeps


def turn_items(n: int) -> list[dict[str, Any]]:
    return [user(f"frame {n}"), assistant(f"ACT {n}", f"exact reasoning {n}")]


def summary_request(*turns: int, lead: list[dict[str, Any]] | None = None) -> list[Any]:
    history = [item for n in turns for item in turn_items(n)]
    return [system("rules"), *(lead or []), *history, user(SUMMARY_PROMPT)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_summary_replaces_history_with_one_bridge(chat_server: ChatServer, stream: bool) -> None:
    session, _, summary, _ = played(chat_server, stream=stream)
    state = session.state
    snapshot = copy.deepcopy(state.to_json())
    chat_server.push(reply("  the summary \n", 17, 3, reasoning="summary reasoning"))
    outcome = summary.compact(state, "threshold")

    assert summary_bodies(chat_server)[0]["messages"] == summary_request(1, 2, 3)
    assert outcome.summary == "the summary"
    assert outcome.bridge == BRIDGE_TEMPLATE.format(summary="the summary")
    assert outcome.state.payload == {
        "preamble": [system("rules")],
        "messages": [bridge("the summary")],
        "pending": [user("GAME_OVER")],
    }
    assert outcome.state.accepted_turns == ()
    assert outcome.usage == usage(17, 3)
    assert outcome.record == {
        "mechanism": "harness_summary",
        "attempts": 1,
        "overflow_recoveries": 0,
        "excluded_turns": 0,
        "excluded_items": 0,
        "items_before": 6,
        "items_after": 1,
        "turns_before": 3,
        "turns_summarized": 3,
        "turns_after": 0,
        "failures": [],
    }
    assert state.to_json() == snapshot
    assert "summary reasoning" not in str(outcome.state.to_json())


def test_pending_inputs_are_restored_after_the_bridge(chat_server: ChatServer) -> None:
    session, _, _, _ = played(chat_server)
    chat_server.push(OVERFLOW, reply("the summary"), reply("ACT 4"))
    session.turn([user("frame 4")], parse_action)
    assert "GAME_OVER" not in str(summary_bodies(chat_server))
    assert action_bodies(chat_server)[-1]["messages"] == [
        system("rules"),
        bridge("the summary"),
        user("GAME_OVER"),
        user("frame 4"),
    ]


def test_summary_max_tokens_caps_the_summary_request(chat_server: ChatServer) -> None:
    adapter = open_source_adapter(
        chat_server, replay=REPLAY, summary_max_tokens=256, max_tokens=4096
    )
    session = Session(adapter, sleep=Sleeps())
    chat_server.push(reply("ACT 1"), reply("the summary"))
    session.turn([user("frame 1")], parse_action)
    compactor(adapter).compact(session.state, "threshold")
    assert chat_server.requests[0]["max_tokens"] == 4096
    assert chat_server.requests[1]["max_tokens"] == 256


def test_summary_request_drops_the_answer_format(chat_server: ChatServer) -> None:
    """A profile that constrains actions to a JSON schema still gets its summary in prose."""
    schema = {"type": "json_schema", "json_schema": {"name": "action", "schema": {}}}
    adapter = open_source_adapter(chat_server, replay=REPLAY, response_format=schema)
    session = Session(adapter, sleep=Sleeps())
    chat_server.push(reply("ACT 1"), reply("the summary"))
    session.turn([user("frame 1")], parse_action)
    compactor(adapter).compact(session.state, "threshold")
    assert chat_server.requests[0]["response_format"] == schema
    assert "response_format" not in chat_server.requests[1]


def test_overflow_unwinds_the_latest_turn_and_keeps_its_exact_items(
    chat_server: ChatServer,
) -> None:
    session, _, summary, _ = played(chat_server)
    chat_server.push(OVERFLOW, reply("short summary", 21, 4))
    outcome = summary.compact(session.state, "overflow")

    first, second = (body["messages"] for body in summary_bodies(chat_server))
    assert first == summary_request(1, 2, 3)
    assert second == summary_request(1, 2)
    assert outcome.state.payload == {
        "preamble": [system("rules")],
        "messages": [bridge("short summary"), *turn_items(3)],
        "pending": [user("GAME_OVER")],
    }
    original = session.state.accepted_turns[2]
    assert outcome.state.accepted_turns == (
        TurnBoundary(1, 3, original.messages, original.reasoning_summary),
    )
    assert outcome.record["overflow_recoveries"] == 1
    assert outcome.record["excluded_turns"] == 1
    assert outcome.record["excluded_items"] == 2
    assert outcome.record["turns_summarized"] == 2
    assert outcome.record["turns_after"] == 1
    assert outcome.usage == usage(21, 4)


def test_unwound_turns_can_be_unwound_again(chat_server: ChatServer) -> None:
    session, adapter, summary, _ = played(chat_server)
    chat_server.push(OVERFLOW, OVERFLOW, reply("first summary"))
    first = summary.compact(session.state, "overflow")
    assert first.state.payload["messages"] == [
        bridge("first summary"),
        *turn_items(2),
        *turn_items(3),
    ]
    assert [(t.start_item, t.end_item) for t in first.state.accepted_turns] == [(1, 3), (3, 5)]
    adapter.check_state(first.state)

    chat_server.requests.clear()
    chat_server.push(OVERFLOW, reply("second summary"))
    second = summary.compact(first.state, "overflow")
    lead = [bridge("first summary")]
    assert [body["messages"] for body in summary_bodies(chat_server)] == [
        summary_request(2, 3, lead=lead),
        summary_request(2, lead=lead),
    ]
    assert second.state.payload["messages"] == [bridge("second summary"), *turn_items(3)]
    assert [(t.start_item, t.end_item) for t in second.state.accepted_turns] == [(1, 3)]
    assert second.state.payload["pending"] == [user("GAME_OVER")]


def test_session_keeps_the_unwound_tail_before_pending_inputs(chat_server: ChatServer) -> None:
    session, _, _, _ = played(chat_server)
    chat_server.push(OVERFLOW, OVERFLOW, reply("the summary"), reply("ACT 4"))
    session.turn([user("frame 4")], parse_action)
    assert action_bodies(chat_server)[-1]["messages"] == [
        system("rules"),
        bridge("the summary"),
        *turn_items(3),
        user("GAME_OVER"),
        user("frame 4"),
    ]
    assert [(t.start_item, t.end_item) for t in session.state.accepted_turns] == [(1, 3), (3, 6)]


@pytest.mark.parametrize(
    "incomplete",
    [
        reply("", 11, 1, reasoning="thinking only"),
        reply("   ", 11, 1),
        reply("half a summ", 11, 1, finish_reason="length"),
        reply("I cannot", 11, 1, refusal="I cannot"),
    ],
    ids=["empty", "blank", "truncated", "refusal"],
)
def test_incomplete_summaries_are_retried_from_unchanged_state(
    chat_server: ChatServer, incomplete: Answer
) -> None:
    session, _, summary, sleeps = played(chat_server)
    chat_server.push(incomplete, reply("the summary", 13, 2))
    outcome = summary.compact(session.state, "threshold")
    first, second = (body["messages"] for body in summary_bodies(chat_server))
    assert first == second == summary_request(1, 2, 3)
    assert outcome.state.payload["messages"] == [bridge("the summary")]
    assert outcome.record["attempts"] == 2
    assert outcome.usage == usage(24, 3, 2)
    assert sleeps == []


def test_interrupted_summary_stream_is_retried(chat_server: ChatServer) -> None:
    session, _, summary, _ = played(chat_server, stream=True)
    chat_server.push(reply("partial summary", interrupt_after=2), reply("the summary"))
    outcome = summary.compact(session.state, "threshold")
    assert outcome.summary == "the summary"
    assert outcome.record["attempts"] == 2


def test_transient_errors_back_off(chat_server: ChatServer) -> None:
    session, _, summary, sleeps = played(chat_server, max_attempts=4)
    chat_server.push(
        Failure(500, type="server_error"),
        Failure(429, type="rate_limit_error"),
        Failure(503, type="server_error"),
        reply("the summary"),
    )
    outcome = summary.compact(session.state, "threshold")
    assert sleeps == [1.0, 2.0, 4.0]
    bodies = [body["messages"] for body in summary_bodies(chat_server)]
    assert bodies == [summary_request(1, 2, 3)] * 4
    assert outcome.record["attempts"] == 4
    failures = outcome.record["failures"]
    assert [(f["attempt"], f["kind"]) for f in failures] == [
        (n, "TransientError") for n in (1, 2, 3)
    ]
    assert [f["diagnostics"]["http_status"] for f in failures] == [500, 429, 503]


def test_backoff_is_capped() -> None:
    server = ChatServer()
    adapter = open_source_adapter(server)
    sleeps = Sleeps()
    policy = HarnessSummaryPolicy(
        trigger_tokens=10_000,
        max_context_tokens=20_000,
        max_attempts=5,
        backoff_initial_s=0.5,
        backoff_max_s=1.5,
    )
    summary = HarnessSummaryCompactor(adapter, policy, sleep=sleeps)
    session = Session(adapter, sleep=Sleeps())
    server.push(reply("ACT 1"))
    session.turn([user("frame")], parse_action)
    server.push(*[Failure(500, type="server_error")] * 4, reply("the summary"))
    summary.compact(session.state, "threshold")
    assert sleeps == [0.5, 1.0, 1.5, 1.5]


def test_nothing_to_summarize_fails_closed_without_a_call(chat_server: ChatServer) -> None:
    adapter = open_source_adapter(chat_server)
    with pytest.raises(CompactionFailed, match="protected boundary") as failed:
        compactor(adapter).compact(adapter.initial_state(), "threshold")
    assert chat_server.requests == []
    assert failed.value.usage == Usage()


def test_unwinding_to_the_protected_boundary_fails_closed(chat_server: ChatServer) -> None:
    session, _, summary, _ = played(chat_server, turns=2)
    state = session.state
    snapshot = copy.deepcopy(state.to_json())
    chat_server.push(reply("", 11, 1), OVERFLOW, OVERFLOW, reply("never asked"))
    with pytest.raises(CompactionFailed, match="protected boundary") as failed:
        summary.compact(state, "overflow")
    assert [body["messages"] for body in summary_bodies(chat_server)] == [
        summary_request(1, 2),
        summary_request(1, 2),
        summary_request(1),
    ]
    assert failed.value.usage == usage(11, 1)
    assert state.to_json() == snapshot


def test_exhausted_attempts_fail_closed_and_count_every_attempt(chat_server: ChatServer) -> None:
    session, _, summary, sleeps = played(chat_server, max_attempts=3)
    state = session.state
    snapshot = copy.deepcopy(state.to_json())
    chat_server.push(
        reply("", 11, 1),
        OVERFLOW,
        Failure(500, type="server_error"),
        reply("cut", 13, 2, finish_reason="length"),
        reply("never asked"),
    )
    with pytest.raises(CompactionFailed) as failed:
        summary.compact(state, "threshold")
    assert len(summary_bodies(chat_server)) == 4
    assert failed.value.usage == usage(24, 3, 2)
    assert sleeps == [1.0]
    assert state.to_json() == snapshot
    kinds = [(f["attempt"], f["kind"]) for f in failed.value.failures]
    assert kinds == [
        (1, "incomplete_summary"),
        (2, "context_overflow"),
        (3, "TransientError"),
        (4, "incomplete_summary"),
    ]
    assert failed.value.failures[2]["diagnostics"]["http_status"] == 500


def test_fatal_summary_error_fails_at_once(chat_server: ChatServer) -> None:
    session, _, summary, _ = played(chat_server)
    chat_server.push(Failure(401, type="authentication_error"), reply("never asked"))
    with pytest.raises(CompactionFailed) as failed:
        summary.compact(session.state, "threshold")
    assert len(chat_server.requests) == 1
    assert failed.value.diagnostics is not None
    assert failed.value.diagnostics.http_status == 401
    assert isinstance(failed.value.__cause__, FatalAttemptError)


def test_oversized_rebuilt_state_fails_closed(chat_server: ChatServer) -> None:
    session, _, summary, _ = played(chat_server, trigger_tokens=60)
    chat_server.push(reply("a long summary " * 20, 17, 3))
    with pytest.raises(CompactionFailed, match="not below the trigger") as failed:
        summary.compact(session.state, "threshold")
    assert failed.value.usage == usage(17, 3)


def test_summary_usage_is_counted_in_the_session(chat_server: ChatServer) -> None:
    session, _, _, _ = played(chat_server)
    total = session.total_usage
    chat_server.push(OVERFLOW, reply("", 11, 1), OVERFLOW, reply("the summary", 13, 2))
    chat_server.push(reply("ACT 4", 17, 3))
    accepted = session.turn([user("frame 4")], parse_action)
    assert accepted.compaction_usage == usage(24, 3, 2)
    assert accepted.usage == usage(41, 6, 3)
    assert session.total_usage == total + accepted.usage


class ScriptedSummaries(OpenSourceChatAdapter):
    """Raises scripted attempt errors from `summarize` before asking the server."""

    errors: list[Exception]

    def summarize(self, state: RuntimeState, prompt: str) -> SummaryReply:
        if self.errors:
            raise self.errors.pop(0)
        return super().summarize(state, prompt)


def test_usage_carried_by_summary_errors_is_counted(chat_server: ChatServer) -> None:
    adapter = ScriptedSummaries(client(chat_server), {"model": "m"})
    adapter.errors = [
        ContextOverflowError("overflow", usage=usage(3, 0)),
        InterruptedStreamError("cut", usage=usage(5, 1)),
        TransientError("busy", usage=usage(7, 0)),
    ]
    session = Session(adapter, sleep=Sleeps())
    chat_server.push(reply("ACT 1"), reply("ACT 2"), reply("the summary", 11, 2))
    session.turn([user("frame 1")], parse_action)
    session.turn([user("frame 2")], parse_action)
    outcome = compactor(adapter).compact(session.state, "threshold")
    assert outcome.usage == usage(3, 0) + usage(5, 1) + usage(7, 0) + usage(11, 2)
    adapter.errors = [TransientError("busy", usage=usage(13, 0))] * 3
    with pytest.raises(CompactionFailed) as failed:
        compactor(adapter).compact(session.state, "threshold")
    assert failed.value.usage == usage(39, 0, 3)


def test_due_compares_the_latest_turn_with_the_trigger(chat_server: ChatServer) -> None:
    summary = compactor(open_source_adapter(chat_server), trigger_tokens=1_000)
    assert not summary.due(Usage(input_tokens=900, output_tokens=99))
    assert summary.due(Usage(input_tokens=900, output_tokens=100))


def test_policy_lists_every_default(chat_server: ChatServer) -> None:
    summary = compactor(open_source_adapter(chat_server), trigger_tokens=1_000)
    assert summary.policy() == {
        "strategy": "harness_summary",
        "trigger_tokens": 1_000,
        "max_context_tokens": 2_000,
        "summary_max_tokens": None,
        "summary_input_headroom_tokens": 8_000,
        "max_attempts": 3,
        "backoff_initial_s": 1.0,
        "backoff_max_s": 30.0,
    }


@pytest.mark.parametrize(
    "options",
    [
        {"trigger_tokens": 0, "max_context_tokens": 10},
        {"trigger_tokens": 10, "max_context_tokens": 10},
        {"trigger_tokens": 5, "max_context_tokens": 10, "max_attempts": 0},
    ],
)
def test_policy_is_validated(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        HarnessSummaryPolicy(**options)


def test_adapter_without_the_capability_is_refused(chat_server: ChatServer) -> None:
    policy = HarnessSummaryPolicy(trigger_tokens=10, max_context_tokens=20)
    with pytest.raises(ConfigurationError, match=r"openai\.chat_completions\.v1"):
        HarnessSummaryCompactor(openai_adapter(chat_server), policy)  # type: ignore[arg-type]
