"""The run records: `step_NNN.json`, `compaction_NNN.json`, `run_meta.json`, fitted text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatwire import Answer, ChatServer, Failure
from satchel.compaction import BRIDGE_TEMPLATE
from satchel.turns import (
    InvalidAnswer,
    ModelResponse,
    Pricing,
    RecordsWriter,
    Session,
    TurnFailed,
    Usage,
    redact,
)
from satchel.turns.records import METADATA_LIMIT_BYTES, action_record, fit_text
from satchel.turns.redaction import REDACTED
from turns.kit import Sleeps, compactor, open_source_adapter, parse_action, system, user

STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@dataclass(frozen=True)
class Action:
    name: str
    x: int


def parse_move(response: ModelResponse) -> Action:
    if not response.text.startswith("ACT"):
        raise InvalidAnswer("not an action")
    return Action(response.text, 3)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@dataclass
class Recorded:
    run: Path
    server: ChatServer
    session: Session
    meta: dict[str, Any]


def recorded_run(tmp_path: Path) -> Recorded:
    """Four turns: a retry, an overflow recovered by compaction, a clean step, an abandoned one."""
    server = ChatServer()
    adapter = open_source_adapter(
        server, max_tokens=500, extra_body={"api_key": "sk-body", "top_k": 20}
    )
    run = tmp_path / "run"
    session = Session(
        adapter,
        compactor=compactor(adapter, trigger_tokens=100_000),
        records=RecordsWriter(run),
        pricing=Pricing(input_per_million=1.0, output_per_million=2.0),
        sleep=Sleeps(),
    )
    server.push(
        Answer("nonsense", reasoning="r0", prompt_tokens=11, completion_tokens=3),
        Answer("ACT 1", reasoning="r1", prompt_tokens=13, completion_tokens=5),
    )
    session.turn([system("rules"), user("frame 1")], parse_move)
    server.push(
        Failure(500, type="server_error", request_id="req_500"),
        Failure(400, code="context_length_exceeded", request_id="req_400"),
        Answer("the summary", reasoning="sr", prompt_tokens=17, completion_tokens=7),
        Answer("ACT 2", reasoning="r2", prompt_tokens=19, completion_tokens=9),
    )
    session.turn([user("frame 2")], parse_move)
    server.push(Answer("ACT 3", prompt_tokens=23, completion_tokens=2))
    session.turn([user("frame 3")], parse_move)
    server.push(Answer("", prompt_tokens=29, completion_tokens=1), Failure(401))
    with pytest.raises(TurnFailed):
        session.turn([user("frame 4")], parse_move)
    meta = session.finish(
        "WIN", run_id="run-7", game="ls20", config_id="qwen-test", started_at=STARTED
    )
    return Recorded(run, server, session, meta)


def usage(prompt: int, completion: int, requests: int = 1) -> dict[str, Any]:
    return Usage(prompt, completion, prompt + completion, 0, 0, 0, None, requests).to_dict()


def test_the_run_directory_holds_exactly_the_records(tmp_path: Path) -> None:
    recorded = recorded_run(tmp_path)
    assert sorted(path.name for path in recorded.run.iterdir()) == [
        "compaction_001.json",
        "run_meta.json",
        "step_001.json",
        "step_002.json",
        "step_003.json",
    ]


def test_step_record_fields(tmp_path: Path) -> None:
    step = load(recorded_run(tmp_path).run / "step_001.json")
    assert step["step"] == 1
    assert datetime.fromisoformat(step["time"]).tzinfo is not None
    assert isinstance(step["duration_s"], float)
    assert step["duration_s"] >= 0
    assert step["model"] == "test-model"
    assert step["messages_sent"] == [system("rules"), user("frame 1")]
    assert step["response"] == "ACT 1"
    assert step["reasoning_summary"] == "r1"
    assert step["finish_reason"] == "stop"
    assert step["action"] == {"name": "ACT 1", "x": 3}
    assert step["usage"] == usage(24, 8, requests=2)
    assert step["estimated_cost"] == pytest.approx((24 * 1.0 + 8 * 2.0) / 1_000_000)
    assert step["compaction_usage"] is None
    assert step["attempts"] == 2
    assert step["retries"] == [{"attempt": 1, "kind": "invalid_answer", "diagnostics": None}]
    assert step["request"]["input_items"] == [
        {"index": 0, "type": "message", "role": "system", "content": ["text"]},
        {"index": 1, "type": "message", "role": "user", "content": ["text"]},
    ]
    assert step["request"]["settings"] == {
        "model": "open-test",
        "stream": False,
        "max_tokens": 500,
        "extra_body": {"api_key": "[redacted]", "top_k": 20},
    }
    assert step["state_transition"] == {
        "items_sent": 2,
        "compaction_items_returned": 0,
        "history_before": 0,
        "history_after": 2,
        "items_pruned": 0,
    }
    assert "continuation" not in step


def test_retries_record_allowlisted_diagnostics(tmp_path: Path) -> None:
    step = load(recorded_run(tmp_path).run / "step_002.json")
    assert step["retries"] == [
        {
            "attempt": 1,
            "kind": "transient",
            "diagnostics": {
                "exception_class": "InternalServerError",
                "provider_error_type": "server_error",
                "http_status": 500,
                "request_id": "req_500",
            },
        },
        {
            "attempt": 2,
            "kind": "context_overflow",
            "diagnostics": {
                "exception_class": "BadRequestError",
                "provider_error_type": "invalid_request_error",
                "http_status": 400,
                "request_id": "req_400",
            },
        },
    ]
    assert step["attempts"] == 3


def test_continuation_only_on_the_first_step_after_a_compaction(tmp_path: Path) -> None:
    recorded = recorded_run(tmp_path)
    step = load(recorded.run / "step_002.json")
    bridge = BRIDGE_TEMPLATE.format(summary="the summary")
    assert step["continuation"] == {"compaction": 1, "summary": "the summary", "bridge": bridge}
    assert step["messages_sent"] == [system("rules"), user(bridge), user("frame 2")]
    assert recorded.server.requests[-2]["messages"][1] == user(bridge)
    assert step["usage"] == usage(36, 16, requests=2)
    assert step["compaction_usage"] == usage(17, 7)
    assert "continuation" not in load(recorded.run / "step_001.json")
    assert "continuation" not in load(recorded.run / "step_003.json")


def test_compaction_record_fields(tmp_path: Path) -> None:
    record = load(recorded_run(tmp_path).run / "compaction_001.json")
    assert record["number"] == 1
    assert record["step_before"] == 1
    assert datetime.fromisoformat(record["time"]).tzinfo is not None
    assert record["duration_s"] >= 0
    assert record["model"] == "open-test"
    assert record["mechanism"] == "harness_summary"
    assert record["summary"] == "the summary"
    assert record["trigger"] == "overflow"
    assert record["attempts"] == 1
    assert record["overflow_recoveries"] == 0
    assert record["excluded_turns"] == 0
    assert record["excluded_items"] == 0
    assert record["turns_before"] == 1
    assert record["turns_summarized"] == 1
    assert record["turns_after"] == 0
    assert record["usage"] == usage(17, 7)


def test_compaction_record_counts_native_items(tmp_path: Path) -> None:
    """Besides excluded items, the record counts the native items before and after."""
    record = load(recorded_run(tmp_path).run / "compaction_001.json")
    counts = {
        key: value
        for key, value in record.items()
        if "item" in key and key != "excluded_items" and isinstance(value, int)
    }
    assert 2 in counts.values(), f"no count of the 2 items before compaction in {record}"
    assert 1 in counts.values(), f"no count of the 1 item (the bridge) after it in {record}"


def test_run_meta_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SATCHEL_COMMIT_SHA", raising=False)
    recorded = recorded_run(tmp_path)
    meta = load(recorded.run / "run_meta.json")
    assert meta == recorded.meta
    assert meta["run_id"] == "run-7"
    assert meta["game"] == "ls20"
    assert meta["model"] == "open-test"
    assert meta["started_at"] == STARTED.isoformat()
    assert datetime.fromisoformat(meta["ended_at"]) >= STARTED
    assert meta["steps"] == 3
    assert meta["outcome"] == "WIN"
    assert meta["total_usage"] == usage(11 + 13 + 17 + 19 + 23 + 29, 3 + 5 + 7 + 9 + 2 + 1, 6)
    assert meta["abandoned_usage"] == usage(29, 1)
    assert meta["estimated_cost"] == pytest.approx((112 * 1.0 + 27 * 2.0) / 1_000_000)
    runtime = meta["runtime"]
    assert runtime == {
        "adapter_id": "open_source.chat_completions.v1",
        "strategy": "continuous_conversation",
        "config_id": "qwen-test",
        "settings": {
            "model": "open-test",
            "stream": False,
            "max_tokens": 500,
            "extra_body": {"api_key": "[redacted]", "top_k": 20},
        },
        "provider": "open_source",
        "api_surface": "chat.completions",
        "implementation_path": "src/satchel/providers/chat/open_source_chat.py",
        "adapter_version": "1.0.0",
        "review_status": "unreviewed",
        "commit_sha": None,
        "source_permalink": None,
        "compaction": {
            "strategy": "harness_summary",
            "trigger_tokens": 100_000,
            "max_context_tokens": 200_000,
            "summary_max_tokens": None,
            "summary_input_headroom_tokens": 8_000,
            "max_attempts": 3,
            "backoff_initial_s": 1.0,
            "backoff_max_s": 30.0,
            "count": 1,
        },
    }


def test_run_total_counts_each_request_once(tmp_path: Path) -> None:
    recorded = recorded_run(tmp_path)
    steps = [load(recorded.run / f"step_{n:03d}.json")["usage"] for n in (1, 2, 3)]
    summed = {key: sum(step[key] for step in steps) for key in ("input_tokens", "requests")}
    meta = recorded.meta
    assert meta["total_usage"]["input_tokens"] == (
        summed["input_tokens"] + meta["abandoned_usage"]["input_tokens"]
    )
    assert meta["total_usage"]["requests"] == summed["requests"] + 1
    assert meta["total_usage"]["requests"] == 6


def test_run_meta_without_compactor_or_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SATCHEL_COMMIT_SHA", raising=False)
    server = ChatServer(Answer("ACT 1"))
    session = Session(open_source_adapter(server), sleep=Sleeps())
    session.turn([user("frame")], parse_action)
    meta = session.finish("LOSS", run_id="r", started_at=STARTED)
    assert meta["runtime"]["compaction"] == {"strategy": "none", "count": 0}
    assert meta["game"] is None
    assert meta["runtime"]["config_id"] is None
    assert meta["estimated_cost"] is None


def test_commit_sha_comes_from_the_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git = tmp_path / ".git"
    git.mkdir()
    (git / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SATCHEL_COMMIT_SHA", raising=False)
    monkeypatch.setenv("SATCHEL_SOURCE_URL", "https://example.org/satchel/")
    server = ChatServer()
    session = Session(open_source_adapter(server), sleep=Sleeps())
    runtime = session.finish("WIN", run_id="r", started_at=STARTED)["runtime"]
    assert runtime["commit_sha"] is None
    assert runtime["source_permalink"] is None

    sha = "fedcba9876543210fedcba9876543210fedcba98"
    monkeypatch.setenv("SATCHEL_COMMIT_SHA", sha)
    runtime = session.finish("WIN", run_id="r", started_at=STARTED)["runtime"]
    assert runtime["commit_sha"] == sha
    assert runtime["source_permalink"] == (
        f"https://example.org/satchel/blob/{sha}/src/satchel/providers/chat/open_source_chat.py"
    )

    monkeypatch.setenv("SATCHEL_COMMIT_SHA", "main; echo pwned")
    runtime = session.finish("WIN", run_id="r", started_at=STARTED)["runtime"]
    assert runtime["commit_sha"] is None
    assert runtime["source_permalink"] is None


def test_commit_sha_without_source_url_has_no_permalink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SATCHEL_COMMIT_SHA", "abc1234")
    monkeypatch.delenv("SATCHEL_SOURCE_URL", raising=False)
    session = Session(open_source_adapter(ChatServer()), sleep=Sleeps())
    runtime = session.finish("WIN", run_id="r", started_at=STARTED)["runtime"]
    assert runtime["commit_sha"] == "abc1234"
    assert runtime["source_permalink"] is None


def test_long_output_and_reasoning_are_fitted_in_step_records(tmp_path: Path) -> None:
    text = "ACT " + "a" * 30_000 + "END"
    reasoning = "R" + "é" * 20_000 + "Z"
    server = ChatServer(Answer(text, reasoning=reasoning))
    session = Session(open_source_adapter(server), records=RecordsWriter(tmp_path), sleep=Sleeps())
    accepted = session.turn([user("frame")], parse_action)
    assert accepted.response.text == text
    step = load(tmp_path / "step_001.json")
    assert step["response"] == fit_text(text)
    assert step["reasoning_summary"] == fit_text(reasoning)
    assert len(step["response"].encode()) <= METADATA_LIMIT_BYTES
    assert len(step["reasoning_summary"].encode()) <= METADATA_LIMIT_BYTES


def test_a_turns_observation_is_written_redacted_into_its_step_record_and_only_its_own(
    tmp_path: Path,
) -> None:
    server = ChatServer(Answer("nonsense"), Answer("ACT 1"), Answer("ACT 2"))
    session = Session(open_source_adapter(server), records=RecordsWriter(tmp_path), sleep=Sleeps())
    seen = {"frames": [["0f", "a1"]], "state": "NOT_FINISHED", "api_key": "sk-seen"}
    session.turn([user("frame 1")], parse_action, observation=seen)
    session.turn([user("frame 2")], parse_action)
    first = load(tmp_path / "step_001.json")
    assert first["attempts"] == 2  # the retry kept the observation of the turn
    assert first["observation"] == seen | {"api_key": REDACTED}
    assert "observation" not in load(tmp_path / "step_002.json")


def test_fit_text_keeps_short_text() -> None:
    assert fit_text("short") == "short"
    exact = "x" * METADATA_LIMIT_BYTES
    assert fit_text(exact) == exact


@pytest.mark.parametrize("unit", ["a", "é", "漢", "🎲"])
def test_fit_text_keeps_head_and_tail_within_the_limit(unit: str) -> None:
    text = "HEAD" + unit * 20_000 + "TAIL"
    fitted = fit_text(text)
    assert len(fitted.encode("utf-8")) <= METADATA_LIMIT_BYTES
    assert fitted.startswith("HEAD" + unit)
    assert fitted.endswith(unit + "TAIL")
    assert f"{len(text.encode())} bytes" in fitted
    assert "\ufffd" not in fitted
    assert len(fitted.encode()) > METADATA_LIMIT_BYTES - 200


def test_fit_text_custom_limit() -> None:
    fitted = fit_text("0123456789" * 100, limit=200)
    assert len(fitted.encode()) <= 200
    assert fitted.startswith("0123")
    assert fitted.endswith("6789")


def test_action_record_forms() -> None:
    assert action_record(Action("ACT 1", 2)) == {"name": "ACT 1", "x": 2}
    assert action_record({"a": [1, 2]}) == {"a": [1, 2]}
    assert action_record({1, 2}) == repr({1, 2})
    assert action_record(float("nan")) == "nan"


def test_records_writer_redacts_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    writer = RecordsWriter(tmp_path / "deep" / "run", opaque_fields={"blob"})
    path = writer.write_step(
        12, {"Authorization": "Bearer x", "items": [{"blob": "x", "signature": "y", "n": 1}]}
    )
    assert path.name == "step_012.json"
    assert load(path) == {"Authorization": "[redacted]", "items": [{"n": 1}]}
    writer.write_compaction(3, {"n": 3})
    writer.write_run_meta({"n": 0})
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "compaction_003.json",
        "run_meta.json",
        "step_012.json",
    ]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    steps=st.lists(
        st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=8)},
                optional={
                    "signature": st.text(max_size=4),
                    "api_key": st.text(max_size=4),
                    "parts": st.lists(st.integers(), max_size=2),
                },
            ),
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    ),
    rest=st.dictionaries(st.sampled_from(["step", "model", "token"]), st.integers(), max_size=3),
)
def test_messages_sent_are_written_as_the_redacted_record(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[list[dict[str, Any]]],
    rest: dict[str, int],
) -> None:
    """Each message of `messages_sent` is rendered once and reused: every step file still reads
    back as exactly the redacted record."""
    writer = RecordsWriter(tmp_path_factory.mktemp("run"), opaque_fields={"parts"})
    sent: list[dict[str, Any]] = []
    for number, new in enumerate(steps, start=1):
        sent = [*sent, *new]
        record = {**rest, "messages_sent": list(sent)}
        path = writer.write_step(number, record)
        assert load(path) == redact(record, {"parts"})
