"""`Session.turn`: commit on accept, bounded retries from the accepted state, overflow recovery."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from chatwire import Answer, ChatServer, Failure
from satchel.turns import (
    CompactionOutcome,
    ConfigurationError,
    ContextOverflowError,
    FatalAttemptError,
    ModelResponse,
    RecordsWriter,
    RetryPolicy,
    RuntimeState,
    SatchelTurnError,
    Session,
    StateError,
    TransientError,
    TurnFailed,
    Usage,
)
from turns.kit import (
    Sleeps,
    action_bodies,
    compactor,
    open_source_adapter,
    openai_adapter,
    parse_action,
    summary_bodies,
    system,
    user,
)

OVERFLOW = Failure(400, message="maximum context length exceeded", code="context_length_exceeded")


def answer(text: str, prompt: int = 10, completion: int = 5, **extra: Any) -> Answer:
    return Answer(text, prompt_tokens=prompt, completion_tokens=completion, **extra)


def make_session(
    server: ChatServer, *, compacting: bool = False, attempts: int = 3, **options: Any
) -> tuple[Session, Sleeps]:
    adapter = open_source_adapter(server)
    sleeps = Sleeps()
    summary = compactor(adapter, **options) if compacting else None
    policy = RetryPolicy(max_attempts=attempts)
    return Session(adapter, policy=policy, compactor=summary, sleep=sleeps), sleeps


def first_turn(session: Session, server: ChatServer) -> None:
    server.push(answer("ACT 1", reasoning="r1"))
    session.turn([system("rules"), user("frame 1")], parse_action)


def test_commit_on_accept(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server)
    first_turn(session, chat_server)
    before = session.state
    seen: list[RuntimeState] = []

    def parse(response: ModelResponse) -> str:
        seen.append(session.state)
        return parse_action(response)

    chat_server.push(answer("no", reasoning="bad"), answer("ACT 2", reasoning="good"))
    accepted = session.turn([user("frame 2")], parse)
    assert seen == [before, before]
    assert session.state == accepted.result.provisional_state
    assert session.state.payload["messages"][-1] == {
        "role": "assistant",
        "content": "ACT 2",
        "reasoning_content": "good",
    }
    assert accepted.step == 2
    assert session.steps == 2


def test_retries_start_from_the_same_state(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server)
    first_turn(session, chat_server)
    chat_server.push(
        answer("wrong REJECTED", reasoning="REJECTED"),
        answer("ACT REJECTED", reasoning="REJECTED", finish_reason="length"),
        answer("ACT 2"),
    )
    session.turn([user("frame 2")], parse_action)
    bodies = chat_server.requests[-3:]
    assert bodies[0]["messages"] == bodies[1]["messages"] == bodies[2]["messages"]
    assert "REJECTED" not in str(session.state.to_json())
    chat_server.push(answer("ACT 3"))
    session.turn([user("frame 3")], parse_action)
    assert "REJECTED" not in str(chat_server.requests[-1])


def test_buffered_inputs_survive_an_abandoned_turn(chat_server: ChatServer) -> None:
    session, sleeps = make_session(chat_server, attempts=2)
    first_turn(session, chat_server)
    session.buffer([user("GAME_OVER")])
    assert session.state.payload["pending"] == [user("GAME_OVER")]
    chat_server.push(Failure(500, type="server_error"), Failure(503, type="server_error"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert failed.value.attempts == 2
    assert session.state.payload["pending"] == [user("GAME_OVER")]
    assert sleeps == [1.0]

    chat_server.push(answer("ACT 3"))
    session.turn([user("frame 3")], parse_action)
    sent = chat_server.requests[-1]["messages"]
    assert sent[-2:] == [user("GAME_OVER"), user("frame 3")]
    assert user("frame 2") not in sent
    assert session.state.payload["pending"] == []
    assert session.state.accepted_turns[-1].messages[:2] == (user("GAME_OVER"), user("frame 3"))


def test_buffered_inputs_before_the_first_turn(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server)
    session.buffer([user("reset")])
    chat_server.push(answer("ACT 1"))
    session.turn([user("frame 1")], parse_action)
    assert chat_server.requests[0]["messages"] == [user("reset"), user("frame 1")]


def test_non_retryable_error_fails_at_once(chat_server: ChatServer) -> None:
    session, sleeps = make_session(chat_server)
    first_turn(session, chat_server)
    before = session.state
    chat_server.push(Failure(401, type="authentication_error"), answer("ACT never"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert failed.value.attempts == 1
    assert isinstance(failed.value.last_error, FatalAttemptError)
    assert len(chat_server.requests) == 2
    assert session.state == before
    assert sleeps == []


def test_transient_errors_back_off_with_growing_delays(chat_server: ChatServer) -> None:
    adapter = open_source_adapter(chat_server)
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=5, backoff_initial_s=0.5, backoff_max_s=3.0)
    session = Session(adapter, policy=policy, sleep=sleeps)
    chat_server.push(
        Failure(500, type="server_error"),
        Failure(429, type="rate_limit_error"),
        Failure(502, type="server_error"),
        Failure(429, type="rate_limit_error"),
        answer("ACT 1"),
    )
    accepted = session.turn([user("frame")], parse_action)
    assert accepted.attempts == 5
    assert [f.kind for f in accepted.failures] == ["transient"] * 4
    assert sleeps == [0.5, 1.0, 2.0, 3.0]


def test_non_transient_failures_retry_without_sleeping(chat_server: ChatServer) -> None:
    session, sleeps = make_session(chat_server, attempts=4)
    chat_server.push(
        answer("", reasoning="x"),
        answer("ACT", refusal="no"),
        answer("ACT", finish_reason="length"),
        answer("ACT 1"),
    )
    accepted = session.turn([user("frame")], parse_action)
    assert [f.kind for f in accepted.failures] == ["invalid_response", "refusal", "truncated"]
    assert sleeps == []


def test_retries_run_out(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, attempts=2)
    chat_server.push(answer("no", 11, 1), answer("nope", 13, 2), answer("ACT never"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame")], parse_action)
    assert failed.value.attempts == 2
    assert failed.value.usage == Usage(24, 3, 27, 0, 0, 0, None, 2)
    assert session.abandoned_usage == failed.value.usage
    assert session.total_usage == failed.value.usage
    assert session.pending_usage == Usage()
    assert session.steps == 0


def test_failed_attempts_are_billed_to_the_next_accepted_turn(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server)
    chat_server.push(answer("no", 11, 1), answer("ACT 1", 13, 2))
    accepted = session.turn([user("frame")], parse_action)
    assert accepted.usage == Usage(24, 3, 27, 0, 0, 0, None, 2)
    assert session.total_usage == accepted.usage
    assert session.abandoned_usage == Usage()


def test_overflow_with_compactor_compacts_once_and_retries(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True)
    first_turn(session, chat_server)
    chat_server.push(OVERFLOW, answer("the summary", 17, 3), answer("ACT 2", 19, 4))
    accepted = session.turn([user("frame 2")], parse_action)
    assert accepted.attempts == 2
    assert [f.kind for f in accepted.failures] == ["context_overflow"]
    assert session.compactions == 1
    assert len(summary_bodies(chat_server)) == 1
    sent = action_bodies(chat_server)[-1]["messages"]
    assert sent[0] == system("rules")
    assert "the summary" in sent[1]["content"]
    assert sent[2:] == [user("frame 2")]
    assert accepted.usage == Usage(36, 7, 43, 0, 0, 0, None, 2)
    assert accepted.compaction_usage == Usage(17, 3, 20, 0, 0, 0, None, 1)


def test_overflow_recovery_allows_one_extra_call(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True, attempts=2)
    first_turn(session, chat_server)
    chat_server.push(answer("no"), OVERFLOW, answer("summary"), answer("still no"), answer("ACT"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert failed.value.attempts == 3
    assert len(action_bodies(chat_server)) == 1 + 3


def test_overflow_recovery_does_not_use_up_an_attempt(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True, attempts=3)
    first_turn(session, chat_server)
    chat_server.push(OVERFLOW, answer("summary"), answer("no"), answer("still no"), answer("ACT 2"))
    accepted = session.turn([user("frame 2")], parse_action)
    assert accepted.attempts == 4
    assert [f.kind for f in accepted.failures] == [
        "context_overflow",
        "invalid_answer",
        "invalid_answer",
    ]


def test_overflow_without_compactor_fails_at_once(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server)
    first_turn(session, chat_server)
    before = session.state
    chat_server.push(OVERFLOW, answer("ACT never"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert failed.value.attempts == 1
    assert isinstance(failed.value.last_error, ContextOverflowError)
    assert session.state == before


def test_second_overflow_fails_at_once(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True)
    first_turn(session, chat_server)
    chat_server.push(OVERFLOW, answer("the summary"), OVERFLOW, answer("ACT never"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert failed.value.attempts == 2
    assert isinstance(failed.value.last_error, ContextOverflowError)
    assert len(summary_bodies(chat_server)) == 1
    assert session.compactions == 1
    assert session.state.accepted_turns == ()


def test_failed_compaction_keeps_the_state_and_counts_its_usage(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True, max_attempts=2)
    first_turn(session, chat_server)
    before = session.state
    total_before = session.total_usage
    chat_server.push(OVERFLOW, answer("", 31, 1), answer("cut", 37, 2, finish_reason="length"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert session.state == before
    assert session.compactions == 0
    spent = Usage(68, 3, 71, 0, 0, 0, None, 2)
    assert failed.value.usage == spent
    assert session.abandoned_usage == spent
    assert session.total_usage == total_before + spent


def test_compaction_with_nothing_to_summarize_fails_closed(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True)
    chat_server.push(OVERFLOW)
    with pytest.raises(TurnFailed):
        session.turn([user("frame 1")], parse_action)
    assert summary_bodies(chat_server) == []
    assert session.state == session.adapter.initial_state()


def test_threshold_compaction_runs_before_the_next_call(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server, compacting=True, trigger_tokens=1_000)
    chat_server.push(answer("ACT 1", 900, 50))
    session.turn([user("frame 1")], parse_action)
    chat_server.push(answer("ACT 2", 100, 10))
    session.turn([user("frame 2")], parse_action)
    assert session.compactions == 0
    chat_server.push(answer("ACT 3", 990, 10))
    session.turn([user("frame 3")], parse_action)
    chat_server.push(answer("the summary"), answer("ACT 4"))
    accepted = session.turn([user("frame 4")], parse_action)
    assert session.compactions == 1
    assert accepted.attempts == 1
    assert len(summary_bodies(chat_server)) == 1
    assert "the summary" in chat_server.requests[-1]["messages"][0]["content"]


def test_abandoned_turn_after_threshold_compaction_does_not_block_the_session(
    chat_server: ChatServer,
) -> None:
    """The compacted state has no accepted turn left; the next turn must still reach the model."""
    session, _ = make_session(chat_server, compacting=True, trigger_tokens=1_000)
    chat_server.push(answer("ACT 1", 990, 10))
    session.turn([user("frame 1")], parse_action)
    chat_server.push(answer("the summary"), Failure(401, type="authentication_error"))
    with pytest.raises(TurnFailed):
        session.turn([user("frame 2")], parse_action)
    assert session.compactions == 1
    chat_server.push(answer("ACT 3"))
    accepted = session.turn([user("frame 3")], parse_action)
    assert accepted.action == "ACT 3"


def test_installed_compaction_of_an_abandoned_turn_is_billed_to_the_next_accepted_turn(
    chat_server: ChatServer,
) -> None:
    """Regression: the usage of a compaction the session keeps went to `abandoned_usage` with the
    turn after it, and the next accepted turn said nothing of it."""
    session, _ = make_session(chat_server, compacting=True, trigger_tokens=1_000)
    chat_server.push(answer("ACT 1", 990, 10))
    session.turn([user("frame 1")], parse_action)
    summary = Usage(17, 3, 20, 0, 0, 0, None, 1)
    lost = Usage(23, 2, 25, 0, 0, 0, None, 1)
    chat_server.push(answer("the summary", 17, 3), Failure(401, type="authentication_error"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 2")], parse_action)
    assert failed.value.usage == Usage()
    assert session.abandoned_usage == Usage()
    assert session.pending_usage == summary
    chat_server.push(answer("no action here", 23, 2), answer("ACT 3", 29, 4))
    accepted = session.turn([user("frame 3")], parse_action)
    assert accepted.compaction_usage == summary
    assert accepted.usage == summary + lost + Usage(29, 4, 33, 0, 0, 0, None, 1)
    assert session.total_usage == Usage(990, 10, 1000, 0, 0, 0, None, 1) + accepted.usage


def test_abandoned_turns_keep_their_diagnostics_in_run_metadata(
    chat_server: ChatServer, tmp_path: Any
) -> None:
    """Regression: why a turn was abandoned, and why its summary attempts failed, were never
    written anywhere."""
    adapter = open_source_adapter(chat_server)
    records = RecordsWriter(tmp_path)
    session = Session(
        adapter,
        policy=RetryPolicy(max_attempts=2),
        compactor=compactor(adapter, max_attempts=2),
        records=records,
        sleep=Sleeps(),
    )
    first_turn(session, chat_server)
    chat_server.push(OVERFLOW, Failure(503, type="server_error"), answer("", 31, 1))
    with pytest.raises(TurnFailed):
        session.turn([user("frame 2")], parse_action)
    meta = session.finish("AGENT_ERROR", run_id="r", started_at=datetime.now(UTC))
    written = json.loads((tmp_path / "run_meta.json").read_text())
    assert written["abandoned_turns"] == meta["abandoned_turns"]
    (turn,) = written["abandoned_turns"]
    assert turn["step"] == 2
    assert turn["attempts"] == 1
    assert turn["usage"] == Usage(31, 1, 32, 0, 0, 0, None, 1).to_dict()
    assert [r["kind"] for r in turn["retries"]] == ["context_overflow"]
    assert turn["retries"][0]["diagnostics"]["http_status"] == 400
    kinds = [(f["attempt"], f["kind"]) for f in turn["compaction_failures"]]
    assert kinds == [(1, "TransientError"), (2, "incomplete_summary")]
    assert turn["compaction_failures"][0]["diagnostics"]["http_status"] == 503
    assert "compaction failed" in turn["reason"]


@dataclass
class BrokenCompactor:
    """Returns a state the adapter refuses, after spending tokens."""

    usage: Usage

    def due(self, last_turn_usage: Usage) -> bool:
        return False

    def compact(self, state: RuntimeState, trigger: str) -> CompactionOutcome:
        bad = RuntimeState("openai.chat_completions.v1", "manual_rolling", state.payload)
        return CompactionOutcome(bad, self.usage, "s", "b", {})

    def policy(self) -> dict[str, Any]:
        return {"strategy": "broken"}


def test_compaction_returning_an_invalid_state_still_counts_its_usage(
    chat_server: ChatServer,
) -> None:
    spent = Usage(50, 5, 55, 0, 0, 0, None, 1)
    adapter = open_source_adapter(chat_server)
    session = Session(adapter, compactor=BrokenCompactor(spent), sleep=Sleeps())
    first_turn(session, chat_server)
    before, total_before = session.state, session.total_usage
    chat_server.push(OVERFLOW)
    with pytest.raises(SatchelTurnError):
        session.turn([user("frame 2")], parse_action)
    assert session.state == before
    assert session.total_usage == total_before + spent
    assert session.abandoned_usage == spent


def test_parser_errors_other_than_invalid_answer_propagate(chat_server: ChatServer) -> None:
    session, _ = make_session(chat_server)

    def explode(response: ModelResponse) -> str:
        raise KeyError("parser bug")

    chat_server.push(answer("ACT 1", 10, 5))
    with pytest.raises(KeyError):
        session.turn([user("frame")], explode)
    assert session.state == session.adapter.initial_state()
    assert session.abandoned_usage == Usage(10, 5, 15, 0, 0, 0, None, 1)


def test_openai_adapter_replays_visible_replies_only(chat_server: ChatServer) -> None:
    session = Session(openai_adapter(chat_server, stream=True), sleep=Sleeps())
    chat_server.push(answer("ACT 1", reasoning="hidden"), answer("ACT 2"))
    accepted = session.turn([system("rules"), user("frame 1")], parse_action)
    assert accepted.response.reasoning == "hidden"
    session.turn([user("frame 2")], parse_action)
    assert chat_server.requests[-1]["messages"] == [
        system("rules"),
        user("frame 1"),
        {"role": "assistant", "content": "ACT 1"},
        user("frame 2"),
    ]


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "content": "x"}],
        [{"role": "user", "content": "x", "reasoning_content": "y"}],
        [{"role": "user", "content": 3}],
        "frame",
    ],
)
def test_malformed_inputs_are_refused_before_any_call(
    chat_server: ChatServer, messages: Any
) -> None:
    session, _ = make_session(chat_server)
    with pytest.raises(ConfigurationError):
        session.turn(messages, parse_action)
    with pytest.raises(ConfigurationError):
        session.buffer(messages)
    assert chat_server.requests == []


def test_session_refuses_a_state_of_another_adapter(chat_server: ChatServer) -> None:
    other = openai_adapter(chat_server).initial_state()
    with pytest.raises(StateError, match=r"openai\.chat_completions\.v1"):
        Session(open_source_adapter(chat_server), state=other)


@pytest.mark.parametrize(
    "options",
    [{"max_attempts": 0}, {"max_attempts": 1.5}, {"backoff_initial_s": -1}, {"backoff_max_s": 0.1}],
)
def test_retry_policy_is_validated(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**options)


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff_initial_s=1.0, backoff_max_s=5.0)
    assert [policy.backoff(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_transient_error_is_the_last_error(chat_server: ChatServer) -> None:
    session, sleeps = make_session(chat_server, attempts=1)
    chat_server.push(Failure(500, type="server_error"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame")], parse_action)
    assert isinstance(failed.value.last_error, TransientError)
    assert sleeps == []
