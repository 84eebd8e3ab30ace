"""`xai.responses.v1` through the real openai SDK: exact replay, xAI's request rules, and native
compaction by the compact endpoint, committed only with an accepted action."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from provider_kit import DELETE, ENV, XAI, action, entry, load, profile, user

from chatwire import Failure
from responseswire import Compacted, Output, ResponsesServer
from satchel.harness import build_session
from satchel.providers.profiles import ProfileError
from satchel.turns import Session, TurnFailed, Usage

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
TRIGGER = 1_000
SYSTEM = {"role": "system", "content": "rules"}


def xai_session(
    server: ResponsesServer, run_dir: Path | None = None, *, stream: bool = True, attempts: int = 3
) -> Session:
    settings = {"runtime.compaction.trigger_tokens": TRIGGER, "agent.MAX_RETRIES": attempts - 1}
    prof = profile(XAI, stream=stream, settings=settings)
    return build_session(
        prof, run_dir=run_dir, http_client=server.client(), env=ENV, sleep=lambda s: None
    )


def replayed(item: dict[str, Any]) -> dict[str, Any]:
    drop = {"reasoning": "status", "compaction": "created_by"}.get(item["type"])
    return {k: v for k, v in item.items() if k != drop}


def played_two(server: ResponsesServer, session: Session) -> None:
    """Two accepted turns; the second is large enough to schedule a compaction."""
    server.push(Output("ACTION1"), Output("ACTION2", input_tokens=990, output_tokens=20))
    session.turn([SYSTEM, user("frame 1")], action)
    session.turn([user("frame 2")], action)


@STREAM
def test_xai_replays_every_output_item_exactly(stream: bool) -> None:
    server = ResponsesServer(Output("ACTION1", summary="left"), Output("ACTION2"))
    session = xai_session(server, stream=stream)
    session.turn([SYSTEM, user("frame 1")], action)
    session.turn([user("frame 2")], action)
    first, second = server.actions()
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert "context_management" not in first and "context" not in first["reasoning"]
    served = [replayed(item) for item in server.served[0]["output"]]
    assert second["input"] == [SYSTEM, user("frame 1"), *served, user("frame 2")]


@STREAM
def test_compaction_sends_only_the_accepted_prefix_and_commits_with_the_action(
    stream: bool, tmp_path: Path
) -> None:
    server = ResponsesServer()
    session = xai_session(server, tmp_path, stream=stream)
    played_two(server, session)
    accepted_items = list(session.state.payload["items"])
    session.buffer([user("GAME_OVER: reset")])
    server.push(Compacted(keep_user_messages=True), Output("ACTION3"))
    turn = session.turn([user("frame 3")], action)
    (compact,) = server.compactions()
    assert compact == {"model": "grok-4.6", "input": accepted_items}
    compacted = [replayed(item) for item in server.served[2]["output"]]
    assert [item["type"] for item in compacted] == ["message", "message", "compaction"]
    action_request = server.actions()[-1]["input"]
    assert action_request == [*compacted, user("GAME_OVER: reset"), user("frame 3")]
    assert session.compactions == 1
    assert session.state.payload["items"][: len(compacted)] == compacted
    compaction_usage = Usage(40, 8, 48, 0, 0, 0, None, 1)
    assert turn.compaction_usage == compaction_usage
    assert turn.usage == compaction_usage + Usage(10, 5, 15, 0, 0, 0, None, 1)
    record = json.loads((tmp_path / "compaction_001.json").read_text())
    assert record["mechanism"] == "native"
    assert record["items_before"] == len(accepted_items)
    assert record["items_after"] == len(compacted)
    assert record["usage"] == compaction_usage.to_dict()
    step = json.loads((tmp_path / "step_003.json").read_text())
    assert step["native_compaction"]["usage"] == compaction_usage.to_dict()
    assert step["messages_sent"][2] == {
        "role": "system",
        "content": "[earlier turns, compacted by the provider: opaque]",
    }
    blob = server.served[2]["output"][-1]["encrypted_content"]
    for path in tmp_path.iterdir():
        assert blob not in path.read_text()
    meta = session.finish("WIN", run_id="r", started_at=datetime.now(UTC))
    assert meta["runtime"]["compaction"]["strategy"] == "native"
    assert meta["runtime"]["compaction"]["count"] == 1


def test_the_next_turn_after_a_compaction_replays_the_compacted_items() -> None:
    server = ResponsesServer()
    session = xai_session(server)
    played_two(server, session)
    server.push(Compacted(), Output("ACTION3"), Output("ACTION4"))
    session.turn([user("frame 3")], action)
    session.turn([user("frame 4")], action)
    compacted = [replayed(item) for item in server.served[2]["output"]]
    third = [replayed(item) for item in server.served[3]["output"]]
    assert server.actions()[-1]["input"] == [*compacted, user("frame 3"), *third, user("frame 4")]
    assert len(server.compactions()) == 1


BAD_COMPACTIONS = [
    pytest.param(Failure(500, type="server_error"), id="http-500"),
    pytest.param(Compacted(blobs=()), id="no-item"),
    pytest.param(Compacted(blobs=("", "")), id="two-items"),
    pytest.param(Compacted(blobs=(None,)), id="no-blob"),
    pytest.param(Compacted(usage=False), id="no-usage"),
]


@pytest.mark.parametrize("bad", BAD_COMPACTIONS)
def test_a_failed_compaction_keeps_the_accepted_state_and_is_retried(bad: Any) -> None:
    server = ResponsesServer()
    session = xai_session(server)
    played_two(server, session)
    accepted = session.state
    server.push(bad, Compacted(), Output("ACTION3"))
    turn = session.turn([user("frame 3")], action)
    first, second = server.compactions()
    assert first == second == {"model": "grok-4.6", "input": accepted.payload["items"]}
    assert turn.attempts == 2
    assert session.compactions == 1


def test_exhausted_compactions_leave_the_state_exactly_as_it_was() -> None:
    server = ResponsesServer()
    session = xai_session(server, attempts=2)
    played_two(server, session)
    before, total = session.state, session.total_usage
    server.push(Compacted(blobs=()), Failure(503, type="server_error"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 3")], action)
    assert session.state == before
    assert session.compactions == 0
    assert failed.value.usage == Usage(40, 8, 48, 0, 0, 0, None, 1)
    assert session.total_usage == total + failed.value.usage
    assert server.actions()[-1]["input"][-1] == user("frame 2")  # no action was asked


def test_an_action_that_fails_after_a_compaction_compacts_the_accepted_history_again() -> None:
    server = ResponsesServer()
    session = xai_session(server)
    played_two(server, session)
    accepted = session.state.payload["items"]
    server.push(
        Compacted(input_tokens=40, output_tokens=8),
        Output("no action here", input_tokens=20, output_tokens=3),
        Compacted(input_tokens=41, output_tokens=9),
        Output(
            "ACTION",
            status="incomplete",
            incomplete_reason="max_output_tokens",
            input_tokens=21,
            output_tokens=4,
        ),
        Compacted(input_tokens=42, output_tokens=10),
        Output("ACTION3", input_tokens=22, output_tokens=5),
    )
    turn = session.turn([user("frame 3")], action)
    compactions = server.compactions()
    assert len(compactions) == 3
    assert all(body["input"] == accepted for body in compactions)
    first_blob = server.served[2]["output"][-1]["encrypted_content"]
    assert first_blob not in json.dumps(server.actions()[-1])
    assert [f.kind for f in turn.failures] == ["invalid_answer", "truncated"]
    spent_in, spent_out = 40 + 20 + 41 + 21 + 42 + 22, 8 + 3 + 9 + 4 + 10 + 5
    assert turn.usage == Usage(spent_in, spent_out, spent_in + spent_out, 0, 0, 0, None, 6)
    assert session.compactions == 1


def test_the_first_turn_never_compacts() -> None:
    server = ResponsesServer(Output("ACTION1", input_tokens=5_000))
    session = xai_session(server)
    session.turn([SYSTEM, user("frame 1")], action)
    assert server.compactions() == []


def test_an_overflow_compacts_once_and_retries() -> None:
    server = ResponsesServer(
        Output("ACTION1"),
        Failure(400, message="maximum context length", code="context_length_exceeded"),
        Compacted(),
        Output("ACTION2"),
    )
    session = xai_session(server)
    session.turn([SYSTEM, user("frame 1")], action)
    turn = session.turn([user("frame 2")], action)
    assert [f.kind for f in turn.failures] == ["context_overflow"]
    assert len(server.compactions()) == 1
    assert session.compactions == 1


REFUSED = [
    ({"request.reasoning.context": "auto"}, "request.reasoning.context"),
    (
        {"request.context_management": [{"type": "compaction", "compact_threshold": 1000}]},
        "request.context_management",
    ),
    ({"request.store": DELETE}, "request.store"),
    ({"request.include": DELETE}, "request.include"),
    ({"runtime.compaction.trigger_tokens": DELETE}, "runtime.compaction.trigger_tokens"),
    ({"runtime.compaction.trigger_tokens": 400_000}, "runtime.compaction.trigger_tokens"),
    ({"runtime.compaction.strategy": "harness_summary"}, "runtime.compaction.strategy"),
    ({"runtime.state": "previous_response_id"}, "runtime.state"),
]


@pytest.mark.parametrize(("settings", "field"), REFUSED)
def test_an_xai_profile_that_cannot_be_honoured_is_refused(
    settings: dict[str, Any], field: str
) -> None:
    with pytest.raises(ProfileError, match=field.replace(".", r"\.")):
        load(entry(XAI, settings))
