"""`satchel run` end to end: the real toolkit, satchel's own games, the real SDK over loopback."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from satchel import cli
from satchel.cli import app
from satchel.harness.script import winning_script
from satchel.harness.scripted import ScriptedModelServer

KEY_ENV = "OPEN_WEIGHT_API_KEY"
MAZE = [
    "RDDRDRRDDR",
    "RRRRRDDLLLDDRRRRRDDDDDRRU",
    "DRDDLDDRRRUUUUURRRRRRRRDDRRDDDDDDDDDDD",
]
MOVES = {"U": "ACTION1", "D": "ACTION2", "L": "ACTION3", "R": "ACTION4"}
LAMP = ["ACTION1", "ACTION3", "ACTION5", "ACTION1", "ACTION3", "ACTION4", "ACTION5"]


def act(name: str, **coordinates: int) -> dict[str, Any]:
    """A scripted reply answering `name` in strict JSON."""
    entry: dict[str, Any] = {"action_type": name, **coordinates}
    return {"text": json.dumps({"actions": [entry]}), "reasoning": f"I will try {name}."}


def maze_replies() -> list[dict[str, Any]]:
    return [act(MOVES[step]) for level in MAZE for step in level]


def profile_file(
    folder: Path, base_url: str, *, compaction: dict[str, Any] | None = None, **agent: Any
) -> Path:
    entry = {
        "id": "scripted-open-weight",
        "agent": {"MAX_CONTEXT_LENGTH": 262144, "MAX_RETRIES": 2, **agent},
        "runtime": {
            "adapter_id": "open_source.chat_completions.v1",
            "state": "continuous_conversation",
            "reasoning_replay": ["reasoning_content"],
            "compaction": compaction or {"strategy": "none"},
        },
        "client": {"base_url": base_url, "api_key_env": KEY_ENV},
        "request": {"model": "scripted", "stream": True, "max_tokens": 4096},
        "pricing": {"input": 1.0, "output": 2.0},
    }
    path = folder / "profiles.yaml"
    path.write_text(yaml.safe_dump([entry]), encoding="utf-8")
    return path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def play(
    runner: CliRunner, folder: Path, profiles: Path, games: Sequence[str], *extra: str
) -> tuple[int, str, dict[str, Path]]:
    """Run `satchel run` offline; the exit code, the output and each game's run folder."""
    args = ["run", "--config", "scripted-open-weight", "--profiles", str(profiles), "--offline"]
    for game in games:
        args += ["--game", game]
    runs = folder / "runs"
    args += ["--runs-dir", str(runs), *extra]
    result = runner.invoke(app, args, env={KEY_ENV: "sk-canary-key-0000"})
    folders = {path.name.split(".")[0]: path for path in runs.glob("*.*") if path.is_dir()}
    return result.exit_code, result.output, folders


def meta(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "run_meta.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer({"maze-0001": maze_replies()}) as scripted:
        yield scripted


def test_a_shipped_game_is_played_to_a_win_and_recorded(
    runner: CliRunner, tmp_path: Path, server: ScriptedModelServer
) -> None:
    code, output, folders = play(
        runner, tmp_path, profile_file(tmp_path, server.base_url), ["maze-0001"]
    )
    assert code == 0, output
    run = meta(folders["maze-0001"])
    assert run["outcome"] == run["exit_reason"] == "WIN"
    assert (run["levels_completed"], run["win_levels"]) == (3, 3)
    assert run["score"] == pytest.approx(100.0)  # every level at its baseline
    assert run["actions"] == sum(len(level) for level in MAZE) == run["steps"]
    assert run["level_actions"] == [10, 25, 38]
    runtime = run["runtime"]
    assert runtime["adapter_id"] == "open_source.chat_completions.v1"
    assert runtime["strategy"] == "continuous_conversation"
    assert runtime["config_id"] == "scripted-open-weight"
    assert runtime["compaction"]["strategy"] == "none"
    steps = sorted(folders["maze-0001"].glob("step_*.json"))
    assert len(steps) == run["steps"]
    first = json.loads(steps[0].read_text(encoding="utf-8"))
    assert first["action"] == {"name": "ACTION4", "x": None, "y": None}
    assert "WIN" in output and "maze-0001" in output


def shown_frames(text: str) -> list[list[str]]:
    """The frames a rendered observation shows (rows as lists of numbers), as hexadecimal rows."""
    frames: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("Frame "):
            frames.append([])
        elif line.startswith("[") and frames:
            frames[-1].append("".join(f"{colour:x}" for colour in json.loads(line)))
    return frames


def test_each_step_record_holds_the_observation_and_every_frame_the_model_was_shown(
    runner: CliRunner, tmp_path: Path
) -> None:
    with ScriptedModelServer(winning_script(["lamp-0001"])) as scripted:
        code, output, folders = play(
            runner, tmp_path, profile_file(tmp_path, scripted.base_url), ["lamp-0001"]
        )
    assert code == 0, output
    steps = [
        json.loads(path.read_text("utf-8"))
        for path in sorted(folders["lamp-0001"].glob("step_*.json"))
    ]
    assert max(len(step["observation"]["frames"]) for step in steps) > 1  # an animation
    for step in steps:
        seen = step["observation"]
        shown = step["messages_sent"][-1]["content"]
        assert seen["frames"] == shown_frames(shown)
        assert all(
            len(frame) == 64 and all(len(row) == 64 for row in frame) for frame in seen["frames"]
        )
        assert f"State: {seen['state']}" in shown
        assert f"Levels completed: {seen['levels_completed']} of {seen['win_levels']}" in shown
        assert all(f"- {name}" in shown for name in seen["available_actions"])
        assert step["action"]["name"] in seen["available_actions"]


def test_a_game_is_won_with_compact_frames_each_row_one_string_of_digits(
    runner: CliRunner, tmp_path: Path, server: ScriptedModelServer
) -> None:
    profiles = profile_file(tmp_path, server.base_url, FRAME_FORMAT="compact")
    code, output, folders = play(runner, tmp_path, profiles, ["maze-0001"])
    assert code == 0, output
    assert meta(folders["maze-0001"])["exit_reason"] == "WIN"
    first = server.requests[0]["messages"]
    assert [message["role"] for message in first] == ["system", "user"]
    assert "hexadecimal digits" in first[0]["content"]
    frame = first[1]["content"].splitlines()
    start = frame.index("Frame 1:") + 1
    rows = frame[start : start + 64]
    assert all(re.fullmatch(r"[0-9a-f]{64}", row) for row in rows), rows[:2]
    assert frame[start + 64] == "Available actions:"
    assert not any(line.startswith("[") for body in server.requests for line in _texts(body))


def _texts(body: dict[str, Any]) -> list[str]:
    """Every line of every message a request carried."""
    return [
        line
        for message in body["messages"]
        if isinstance(message.get("content"), str)
        for line in message["content"].splitlines()
    ]


def test_a_retried_turn_never_reaches_a_later_request(runner: CliRunner, tmp_path: Path) -> None:
    replies = maze_replies()
    replies.insert(1, {"text": "I am not sure what to do.", "reasoning": "LEAKED-ATTEMPT"})
    with ScriptedModelServer({"maze-0001": replies}) as scripted:
        code, output, folders = play(
            runner, tmp_path, profile_file(tmp_path, scripted.base_url), ["maze-0001"]
        )
        requests = scripted.requests
    assert code == 0, output
    assert len(requests) == len(replies)
    bodies = [json.dumps(body) for body in requests]
    assert "LEAKED-ATTEMPT" not in "".join(bodies[2:])
    assert bodies[1] == bodies[2]  # the retry asks exactly what the failed attempt asked
    second = json.loads(sorted(folders["maze-0001"].glob("step_*.json"))[1].read_text())
    assert second["attempts"] == 2 and second["retries"][0]["kind"] == "invalid_answer"


def test_a_game_over_is_reset_and_survives_retries(runner: CliRunner, tmp_path: Path) -> None:
    replies = [act("ACTION5"), {"text": "no idea"}, *[act(name) for name in LAMP]]
    with ScriptedModelServer({"lamp-0001": replies}) as scripted:
        code, output, folders = play(
            runner, tmp_path, profile_file(tmp_path, scripted.base_url), ["lamp-0001"]
        )
        requests = scripted.requests
    assert code == 0, output
    assert meta(folders["lamp-0001"])["exit_reason"] == "WIN"
    after_game_over = [json.dumps(body) for body in requests[1:3]]
    for body in after_game_over:  # the failed attempt and its retry both carry the game over
        assert "State: GAME_OVER" in body and "it has been reset" in body


def test_the_action_budget_ends_a_game(runner: CliRunner, tmp_path: Path) -> None:
    with ScriptedModelServer({"maze-0001": [act("ACTION1")] * 10}) as scripted:
        code, output, folders = play(
            runner,
            tmp_path,
            profile_file(tmp_path, scripted.base_url, MAX_ACTIONS_BASELINE_MULTIPLIER=0.5),
            ["maze-0001"],
        )
    assert code == 0, output
    run = meta(folders["maze-0001"])
    assert run["exit_reason"] == "ACTION_BUDGET"
    assert run["actions"] == 5  # ceil(10 * 0.5) for the first level
    assert run["score"] == 0


def test_games_whose_model_server_is_down_end_in_api_error(
    runner: CliRunner, tmp_path: Path
) -> None:
    with ScriptedModelServer({}) as scripted:
        down = scripted.base_url  # nothing listens there once the block ends
    code, output, folders = play(
        runner,
        tmp_path,
        profile_file(tmp_path, down),
        ["lamp-0001", "tapx-0001"],
        "--parallel",
        "2",
    )
    assert code == 1, output
    for game in ("lamp-0001", "tapx-0001"):
        run = meta(folders[game])
        assert run["exit_reason"] == "API_ERROR" and run["steps"] == 0


def test_a_game_whose_model_fails_ends_in_api_error_while_the_others_finish(
    runner: CliRunner, tmp_path: Path
) -> None:
    broken = [{"status": 401, "error_code": "invalid_api_key", "error_type": "auth"}]
    script = {"maze-0001": maze_replies(), "lamp-0001": broken}
    with ScriptedModelServer(script) as scripted:
        code, output, folders = play(
            runner,
            tmp_path,
            profile_file(tmp_path, scripted.base_url),
            ["lamp-0001", "maze-0001"],
            "--parallel",
            "2",
        )
    assert code == 1, output
    assert meta(folders["lamp-0001"])["exit_reason"] == "API_ERROR"
    assert meta(folders["maze-0001"])["exit_reason"] == "WIN"


def test_a_harness_summary_runs_when_the_profile_says_and_bridges_into_the_next_step(
    runner: CliRunner, tmp_path: Path
) -> None:
    big = {"prompt_tokens": 9000, "completion_tokens": 100}
    small = {"prompt_tokens": 500, "completion_tokens": 20}
    replies = [reply | {"usage": small} for reply in maze_replies()]
    replies[0] |= {"usage": big}  # the first step's size schedules a compaction before the next
    replies.insert(1, {"text": "We walked right once, toward the green goal."})
    compaction = {
        "strategy": "harness_summary",
        "trigger_tokens": 8000,
        "summary_max_output_tokens": 512,
    }
    with ScriptedModelServer({"maze-0001": replies}) as scripted:
        code, output, folders = play(
            runner,
            tmp_path,
            profile_file(tmp_path, scripted.base_url, compaction=compaction),
            ["maze-0001"],
        )
    assert code == 0, output
    folder = folders["maze-0001"]
    run = meta(folder)
    assert run["exit_reason"] == "WIN"
    assert run["runtime"]["compaction"]["strategy"] == "harness_summary"
    assert run["runtime"]["compaction"]["count"] == 1
    record = json.loads((folder / "compaction_001.json").read_text(encoding="utf-8"))
    assert "green goal" in record["summary"]
    bridged = json.loads((folder / "step_002.json").read_text(encoding="utf-8"))
    assert "green goal" in bridged["continuation"]["bridge"]


def test_no_key_or_provider_body_reaches_a_record_or_a_log_line(
    runner: CliRunner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The model's key, and an error body the provider sent (which may echo anything), appear in
    no file of the run folder, no log line and no output."""
    planted = ("sk-canary-key-0000", "OPAQUE-BLOB-7f3a")
    failing = {"status": 503, "error_message": f"upstream said {planted[1]}"}
    replies = [failing, *(r | {"reasoning": "thinking"} for r in maze_replies())]
    caplog.set_level(logging.DEBUG)
    with ScriptedModelServer({"maze-0001": replies}) as scripted:
        code, output, folders = play(
            runner, tmp_path, profile_file(tmp_path, scripted.base_url), ["maze-0001"]
        )
    assert code == 0, output
    first = json.loads(sorted(folders["maze-0001"].glob("step_*.json"))[0].read_text())
    assert first["retries"][0]["kind"] == "transient"  # the failure was recorded, its body not
    texts = [path.read_text(encoding="utf-8") for path in folders["maze-0001"].rglob("*.json")]
    for secret in planted:
        assert all(secret not in text for text in texts), secret
        assert secret not in output
        assert secret not in caplog.text


def test_the_games_and_profiles_are_listed(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    games = runner.invoke(app, ["run", "--list-games"])
    assert games.exit_code == 0, games.output
    for game in ("maze-0001", "tapx-0001", "lamp-0001"):
        assert game in games.output
    # Wide enough for a row a line; the console read its width when the CLI was imported.
    monkeypatch.setattr(cli.console, "width", 200)
    configs = runner.invoke(app, ["run", "--list-configs"])
    assert configs.exit_code == 0, configs.output
    for profile_id, adapter_id in (
        ("qwen3-open-weight-continuous", "open_source.chat_completions.v1"),
        ("gpt-5.6-sol-responses-continuous", "openai.responses.v1"),
        ("gpt-5.6-sol-responses-handle", "openai.responses.v1"),
        ("grok-4.6-xai-responses-native", "xai.responses.v1"),
        ("claude-opus-5-messages-native", "anthropic.messages.v1"),
        ("glm-5.3-flash-continuous", "open_source.chat_completions.v1"),
        ("qwen3.8-27b-continuous", "open_source.chat_completions.v1"),
        ("deepseek-thinking-continuous", "deepseek.chat_completions.v1"),
        ("gemini-3.5-pro-interactions-continuous", "google.interactions.v1"),
    ):
        row = next(line for line in configs.output.splitlines() if profile_id in line)
        assert adapter_id in row
    inline = next(line for line in configs.output.splitlines() if "responses-continuous" in line)
    assert inline.split()[-1] == "inline"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--game", "maze-0001", "--offline"], "--config"),
        (["run", "--config", "nope", "--game", "maze-0001", "--offline"], "no profile 'nope'"),
        (["run", "--config", "qwen3-open-weight-continuous", "--offline"], "--game"),
    ],
)
def test_a_run_that_cannot_start_is_a_usage_error(
    runner: CliRunner, args: list[str], message: str
) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output
