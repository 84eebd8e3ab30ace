"""Canary: a planted key, a provider error message, thinking signatures, redacted thinking,
unknown block fields and compaction signatures appear in no record and no log line of the
Anthropic Messages adapter, native compaction and failed attempts included; the readable
thinking and the readable summary stay in the step records."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from provider_kit import CLAUDE, action, profile, user

from anthropicwire import Answer, MessagesServer, Summary
from chatwire import Failure
from satchel.harness import build_session

KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-CANARY-key",
    "OPENAI_API_KEY": "unused",
    "OPEN_WEIGHT_API_KEY": "unused",
    "XAI_API_KEY": "unused",
}
PROVIDER_MESSAGE = "CANARY provider message with a secret body"
# anthropicwire fixes a refusal's `stop_details.explanation` (no canary can be planted there), so
# its fixed text stands in: a provider's explanation is kept out like a provider message.
REFUSAL_EXPLANATION = "the model declined"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_no_key_message_signature_or_redacted_thinking_reaches_a_record_or_a_log(
    stream: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = MessagesServer(
        # step 1: readable thinking next to every opaque kind of block the adapter replays
        Answer(
            "ACTION1",
            thinking="visible plan",
            signature="CANARY-sig-1",
            redacted="CANARY-redacted-2",
            block_extra={"canary_field": "CANARY-unknown-field"},
        ),
        # step 2: a provider error, a refusal, a rejected answer, then a large accepted one
        Failure(500, message=PROVIDER_MESSAGE, type="api_error"),
        Answer("", stop_reason="refusal", refusal="cyber", signature="CANARY-sig-refused"),
        Answer("not an action", signature="CANARY-sig-rejected"),
        Answer("ACTION2", input_tokens=2_000, signature="CANARY-sig-accepted"),
        # step 3: compactions that fail, one that is not committed, then the committed one
        Summary(signature=None),
        Summary(signature="CANARY-csig-uncommitted"),
        Answer("no action", signature="CANARY-sig-after-compaction"),
        Summary(content="readable summary", signature="CANARY-csig-3"),
        Answer("ACTION3"),
        # step 4: the signed summary is replayed
        Answer("ACTION4"),
    )
    session = build_session(
        profile(CLAUDE, stream=stream, settings={"runtime.compaction.trigger_tokens": 1_000}),
        run_dir=tmp_path,
        http_client=server.client(),
        env=KEYS,
        sleep=lambda seconds: None,
    )
    session.turn([{"role": "system", "content": "rules"}, user("frame 1")], action)
    session.turn([user("frame 2")], action)
    session.turn([user("frame 3")], action)
    session.turn([user("frame 4")], action)
    session.finish("WIN", run_id="canary", started_at=datetime.now(UTC))

    assert not server.script, "every scripted reply was asked for"
    assert len(server.compactions()) == 3
    planted = json.dumps(server.requests)
    for canary in ("CANARY-sig-1", "CANARY-redacted-2", "CANARY-unknown-field", "CANARY-csig-3"):
        assert canary in planted  # the opaque fields did travel back to the provider

    written = {path.name: path.read_text() for path in tmp_path.iterdir()}
    assert {"run_meta.json", "step_004.json", "compaction_001.json"} <= set(written)
    assert "compaction_002.json" not in written
    for name, text in written.items():
        assert "CANARY" not in text, name
        assert REFUSAL_EXPLANATION not in text, name
    assert any("failed" in record.getMessage() for record in caplog.records)
    assert any("refusal" in record.getMessage() for record in caplog.records)
    own = [r.getMessage() for r in caplog.records if r.name.startswith("satchel")]
    assert not [line for line in own if "CANARY" in line or REFUSAL_EXPLANATION in line]
    # every log line, the SDK's and the HTTP client's included
    assert KEYS["ANTHROPIC_API_KEY"] not in caplog.text
    assert REFUSAL_EXPLANATION not in caplog.text
    first = json.loads(written["step_001.json"])
    assert first["reasoning_summary"] == "visible plan"
    second = json.loads(written["step_002.json"])
    replayed = second["messages_sent"][1]
    assert replayed == {"role": "assistant", "content": "ACTION1", "reasoning": "visible plan"}
    third = json.loads(written["step_003.json"])
    assert "readable summary" in third["messages_sent"][0]["content"]
    assert third["native_compaction"]["items_summarized"] == 4
    leaked = {
        (record.name, found)
        for record in caplog.records
        for found in re.findall(r"CANARY[\w-]*", record.getMessage())
    }
    assert not leaked, f"planted values reached log lines: {sorted(leaked)}"
