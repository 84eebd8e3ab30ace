"""Canary: planted keys, provider messages and opaque blobs appear in no record and no log line,
for both Responses adapters, native compaction and failed attempts included."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from provider_kit import RESPONSES, XAI, action, profile, user

from chatwire import Failure
from responseswire import Compacted, Output, ResponsesServer
from satchel.harness import build_session

KEYS = {
    "OPENAI_API_KEY": "sk-CANARY-openai-4f1d9",
    "XAI_API_KEY": "xai-CANARY-key-77ab2",
    "OPEN_WEIGHT_API_KEY": "unused",
}
PROVIDER_MESSAGE = "CANARY provider message with a secret body"


@pytest.mark.parametrize("profile_id", [RESPONSES, XAI], ids=["openai", "xai"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_no_key_message_or_blob_reaches_a_record_or_a_log(
    profile_id: str, stream: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = {"runtime.compaction.trigger_tokens": 1_000} if profile_id == XAI else {}
    server = ResponsesServer(
        Output("ACTION1", summary="plan", encrypted="CANARY-blob-reasoning-1"),
        Failure(500, message=PROVIDER_MESSAGE, type="server_error"),
        Output("not an action", encrypted="CANARY-blob-rejected-2"),
        Output(
            "ACTION2",
            input_tokens=2_000,
            encrypted="CANARY-blob-reasoning-3",
            compaction="CANARY-blob-inline-3" if profile_id == RESPONSES else None,
        ),
        *([Compacted(blobs=("CANARY-blob-compacted-4",))] if profile_id == XAI else []),
        Output("ACTION3", encrypted="CANARY-blob-reasoning-5"),
    )
    session = build_session(
        profile(profile_id, stream=stream, settings=settings),
        run_dir=tmp_path,
        http_client=server.client(),
        env=KEYS,
        sleep=lambda seconds: None,
    )
    session.turn([{"role": "system", "content": "rules"}, user("frame 1")], action)
    session.turn([user("frame 2")], action)
    session.turn([user("frame 3")], action)
    session.finish("WIN", run_id="canary", started_at=datetime.now(UTC))
    written = {path.name: path.read_text() for path in tmp_path.iterdir()}
    assert "run_meta.json" in written and "step_003.json" in written
    if profile_id == XAI:
        assert "compaction_001.json" in written
    texts = [*written.values(), caplog.text]
    for text in texts:
        assert "CANARY" not in text
        for key in KEYS.values():
            assert key not in text
    assert any("failed" in record.getMessage() for record in caplog.records)
