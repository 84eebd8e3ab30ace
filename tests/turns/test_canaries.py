"""Canary secrets and opaque blobs never reach records, logs or error messages."""

from __future__ import annotations

import json
import logging
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from chatwire import Answer, Call, Called, ChatServer, DeepSeekServer, Failure
from satchel.providers import build_adapter, parse_profiles
from satchel.turns import RecordsWriter, RetryPolicy, Session, TurnFailed, redact
from turns.kit import Sleeps, compactor, parse_action, system, user

API_KEY = "sk-CANARY-apikey-5d1e"
AUTH_HEADER = "Bearer CANARY-authheader-77a0"
BODY_KEY = "CANARY-bodykey-31f9"
ACCESS_TOKEN = "CANARY-accesstoken-0c42"
ENCRYPTED = "CANARY-encrypted-9b3c"
SIGNATURE = "CANARY-signature-e810"
ERROR_TEXT = "CANARY-providererror-4a61"
CANARIES = (API_KEY, AUTH_HEADER, BODY_KEY, ACCESS_TOKEN, ENCRYPTED, SIGNATURE, ERROR_TEXT)
KEY_ENV = "SATCHEL_CANARY_KEY"

OPAQUE = {"encrypted_content": ENCRYPTED, "signature": SIGNATURE}
DEEPSEEK = "deepseek.chat_completions.v1"
SUMMARIZING = ("open_source.chat_completions.v1", DEEPSEEK)


def profile(adapter_id: str, stream: bool) -> Any:
    request: dict[str, Any] = {
        "model": "canary-model",
        "stream": stream,
        "max_tokens": 1000,
        "extra_body": {"api_key": BODY_KEY, "auth": [{"Access_Token": ACCESS_TOKEN}]},
    }
    runtime: dict[str, Any] = {"adapter_id": adapter_id}
    if adapter_id == "openai.chat_completions.v1":
        runtime["state"] = "manual_rolling"
        request["extra_headers"] = {"Authorization": AUTH_HEADER}
    else:
        runtime["state"] = "continuous_conversation"
        runtime["compaction"] = {"strategy": "harness_summary", "trigger_tokens": 100_000}
        runtime["reasoning_replay"] = ["reasoning_content"]
    entry = {
        "id": "canary",
        "agent": {"MAX_CONTEXT_LENGTH": 200_000},
        "runtime": runtime,
        "client": {"api_key_env": KEY_ENV},
        "request": request,
    }
    return parse_profiles([entry])["canary"]


def secret_answer(text: str, **extra: Any) -> Answer:
    return Answer(text, reasoning=f"thinking about {text}", message_extra=dict(OPAQUE), **extra)


def secret_call(text: str, **extra: Any) -> Called:
    """`secret_answer` for DeepSeek: the same reasoning and opaque fields, the text as the
    answer tool's arguments."""
    call = Call("call_canary", arguments=json.dumps({"answer": text}))
    return Called((call,), f"thinking about {text}", message_extra=dict(OPAQUE), **extra)


def run_session(adapter_id: str, stream: bool, run_dir: Path) -> list[BaseException]:
    server = DeepSeekServer() if adapter_id == DEEPSEEK else ChatServer()
    action = secret_call if adapter_id == DEEPSEEK else secret_answer
    adapter = build_adapter(
        profile(adapter_id, stream), http_client=server.client(), env={KEY_ENV: API_KEY}
    )
    summary = None
    if adapter_id in SUMMARIZING:
        summary = compactor(adapter)  # type: ignore[arg-type]
    session = Session(
        adapter,
        policy=RetryPolicy(max_attempts=3),
        compactor=summary,
        records=RecordsWriter(run_dir, adapter.opaque_fields),
        sleep=Sleeps(),
    )
    server.push(
        Failure(500, message=ERROR_TEXT, type="server_error"),
        action("no action here"),
        action("ACT one"),
    )
    session.turn([system("rules"), user("frame 1")], parse_action)
    if summary is not None:
        server.push(
            Failure(400, message=f"maximum context length {ERROR_TEXT}"),
            secret_answer("summary of the game"),
        )
    else:
        server.push(Failure(429, message=ERROR_TEXT, type="rate_limit_error"))
    interrupted = action("ACT two", interrupt_after=3) if stream else action("")
    server.push(interrupted, action("ACT two"))
    session.turn([user("frame 2")], parse_action)

    raised: list[BaseException] = []
    server.push(Failure(401, message=ERROR_TEXT, type="authentication_error"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 3")], parse_action)
    raised.append(failed.value)
    server.push(Failure(400, message=f"context window exceeded {ERROR_TEXT}"), Failure(401))
    with pytest.raises(TurnFailed) as overflowed:
        session.turn([user("frame 4")], parse_action)
    raised.append(overflowed.value)
    meta = session.finish("LOSS", run_id="run-canary", started_at=datetime.now(UTC))
    assert session.steps == 2
    assert_clean(repr(meta))

    sent = [str(body) for body in server.requests]
    assert any(BODY_KEY in body and ACCESS_TOKEN in body for body in sent)
    auth = {headers.get("authorization") for headers in server.headers}
    assert auth == (
        {AUTH_HEADER} if "extra_headers" in adapter.settings() else {f"Bearer {API_KEY}"}
    )
    return raised


def assert_clean(text: str, where: str = "") -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary} leaked into {where or text[:200]}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    "adapter_id", ["openai.chat_completions.v1", "open_source.chat_completions.v1", DEEPSEEK]
)
def test_no_canary_in_records_logs_or_errors(
    adapter_id: str, stream: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpcore", "satchel"):
        caplog.set_level(logging.DEBUG, logger=name)
    raised = run_session(adapter_id, stream, tmp_path / "run")

    files = sorted(path for path in tmp_path.rglob("*") if path.is_file())
    names = {path.name for path in files}
    assert {"step_001.json", "step_002.json", "run_meta.json"} <= names
    if adapter_id in SUMMARIZING:
        assert "compaction_001.json" in names
    for path in files:
        assert_clean(path.read_text(encoding="utf-8", errors="replace"), str(path))

    assert any(record.name.startswith("openai") for record in caplog.records)
    assert any(record.name.startswith("satchel") for record in caplog.records)
    for record in caplog.records:
        assert_clean(record.getMessage(), f"log line of {record.name}")
    assert_clean(caplog.text, "the captured log")

    for error in raised:
        assert_clean(str(error), "str(TurnFailed)")
        assert_clean(repr(error), "repr(TurnFailed)")
        assert error.__cause__ is not None
        assert_clean(str(error.__cause__), "str(last error)")
        assert_clean("".join(traceback.format_exception(error)), "the printed traceback")


def test_redact_drops_opaque_fields_at_any_depth() -> None:
    value = {
        "encrypted_content": "x",
        "items": [
            {"type": "reasoning", "signature": "x", "text": "kept"},
            ({"thought_signature": "x", "n": 1},),
            {"type": "redacted_thinking", "data": "x"},
            {"type": "image", "data": "kept"},
        ],
        "nested": {"deeper": {"Encrypted_Content": "x", "ok": True}},
    }
    assert redact(value) == {
        "items": [
            {"type": "reasoning", "text": "kept"},
            [{"n": 1}],
            {"type": "redacted_thinking"},
            {"type": "image", "data": "kept"},
        ],
        "nested": {"deeper": {"ok": True}},
    }


def test_redact_drops_adapter_declared_opaque_fields() -> None:
    value = {"reasoning_blob": "x", "turns": [{"reasoning_blob": "x", "content": "kept"}]}
    assert redact(value, {"reasoning_blob"}) == {"turns": [{"content": "kept"}]}
    assert redact(value) == value


def test_redact_drops_declared_opaque_fields_spelled_with_capitals() -> None:
    """Adapters of camelCase APIs declare names like `thoughtSignature`."""
    value = {"parts": [{"text": "kept", "thoughtSignature": "x"}], "opaqueState": "x"}
    assert redact(value, {"thoughtSignature", "opaqueState"}) == {"parts": [{"text": "kept"}]}


@pytest.mark.parametrize(
    "key", ["api_key", "API_KEY", "Authorization", "authorization", "Access_Token", "bearer_token"]
)
def test_redact_masks_secrets_in_any_case_and_depth(key: str) -> None:
    value = {"settings": [{key: {"nested": "secret"}, "model": "m"}], key: "secret"}
    assert redact(value) == {"settings": [{key: "[redacted]", "model": "m"}], key: "[redacted]"}


def test_redact_returns_a_copy() -> None:
    value = {"api_key": "secret", "items": [{"signature": "x"}]}
    redact(value)
    assert value == {"api_key": "secret", "items": [{"signature": "x"}]}
