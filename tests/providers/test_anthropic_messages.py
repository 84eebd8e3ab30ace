"""`anthropic.messages.v1` through the real anthropic SDK: exact replay of every content block,
the stop reasons that may supply an action, accounting, and native on-demand compaction
committed only with an accepted action."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from provider_kit import CLAUDE, DELETE, ENV, action, entry, load, profile, user

from anthropicwire import Answer, MessagesServer, Summary
from chatwire import Failure
from satchel.compaction import HarnessSummaryCompactor, HarnessSummaryPolicy
from satchel.harness import build_session
from satchel.providers import build_adapter
from satchel.providers.anthropic.state import readable, replayable
from satchel.providers.anthropic.wire import normalize_usage
from satchel.providers.profiles import ProfileError
from satchel.turns import ConfigurationError, Session, TurnFailed, Usage

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
TRIGGER = 1_000
SYSTEM = {"role": "system", "content": "rules"}


def claude(
    server: MessagesServer,
    run_dir: Path | None = None,
    *,
    stream: bool = True,
    attempts: int = 3,
    settings: dict[str, Any] | None = None,
) -> Session:
    edits = {"runtime.compaction.trigger_tokens": TRIGGER, "agent.MAX_RETRIES": attempts - 1}
    edits.update(settings or {})
    prof = profile(CLAUDE, stream=stream, settings=edits)
    return build_session(
        prof, run_dir=run_dir, http_client=server.client(), env=ENV, sleep=lambda s: None
    )


def replayed(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for block in blocks:
        if block["type"] == "compaction" and block.get("encrypted_content") is None:
            block = {k: v for k, v in block.items() if k != "encrypted_content"}
        out.append(block)
    return out


def said(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": replayed(blocks)}


def played_two(server: MessagesServer, session: Session) -> None:
    """Two accepted turns; the second is large enough to schedule a compaction."""
    server.push(Answer("ACTION1"), Answer("ACTION2", input_tokens=990, output_tokens=20))
    session.turn([SYSTEM, user("frame 1")], action)
    session.turn([user("frame 2")], action)


@STREAM
def test_every_block_is_replayed_exactly_and_the_system_prompt_goes_apart(
    stream: bool, tmp_path: Path
) -> None:
    first = Answer(
        "ACTION1",
        thinking="go left",
        empty_thinking=True,
        redacted="opaque-redacted",
        block_extra={"future_field": {"version": 2}},
    )
    server = MessagesServer(first, Answer("ACTION2"))
    session = claude(server, tmp_path, stream=stream)
    session.turn([SYSTEM, user("frame 1")], action)
    session.turn([user("frame 2")], action)
    one, two = server.actions()
    assert one["system"] == two["system"] == "rules"
    assert one["messages"] == [user("frame 1")]
    served = server.served[0]
    assert [b["type"] for b in served] == ["thinking", "thinking", "redacted_thinking", "text"]
    assert served[1]["thinking"] == "" and served[1]["signature"]
    assert served[0]["future_field"] == {"version": 2}
    assert two["messages"] == [user("frame 1"), said(served), user("frame 2")]
    step = json.loads((tmp_path / "step_002.json").read_text())
    assert step["messages_sent"][1] == {
        "role": "assistant",
        "content": "ACTION1",
        "reasoning": "go left",
    }
    text = "".join(path.read_text() for path in tmp_path.iterdir())
    assert served[0]["signature"] not in text and "opaque-redacted" not in text


def test_the_system_prompt_and_model_cannot_change_in_a_session() -> None:
    server = MessagesServer(Answer("ACTION1"))
    session = claude(server)
    session.turn([SYSTEM, user("frame 1")], action)
    with pytest.raises(ConfigurationError, match="system prompt cannot change"):
        session.turn([{"role": "system", "content": "other rules"}, user("frame 2")], action)
    assert len(server.requests) == 1


def test_replay_drops_only_the_response_only_fields() -> None:
    blocks = [
        {"type": "text", "text": "ACTION1", "parsed_output": None, "citations": None},
        {"type": "compaction", "content": "s", "signature": "x", "encrypted_content": None},
        {"type": "compaction", "content": "s", "signature": "y", "encrypted_content": "meta"},
        {"type": "thinking", "thinking": "", "signature": "z", "unknown": None},
    ]
    assert replayable(blocks) == [
        {"type": "text", "text": "ACTION1", "citations": None},
        {"type": "compaction", "content": "s", "signature": "x"},
        blocks[2],
        blocks[3],
    ]


def test_encrypted_compaction_metadata_is_replayed_verbatim() -> None:
    server = MessagesServer()
    session = claude(server)
    played_two(server, session)
    server.push(Summary(encrypted_content="opaque-meta"), Answer("ACTION3"))
    session.turn([user("frame 3")], action)
    (block,) = server.actions()[-1]["messages"][0]["content"]
    assert block == server.served[2][0] and block["encrypted_content"] == "opaque-meta"


REJECTED = [
    pytest.param(
        Answer("ACTION1", stop_reason="refusal", refusal="cyber"), "refusal", id="refusal"
    ),
    pytest.param(Answer("ACTION1", stop_reason="max_tokens"), "truncated", id="max-tokens"),
    pytest.param(Answer("ACTION1", stop_reason="pause_turn"), "invalid_response", id="paused"),
    pytest.param(Answer("ACTION1", stop_reason="tool_use"), "invalid_response", id="tool-use"),
    pytest.param(
        Answer("ACTION1", stop_reason="model_context_window_exceeded"),
        "truncated",
        id="window-exceeded",
    ),
    pytest.param(
        Answer("ACTION1", stop_reason="stop_sequence", stop_sequence="END"),
        "invalid_response",
        id="unconfigured-stop",
    ),
    pytest.param(
        Answer("ACTION1", compaction="inline"), "invalid_response", id="inline-compaction"
    ),
    pytest.param(Answer("ACTION1", signature=None), "invalid_response", id="unsigned-thinking"),
    pytest.param(Answer("", thinking="only thought"), "invalid_response", id="no-text"),
    pytest.param(Failure(529, type="overloaded_error"), "transient", id="overloaded"),
]


@STREAM
@pytest.mark.parametrize(("bad", "kind"), REJECTED)
def test_only_a_finished_answer_supplies_an_action(
    stream: bool, bad: Any, kind: str, tmp_path: Path
) -> None:
    server = MessagesServer(Answer("ACTION1"), bad, Answer("ACTION2"))
    session = claude(server, tmp_path, stream=stream)
    session.turn([SYSTEM, user("frame 1")], action)
    accepted = session.state
    turn = session.turn([user("frame 2")], action)
    assert turn.attempts == 2
    one, two = server.actions()[1:]
    assert one["messages"] == two["messages"] == [*accepted.payload["messages"], user("frame 2")]
    step = json.loads((tmp_path / "step_002.json").read_text())
    (retry,) = step["retries"]
    assert retry["kind"] == kind
    if kind == "refusal":
        assert retry["diagnostics"]["provider_error_type"] == "cyber"
        assert "declined" not in json.dumps(step)  # the provider's explanation stays out


BROKEN = [
    pytest.param(Answer("ACTION1", interrupt_after=4), id="interrupted"),
    pytest.param(Answer("ACTION1", drop_final=True), id="unfinished"),
    pytest.param(Answer("ACTION1", error_event="overloaded_error"), id="error-event"),
]


@pytest.mark.parametrize("bad", BROKEN)
def test_an_unfinished_stream_never_supplies_an_action(bad: Answer) -> None:
    server = MessagesServer(Answer("ACTION1"), bad, Answer("ACTION2"))
    session = claude(server)
    session.turn([SYSTEM, user("frame 1")], action)
    turn = session.turn([user("frame 2")], action)
    assert turn.attempts == 2 and turn.action == "ACTION2"


@STREAM
def test_a_configured_stop_sequence_supplies_an_action(stream: bool) -> None:
    server = MessagesServer(Answer("ACTION1", stop_reason="stop_sequence", stop_sequence="END"))
    session = claude(server, stream=stream, settings={"request.stop_sequences": ["END"]})
    turn = session.turn([SYSTEM, user("frame 1")], action)
    assert turn.attempts == 1


@STREAM
def test_iterations_are_summed_once_and_thinking_is_a_breakdown(stream: bool) -> None:
    iterations = [
        {
            "type": "message",
            "input_tokens": 30,
            "output_tokens": 7,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
        {"type": "message", "input_tokens": 5, "output_tokens": 3},
    ]
    server = MessagesServer(
        Answer("ACTION1", input_tokens=999, output_tokens=999, iterations=iterations),
        Answer(
            "ACTION2",
            input_tokens=10,
            output_tokens=50,
            cache_read=200,
            cache_write=40,
            thinking_tokens=30,
        ),
    )
    session = claude(server, stream=stream)
    first = session.turn([SYSTEM, user("frame 1")], action)
    second = session.turn([user("frame 2")], action)
    assert first.usage == Usage(155, 10, 165, 0, 100, 20, None, 1)
    assert second.usage == Usage(250, 50, 300, 30, 200, 40, None, 1)


@STREAM
def test_compaction_sends_the_accepted_history_alone_and_commits_with_the_action(
    stream: bool, tmp_path: Path
) -> None:
    server = MessagesServer()
    session = claude(server, tmp_path, stream=stream)
    played_two(server, session)
    history = list(session.state.payload["messages"])
    session.buffer([user("GAME_OVER: reset")])
    server.push(Summary("the story so far"), Answer("ACTION3"))
    turn = session.turn([user("frame 3")], action)
    (compact,) = server.compactions()
    assert compact["compaction"] == {"type": "summarize"}
    assert compact["messages"] == history
    assert compact["system"] == "rules"
    assert compact["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert compact["output_config"] == {"effort": "low"}
    assert compact["cache_control"] == {"type": "ephemeral"}
    assert compact["max_tokens"] == 128_000
    assert compact.get("stream", False) is stream
    summary = said(server.served[2])
    assert "encrypted_content" not in summary["content"][0]
    act = server.actions()[-1]
    assert act["messages"] == [summary, user("GAME_OVER: reset"), user("frame 3")]
    assert "compaction" not in act and act["cache_control"] == {"type": "ephemeral"}
    for headers in server.headers:
        assert "compact-2026-09-04" in headers["anthropic-beta"]
    assert session.compactions == 1
    compaction = Usage(40, 8, 48, 0, 0, 0, None, 1)
    assert turn.compaction_usage == compaction
    assert turn.usage == compaction + Usage(10, 5, 15, 0, 0, 0, None, 1)
    record = json.loads((tmp_path / "compaction_001.json").read_text())
    assert record["mechanism"] == "native"
    assert record["items_summarized"] == len(history) == 4
    assert record["usage"] == compaction.to_dict()
    step = json.loads((tmp_path / "step_003.json").read_text())
    assert step["native_compaction"]["usage"] == compaction.to_dict()
    shown = step["messages_sent"]
    assert "the story so far" in shown[0]["content"]
    assert "frame 1" not in json.dumps(shown)
    signature = server.served[2][0]["signature"]
    for path in tmp_path.iterdir():
        assert signature not in path.read_text()
    meta = session.finish("WIN", run_id="r", started_at=datetime.now(UTC))
    policy = meta["runtime"]["compaction"]
    assert policy["strategy"] == "native" and policy["trigger_tokens"] == TRIGGER
    assert policy["summary_max_output_tokens"] == 128_000
    assert policy["max_context_tokens"] == 1_000_000


def test_the_compaction_request_drops_action_only_settings_and_has_its_own_cap() -> None:
    server = MessagesServer()
    settings = {
        "request.stop_sequences": ["END"],
        "request.output_config": {"effort": "low", "format": {"type": "json_schema"}},
        "runtime.compaction.summary_max_output_tokens": 4_000,
    }
    session = claude(server, settings=settings)
    played_two(server, session)
    server.push(Summary(), Answer("ACTION3"))
    session.turn([user("frame 3")], action)
    (compact,) = server.compactions()
    assert "stop_sequences" not in compact and compact["max_tokens"] == 4_000
    assert compact["output_config"] == {"effort": "low"}
    act = server.actions()[-1]
    assert act["stop_sequences"] == ["END"] and act["max_tokens"] == 128_000


def test_later_turns_replay_the_summary_and_a_second_compaction_replaces_it() -> None:
    server = MessagesServer()
    session = claude(server)
    played_two(server, session)
    server.push(Summary("first"), Answer("ACTION3", input_tokens=1_200), Summary("second"))
    server.push(Answer("ACTION4"), Answer("ACTION5"))
    session.turn([user("frame 3")], action)
    third = said(server.served[3])
    session.turn([user("frame 4")], action)
    second = server.compactions()[1]
    assert second["messages"] == [said(server.served[2]), user("frame 3"), third]
    session.turn([user("frame 5")], action)
    assert server.actions()[-1]["messages"] == [
        said(server.served[4]),
        user("frame 4"),
        said(server.served[5]),
        user("frame 5"),
    ]


def test_the_first_frame_never_compacts() -> None:
    server = MessagesServer(Answer("ACTION1", input_tokens=5_000))
    session = claude(server)
    session.turn([SYSTEM, user("frame 1")], action)
    assert server.compactions() == []


BAD_COMPACTIONS = [
    pytest.param(Failure(500, type="api_error"), id="http-500"),
    pytest.param(Summary(blocks=0), id="no-block"),
    pytest.param(Summary(blocks=2), id="two-blocks"),
    pytest.param(Summary(""), id="empty"),
    pytest.param(Summary(None), id="null-content"),
    pytest.param(Summary(signature=None), id="unsigned"),
    pytest.param(Summary(thinking=True), id="with-thinking"),
    pytest.param(Summary(stop_reason="refusal", refusal="cyber"), id="refused"),
    pytest.param(Summary(stop_reason="max_tokens"), id="truncated"),
    pytest.param(Summary(interrupt_after=3), id="interrupted"),
]


@pytest.mark.parametrize("bad", BAD_COMPACTIONS)
def test_a_failed_compaction_keeps_the_accepted_state_and_is_made_again(bad: Any) -> None:
    server = MessagesServer()
    session = claude(server)
    played_two(server, session)
    accepted = session.state
    session.buffer([user("GAME_OVER")])
    server.push(bad, Summary(), Answer("ACTION3"))
    turn = session.turn([user("frame 3")], action)
    first, second = server.compactions()
    assert first["messages"] == second["messages"] == accepted.payload["messages"]
    assert len(server.actions()) == 3  # no action was asked after the failed compaction
    assert turn.attempts == 2 and session.compactions == 1
    assert server.actions()[-1]["messages"][1:] == [user("GAME_OVER"), user("frame 3")]


def test_a_compaction_whose_action_fails_is_made_again_and_both_are_billed() -> None:
    server = MessagesServer()
    session = claude(server)
    played_two(server, session)
    accepted = session.state
    server.push(Summary(), Answer("not an action"), Summary(), Answer("ACTION3"))
    turn = session.turn([user("frame 3")], action)
    first, second = server.compactions()
    assert first["messages"] == second["messages"] == accepted.payload["messages"]
    compaction = Usage(40, 8, 48, 0, 0, 0, None, 1)
    action_usage = Usage(10, 5, 15, 0, 0, 0, None, 1)
    assert turn.usage == compaction + action_usage + compaction + action_usage
    assert session.compactions == 1


def test_exhausted_compactions_leave_the_state_exactly_as_it_was() -> None:
    server = MessagesServer()
    session = claude(server, attempts=2)
    played_two(server, session)
    before, total = session.state, session.total_usage
    server.push(Summary(""), Summary(stop_reason="max_tokens"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 3")], action)
    assert session.state == before and session.compactions == 0
    assert failed.value.usage == Usage(80, 16, 96, 0, 0, 0, None, 2)
    assert session.total_usage == total + failed.value.usage


def test_cache_control_is_never_injected() -> None:
    server = MessagesServer()
    session = claude(server, settings={"request.cache_control": DELETE})
    played_two(server, session)
    server.push(Summary(), Answer("ACTION3"))
    session.turn([user("frame 3")], action)
    assert all("cache_control" not in body for body in server.requests)


def test_harness_summary_is_refused_before_any_call() -> None:
    server = MessagesServer()
    prof = profile(CLAUDE)
    adapter = build_adapter(prof, http_client=server.client(), env=ENV)
    policy = HarnessSummaryPolicy(trigger_tokens=TRIGGER, max_context_tokens=1_000_000)
    with pytest.raises(ConfigurationError, match="summar"):
        HarnessSummaryCompactor(adapter, policy)  # type: ignore[arg-type]
    edits = {"runtime.compaction.strategy": "harness_summary"}
    with pytest.raises(ProfileError, match=r"runtime\.compaction\.strategy"):
        load(entry(CLAUDE, edits))
    assert server.requests == []


PROFILE_REFUSALS = [
    pytest.param(
        {"request.context_management": {"edits": [{"type": "compact_20260112"}]}},
        "request.context_management",
        id="threshold-compaction",
    ),
    pytest.param(
        {"request.extra_body": {"context_management": {"edits": []}}},
        "request.extra_body.context_management",
        id="threshold-in-extra-body",
    ),
    pytest.param(
        {"request.extra_body": {"pause_after_compaction": False}},
        "pause_after_compaction",
        id="pause-after-compaction",
    ),
    pytest.param(
        {"request.betas": ["compact-2026-01-12", "compact-2026-09-04"]},
        "compact-2026-01-12",
        id="old-beta",
    ),
    pytest.param({"request.betas": []}, "compact-2026-09-04", id="native-without-beta"),
    pytest.param({"request.system": "rules"}, "request.system", id="system"),
    pytest.param({"request.tools": []}, "request.tools", id="tools"),
    pytest.param({"request.fallbacks": ["claude-x"]}, "request.fallbacks", id="fallbacks"),
    pytest.param({"request.max_tokens": DELETE}, "request.max_tokens", id="no-max-tokens"),
    pytest.param({"request.max_tokens": True}, "request.max_tokens", id="bool-max-tokens"),
    pytest.param({"request.cache_control": {"type": "forever"}}, "cache_control", id="cache"),
    pytest.param({"request.thinking": {"type": "sometimes"}}, "request.thinking", id="thinking"),
    pytest.param({"request.temperature": 0.5}, "request.temperature", id="not-an-sdk-key"),
    pytest.param(
        {"runtime.compaction.trigger_tokens": 900_000},
        "runtime.compaction.trigger_tokens",
        id="trigger-past-the-context",
    ),
]


@pytest.mark.parametrize(("edits", "named"), PROFILE_REFUSALS)
def test_profiles_are_refused_naming_the_field(edits: dict[str, Any], named: str) -> None:
    with pytest.raises(ProfileError, match=named.replace(".", r"\.")):
        load(entry(CLAUDE, edits))


def test_compaction_is_optional() -> None:
    prof = load(
        entry(CLAUDE, {"runtime.compaction": {"strategy": "none"}, "request.betas": DELETE})
    )
    server = MessagesServer(Answer("ACTION1", input_tokens=5_000), Answer("ACTION2"))
    session = build_session(prof, http_client=server.client(), env=ENV, sleep=lambda s: None)
    session.turn([SYSTEM, user("frame 1")], action)
    session.turn([user("frame 2")], action)
    assert server.compactions() == [] and "anthropic-beta" not in server.headers[0]


def test_messages_sent_is_the_readable_projection_of_each_request(tmp_path: Path) -> None:
    server = MessagesServer()
    session = claude(server, tmp_path)
    played_two(server, session)
    session.buffer([user("GAME_OVER")])
    server.push(Summary("so far"), Answer("ACTION3", thinking="plan"), Answer("ACTION4"))
    session.turn([user("frame 3")], action)
    session.turn([user("frame 4")], action)
    for step, body in enumerate(server.actions(), 1):
        record = json.loads((tmp_path / f"step_{step:03d}.json").read_text())
        assert record["messages_sent"] == [readable(message) for message in body["messages"]]


def test_an_unreachable_provider_is_transient_and_retried() -> None:
    server = MessagesServer(Answer("ACTION1"))
    dropped = [True]

    def handle(request: httpx2.Request) -> httpx2.Response:
        if dropped.pop() if dropped else False:
            raise httpx2.ConnectError("connection refused")
        return server.handle(request)

    prof = profile(CLAUDE)
    http = httpx2.Client(transport=httpx2.MockTransport(handle))
    session = build_session(prof, http_client=http, env=ENV, sleep=lambda s: None)
    turn = session.turn([SYSTEM, user("frame 1")], action)
    assert turn.attempts == 2 and turn.failures[0].kind == "transient"


def test_thinking_counts_come_from_the_top_level_else_from_the_iterations() -> None:
    def entry(kind: str, thinking: int | None) -> dict[str, Any]:
        counts: dict[str, Any] = {"type": kind, "input_tokens": 10, "output_tokens": 50}
        if thinking is not None:
            counts["output_tokens_details"] = {"thinking_tokens": thinking}
        return counts

    sampled = [entry("message", 20), entry("message", 5)]
    top = {"input_tokens": 0, "output_tokens": 0, "output_tokens_details": {"thinking_tokens": 30}}
    assert normalize_usage({**top, "iterations": sampled}).reasoning_tokens == 30
    assert normalize_usage({"input_tokens": 0, "output_tokens": 0, "iterations": sampled}) == Usage(
        20, 100, 120, 25, 0, 0, None, 1
    )
    compacted = [entry("compaction", 7), *sampled]
    assert normalize_usage({**top, "iterations": compacted}).reasoning_tokens == 37
    assert normalize_usage({"input_tokens": 3, "output_tokens": 4}).reasoning_tokens == 0
