"""Canary secrets and opaque blobs never reach records, logs or error messages."""

from __future__ import annotations

import json
import logging
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import googlewire
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
GOOGLE = "google.interactions.v1"
SUMMARIZING = ("open_source.chat_completions.v1", DEEPSEEK, GOOGLE)
ADAPTERS = ["openai.chat_completions.v1", "open_source.chat_completions.v1", DEEPSEEK, GOOGLE]
# A logger each adapter's stack writes to, so the log check is known to have seen its lines. The
# google-genai SDK's own debug lines are the request and response dumps the adapter drops, so
# the transport's lines stand in for it.
SDK_LOGGERS = {GOOGLE: "httpx"}


def profile(adapter_id: str, stream: bool) -> Any:
    request: dict[str, Any] = {
        "model": "canary-model",
        "stream": stream,
        "max_tokens": 1000,
        "extra_body": {"api_key": BODY_KEY, "auth": [{"Access_Token": ACCESS_TOKEN}]},
    }
    runtime: dict[str, Any] = {"adapter_id": adapter_id}
    if adapter_id == GOOGLE:
        del request["max_tokens"]
        request["store"] = False
        request["generation_config"] = {"thinking_summaries": "auto", "max_output_tokens": 1000}
        runtime["state"] = "continuous_conversation"
        runtime["compaction"] = {"strategy": "harness_summary", "trigger_tokens": 100_000}
    elif adapter_id == "openai.chat_completions.v1":
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


def secret_interaction(text: str, **extra: Any) -> googlewire.Answer:
    """`secret_answer` for Gemini Interactions: a thought with its summary and the canary
    signature, an unknown opaque field beside it, then the text."""
    return googlewire.Answer(
        text,
        thought=f"thinking about {text}",
        signature=SIGNATURE,
        step_extra={"encrypted_content": ENCRYPTED},
        **extra,
    )


class Wire:
    """One adapter's scripted server, answers and error replies, spelled the same way."""

    def __init__(self, adapter_id: str) -> None:
        self.google = adapter_id == GOOGLE
        self.server: Any
        if self.google:
            self.server = googlewire.InteractionsServer()
            self.action: Any = secret_interaction
        else:
            self.server = DeepSeekServer() if adapter_id == DEEPSEEK else ChatServer()
            self.action = secret_call if adapter_id == DEEPSEEK else secret_answer
        self.summary: Any = secret_interaction if self.google else secret_answer

    def failure(
        self, status: int, message: str = "the provider's own words", kind: str = ""
    ) -> Any:
        if self.google:
            reasons = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}
            return googlewire.Failure(status, message, reasons.get(status, "INVALID_ARGUMENT"))
        return Failure(status, message=message, type=kind or None)


def run_session(adapter_id: str, stream: bool, run_dir: Path) -> list[BaseException]:
    wire = Wire(adapter_id)
    server, action, failure = wire.server, wire.action, wire.failure
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
        failure(500, ERROR_TEXT, "server_error"),
        action("no action here"),
        action("ACT one"),
    )
    session.turn([system("rules"), user("frame 1")], parse_action)
    if summary is not None:
        server.push(
            failure(400, f"maximum context length {ERROR_TEXT}"),
            wire.summary("summary of the game"),
        )
    else:
        server.push(failure(429, ERROR_TEXT, "rate_limit_error"))
    interrupted = action("ACT two", interrupt_after=3) if stream else action("")
    server.push(interrupted, action("ACT two"))
    session.turn([user("frame 2")], parse_action)
    # A step whose request replays the accepted answer of the one before, past the compaction.
    server.push(action("ACT three"))
    session.turn([user("frame 3")], parse_action)

    raised: list[BaseException] = []
    server.push(failure(401, ERROR_TEXT, "authentication_error"))
    with pytest.raises(TurnFailed) as failed:
        session.turn([user("frame 4")], parse_action)
    raised.append(failed.value)
    server.push(failure(400, f"context window exceeded {ERROR_TEXT}"), failure(401))
    with pytest.raises(TurnFailed) as overflowed:
        session.turn([user("frame 5")], parse_action)
    raised.append(overflowed.value)
    meta = session.finish("LOSS", run_id="run-canary", started_at=datetime.now(UTC))
    assert session.steps == 3
    assert_clean(repr(meta))

    sent = [str(body) for body in server.requests]
    assert any(BODY_KEY in body and ACCESS_TOKEN in body for body in sent)
    if wire.google:
        assert {headers.get("x-goog-api-key") for headers in server.headers} == {API_KEY}
        replayed = [body for body in sent if SIGNATURE in body and ENCRYPTED in body]
        assert replayed, "the thoughts were never replayed with their opaque fields"
        return raised
    auth = {headers.get("authorization") for headers in server.headers}
    assert auth == (
        {AUTH_HEADER} if "extra_headers" in adapter.settings() else {f"Bearer {API_KEY}"}
    )
    return raised


def assert_clean(text: str, where: str = "") -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary} leaked into {where or text[:200]}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("adapter_id", ADAPTERS)
def test_no_canary_in_records_logs_or_errors(
    adapter_id: str,
    stream: bool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The google-genai SDK logs its requests and responses, headers and bodies, only when asked.
    monkeypatch.setenv("GOOGLE_GENAI_DEBUG", "1")
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "google_genai", "google", "httpx", "httpcore", "satchel"):
        caplog.set_level(logging.DEBUG, logger=name)
    raised = run_session(adapter_id, stream, tmp_path / "run")

    files = sorted(path for path in tmp_path.rglob("*") if path.is_file())
    names = {path.name for path in files}
    assert {"step_001.json", "step_002.json", "step_003.json", "run_meta.json"} <= names
    if adapter_id in SUMMARIZING:
        assert "compaction_001.json" in names
    for path in files:
        assert_clean(path.read_text(encoding="utf-8", errors="replace"), str(path))

    sdk = SDK_LOGGERS.get(adapter_id, "openai")
    assert any(record.name.startswith(sdk) for record in caplog.records)
    assert any(record.name.startswith("satchel") for record in caplog.records)
    for record in caplog.records:
        assert_clean(record.getMessage(), f"log line of {record.name}")
    assert_clean(caplog.text, "the captured log")

    # The provider's words reach the one running the turn (in the error's message only); no
    # other canary does.
    assert ERROR_TEXT in str(raised[0])
    for error in raised:
        assert error.__cause__ is not None
        for text, where in (
            (str(error), "str(TurnFailed)"),
            (repr(error), "repr(TurnFailed)"),
            (str(error.__cause__), "str(last error)"),
            ("".join(traceback.format_exception(error)), "the printed traceback"),
        ):
            assert_clean(text.replace(ERROR_TEXT, ""), where)


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
