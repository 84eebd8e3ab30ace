"""`satchel run` against a server that answers llama.cpp's context overflow: a conversation
with turns to drop compacts and plays on; a frame that cannot fit even alone ends the game with
one line naming the server's sizes. The real SDK over the loopback scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from harness.test_run import maze_replies, meta, play, profile_file
from satchel.harness.scripted import ScriptedModelServer

# llama.cpp's overflow as its server answers it (HTTP 400, type exceed_context_size_error).
LLAMA_CPP_OVERFLOW: dict[str, Any] = {
    "status": 400,
    "error_type": "exceed_context_size_error",
    "error_message": "request (12381 tokens) exceeds the available context size (8192 tokens), "
    "try increasing it",
}
COMPACTION = {
    "strategy": "harness_summary",
    "trigger_tokens": 8000,
    "summary_max_output_tokens": 64,
}


def test_an_overflow_mid_game_compacts_and_the_game_goes_on(tmp_path: Path) -> None:
    small = {"prompt_tokens": 500, "completion_tokens": 20}  # never the threshold's trigger
    replies = [reply | {"usage": small} for reply in maze_replies()]
    replies[2:2] = [LLAMA_CPP_OVERFLOW, {"text": "We moved right, then down, toward the goal."}]
    with ScriptedModelServer({"maze-0001": replies}) as scripted:
        profiles = profile_file(tmp_path, scripted.base_url, compaction=COMPACTION)
        code, output, folders = play(CliRunner(), tmp_path, profiles, ["maze-0001"])
    assert code == 0, output
    folder = folders["maze-0001"]
    assert meta(folder)["exit_reason"] == "WIN"
    record = json.loads((folder / "compaction_001.json").read_text(encoding="utf-8"))
    assert record["trigger"] == "overflow"
    step = json.loads((folder / "step_003.json").read_text(encoding="utf-8"))
    assert [retry["kind"] for retry in step["retries"]] == ["context_overflow"]
    assert "toward the goal" in step["continuation"]["bridge"]


def test_a_frame_that_cannot_fit_alone_ends_the_game_naming_the_sizes(tmp_path: Path) -> None:
    with ScriptedModelServer({"maze-0001": [LLAMA_CPP_OVERFLOW]}) as scripted:
        profiles = profile_file(tmp_path, scripted.base_url, compaction=COMPACTION)
        code, output, folders = play(CliRunner(), tmp_path, profiles, ["maze-0001"])
        asked = len(scripted.requests)
    run = meta(folders["maze-0001"])
    assert run["exit_reason"] == "API_ERROR"
    reason = (
        "the frame alone needs 12381 tokens; the model's context is 8192: "
        "use a compact frame format or a larger context"
    )
    assert run["error"] == reason
    assert f"maze-0001: API_ERROR: {reason}" in " ".join(output.split())
    assert asked == 1  # no summary is asked for a conversation with nothing to summarize
    assert code != 0
