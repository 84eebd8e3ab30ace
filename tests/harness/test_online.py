"""`satchel run` ONLINE: the real toolkit against a loopback fake of the ARC API.

The fake (`harness.arc_api_fake`) plays satchel's own games behind the endpoints the toolkit
calls; the model is the scripted loopback server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.arc_api_fake import MAX_REASONING_BYTES, SESSION_COOKIE, ArcApiFake, reasoning_sizes
from harness.test_run import KEY_ENV, LAMP, MAZE, act, maze_replies, meta, profile_file
from satchel.cli import app
from satchel.harness.scripted import ScriptedModelServer

ARC_KEY = "arc-key-for-the-fake-0000"
PROFILE = "scripted-open-weight"
TAGS = ["satchel", PROFILE, "nightly"]
TOOLKIT_ENV = (
    "ARC_API_KEY",
    "ARC_BASE_URL",
    "OPERATION_MODE",
    "ENVIRONMENTS_DIR",
    "RECORDINGS_DIR",
)
CLOSE = "/api/scorecard/close"
OPEN = "/api/scorecard/open"


@pytest.fixture(autouse=True)
def _no_toolkit_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toolkit reads these from the environment; only the test's own values count."""
    for name in TOOLKIT_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def fake() -> Iterator[ArcApiFake]:
    with ArcApiFake(ARC_KEY) as running:
        yield running


def run_args(profiles: Path, runs: Path, games: Sequence[str], *extra: str) -> list[str]:
    args = ["run", "--config", PROFILE, "--profiles", str(profiles), "--runs-dir", str(runs)]
    for game in games:
        args += ["--game", game]
    return [*args, *extra]


def arc_env(base_url: str, key: str = ARC_KEY) -> dict[str, str]:
    return {KEY_ENV: "sk-canary-key-0000", "ARC_API_KEY": key, "ARC_BASE_URL": base_url}


def play_online(
    runner: CliRunner,
    folder: Path,
    profiles: Path,
    games: Sequence[str],
    *extra: str,
    env: Mapping[str, str],
) -> tuple[Any, dict[str, Path]]:
    """Run `satchel run` (no `--offline`): the click result and each game's run folder."""
    runs = folder / "runs"
    args = run_args(profiles, runs, games, *extra, "--tags", "nightly")
    result = runner.invoke(app, args, env=env)
    folders = {path.name.split(".")[0]: path for path in runs.glob("*.*") if path.is_dir()}
    return result, folders


def crashed(result: Any) -> bool:
    """True when the command ended in an exception of its own (a traceback for a user)."""
    return result.exception is not None and not isinstance(result.exception, SystemExit)


def assert_card_lifecycle(fake: ArcApiFake) -> str:
    """One card opened with the run's tags before any command, closed once after the last."""
    calls = fake.calls
    opened = [call for call in calls if call.path == OPEN]
    closed = [call for call in calls if call.path == CLOSE]
    assert len(opened) == 1 and opened[0].status == 200
    assert opened[0].body["tags"] == TAGS
    card_id = opened[0].answer["card_id"]
    assert len(closed) == 1, [call.path for call in calls]
    assert closed[0].body == {"card_id": card_id} and closed[0].status == 200
    assert fake.closed_cards == [card_id] and fake.open_cards == []
    commands = [index for index, call in enumerate(calls) if call.command]
    assert commands, "no RESET or ACTION reached the API"
    assert calls.index(opened[0]) < commands[0] and commands[-1] < calls.index(closed[0])
    assert calls[-1] is closed[0]
    assert all(call.key_ok for call in calls)
    for call in fake.commands:
        if call.command == "RESET" and "guid" not in call.body:
            assert call.body["card_id"] == card_id  # a new play is opened under the card
    return str(card_id)


def _first_action(fake: ArcApiFake) -> Any:
    return next(call for call in fake.commands if call.command != "RESET")


# ---------------------------------------------------------------------------------------------
# Played to the end through the CLI


def test_a_game_is_played_to_a_win_online_under_one_scorecard(
    runner: CliRunner, tmp_path: Path, fake: ArcApiFake
) -> None:
    """No `--offline`/`--online`: ARC_API_KEY being set makes the run online."""
    with ScriptedModelServer({"maze-0001": maze_replies()}) as model:
        profiles = profile_file(tmp_path, model.base_url)
        result, folders = play_online(
            runner, tmp_path, profiles, ["maze-0001"], env=arc_env(fake.base_url)
        )
    assert result.exit_code == 0, result.output
    run = meta(folders["maze-0001"])
    assert run["exit_reason"] == "WIN" and run["outcome"] == "WIN"
    assert (run["levels_completed"], run["win_levels"]) == (3, 3)
    assert run["actions"] == sum(len(level) for level in MAZE)
    assert run["score"] is None  # the API lists its games without baselines
    assert_card_lifecycle(fake)

    assert [call.path for call in fake.calls[:3]] == ["/api/games", OPEN, "/api/games/maze"]
    actions = [call for call in fake.commands if call.command != "RESET"]
    assert len(actions) == run["actions"]
    cookie = f"{SESSION_COOKIE}="
    assert all(call.cookie and cookie in call.cookie for call in fake.commands)  # sticky session
    guids = {call.body.get("guid") for call in actions}
    assert len(guids) == 1 and None not in guids
    for step, call in enumerate(actions, start=1):
        assert call.body["game_id"] == "maze-0001"
        record = json.loads(call.body["reasoning"])  # the toolkit sends it as a JSON string
        assert record["step"] == step and record["attempts"] == 1
        assert record["model"] == "scripted"
        assert record["reasoning"] == f"I will try {call.command}."
        assert json.loads(record["response"])["actions"][0]["action_type"] == call.command
        assert set(record["usage"]) >= {"input_tokens", "output_tokens"}
    sizes = list(reasoning_sizes(actions))
    assert len(sizes) == len(actions)
    assert all(sent <= measured <= MAX_REASONING_BYTES for sent, measured in sizes)
    assert "sk-canary-key-0000" not in json.dumps([call.body for call in fake.calls])


def test_a_game_whose_model_fails_still_closes_the_card_once(
    runner: CliRunner, tmp_path: Path, fake: ArcApiFake
) -> None:
    broken = [{"status": 401, "error_code": "invalid_api_key", "error_type": "auth"}]
    with ScriptedModelServer({"lamp-0001": broken}) as model:
        profiles = profile_file(tmp_path, model.base_url)
        result, folders = play_online(
            runner, tmp_path, profiles, ["lamp-0001"], "--online", env=arc_env(fake.base_url)
        )
    assert result.exit_code == 1, result.output
    assert not crashed(result), result.exception
    assert meta(folders["lamp-0001"])["exit_reason"] == "API_ERROR"
    assert_card_lifecycle(fake)
    assert {call.command for call in fake.commands} == {"RESET"}  # no action was ever sent


def test_a_game_over_online_is_reset_through_the_api_under_the_same_play(
    runner: CliRunner, tmp_path: Path, fake: ArcApiFake
) -> None:
    replies = [act("ACTION5"), *[act(name) for name in LAMP]]
    with ScriptedModelServer({"lamp-0001": replies}) as model:
        profiles = profile_file(tmp_path, model.base_url)
        result, folders = play_online(
            runner, tmp_path, profiles, ["lamp-0001"], env=arc_env(fake.base_url)
        )
    assert result.exit_code == 0, result.output
    assert meta(folders["lamp-0001"])["exit_reason"] == "WIN"
    assert_card_lifecycle(fake)
    commands = fake.commands
    after_first_action = [call.command for call in commands[commands.index(_first_action(fake)) :]]
    assert after_first_action[:2] == ["ACTION5", "RESET"]  # the game over, then the forced reset
    guids = {call.body.get("guid") for call in commands if call.body.get("guid")}
    assert len(guids) == 1


def test_an_action_the_api_refuses_ends_the_game_and_still_closes_the_card(
    runner: CliRunner, tmp_path: Path
) -> None:
    with (
        ArcApiFake(ARC_KEY, faults={"/api/cmd/ACTION4": 500}) as fake,
        ScriptedModelServer({"maze-0001": maze_replies()}) as model,
    ):
        profiles = profile_file(tmp_path, model.base_url)
        result, folders = play_online(
            runner, tmp_path, profiles, ["maze-0001"], env=arc_env(fake.base_url)
        )
    assert result.exit_code == 1, result.output
    assert not crashed(result), result.exception
    run = meta(folders["maze-0001"])
    assert run["exit_reason"] == "API_ERROR" and "ACTION4" in run["error"]
    assert_card_lifecycle(fake)


def test_online_without_a_key_is_refused_clearly(runner: CliRunner, tmp_path: Path) -> None:
    profiles = profile_file(tmp_path, "http://127.0.0.1:9/v1")
    result = runner.invoke(
        app, run_args(profiles, tmp_path / "runs", ["maze-0001"], "--online"), env={KEY_ENV: "x"}
    )
    assert result.exit_code == 2 and not crashed(result), result.output
    assert "ARC_API_KEY" in result.output


def test_the_reasoning_sent_with_an_action_stays_within_the_api_limit(
    runner: CliRunner, tmp_path: Path, fake: ArcApiFake
) -> None:
    replies = maze_replies()
    thinking_in_json = '{"action_type": "ACTION4"} ' * 450  # 12 KB of text, 1,800 quotes
    replies[0] = replies[0] | {"reasoning": thinking_in_json}
    with ScriptedModelServer({"maze-0001": replies}) as model:
        profiles = profile_file(tmp_path, model.base_url)
        result, folders = play_online(
            runner, tmp_path, profiles, ["maze-0001"], env=arc_env(fake.base_url)
        )
    sizes = list(reasoning_sizes(fake.commands))
    assert sizes and all(measured <= MAX_REASONING_BYTES for _, measured in sizes), sizes[:3]
    assert result.exit_code == 0, result.output
    assert meta(folders["maze-0001"])["exit_reason"] == "WIN"


def test_a_scorecard_that_cannot_be_closed_is_reported_without_a_traceback(
    runner: CliRunner, tmp_path: Path
) -> None:
    with (
        ArcApiFake(ARC_KEY, faults={CLOSE: 503}) as fake,
        ScriptedModelServer({"lamp-0001": [act(name) for name in LAMP]}) as model,
    ):
        profiles = profile_file(tmp_path, model.base_url)
        result, folders = play_online(
            runner, tmp_path, profiles, ["lamp-0001"], env=arc_env(fake.base_url)
        )
        closes = fake.calls_to(CLOSE)
    assert meta(folders["lamp-0001"])["exit_reason"] == "WIN"  # the records were written
    assert len(closes) >= 1 and closes[0].status == 503
    assert not crashed(result), repr(result.exception)
    assert "results" in result.output  # the summary is still printed
    assert "scorecard" in result.output.lower()


# ---------------------------------------------------------------------------------------------
# A real process: interrupted, or refused by the API


def process_env(extra: Mapping[str, str]) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in TOOLKIT_ENV}
    return {**env, "COLUMNS": "120", **extra}


def start(args: Sequence[str], folder: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """`python -m satchel ...` in `folder` (the toolkit reads a `.env` there), output to files."""
    out = (folder / "stdout.txt").open("wb")
    err = (folder / "stderr.txt").open("wb")
    with out, err:
        return subprocess.Popen(
            [sys.executable, "-m", "satchel", *args],
            cwd=folder,
            env=process_env(env),
            stdout=out,
            stderr=err,
        )


def output_of(folder: Path) -> str:
    return "\n".join(
        (folder / name).read_text(encoding="utf-8", errors="replace")
        for name in ("stdout.txt", "stderr.txt")
    )


def finish(process: subprocess.Popen[bytes], timeout: float) -> int:
    """The exit code; the process is killed (by its pid) if it has not exited within `timeout`."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"satchel run did not exit within {timeout} s")


def _game_meta(runs: Path, game_id: str) -> dict[str, Any]:
    (folder,) = [path for path in runs.glob(f"{game_id}.*") if path.is_dir()]
    return meta(folder)


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_sigint_stops_the_run_after_the_current_action_and_closes_the_card(
    tmp_path: Path, fake: ArcApiFake, mode: str
) -> None:
    slow = [reply | {"delay_s": 0.25} for reply in maze_replies()]  # the game: about 18 s
    started = 60  # seconds the run may take to play its first action on a busy machine
    with ScriptedModelServer({"maze-0001": slow}) as model:
        profiles = profile_file(tmp_path, model.base_url)
        runs = tmp_path / "runs"
        extra = ["--offline"] if mode == "offline" else []
        args = run_args(profiles, runs, ["maze-0001"], *extra, "--tags", "nightly")
        process = start(args, tmp_path, arc_env(fake.base_url))
        try:
            if mode == "online":
                played = fake.wait_for(
                    lambda calls: any(c.command not in (None, "RESET") for c in calls), started
                )
            else:
                deadline = time.monotonic() + started
                while len(model.requests) < 2 and time.monotonic() < deadline:
                    time.sleep(0.02)  # the second model call means the first action was played
                played = len(model.requests) >= 2
            assert played and process.poll() is None, output_of(tmp_path)
            process.send_signal(signal.SIGINT)
            code = finish(process, timeout=12)  # well under what the rest of the game takes
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        asked = len(model.requests)
    output = output_of(tmp_path)
    assert code in (0, 130), output  # an orderly stop, not a death by the signal
    assert "Traceback" not in output, output
    run = _game_meta(runs, "maze-0001")
    assert run["exit_reason"] == "INTERRUPTED", run
    assert 1 <= run["actions"] < sum(len(level) for level in MAZE)
    assert asked <= run["actions"] + 1  # at most the call in flight when the signal came
    if mode == "online":
        assert_card_lifecycle(fake)
        actions = [call for call in fake.commands if call.command != "RESET"]
        assert len(actions) == run["actions"]
    else:
        assert fake.calls == []  # `--offline` never reaches the API, even with ARC_API_KEY set


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_api_that_refuses_the_key_fails_clearly(tmp_path: Path, fake: ArcApiFake) -> None:
    """A real process, so that what reaches stderr (logging included) is what a user sees."""
    with ScriptedModelServer({"maze-0001": maze_replies()}) as model:
        profiles = profile_file(tmp_path, model.base_url)
        args = run_args(profiles, tmp_path / "runs", ["maze-0001"])
        process = start(args, tmp_path, arc_env(fake.base_url, "not-the-key"))
        code = finish(process, timeout=30)
    output = output_of(tmp_path)
    calls = fake.calls
    assert calls and not any(call.key_ok for call in calls)
    assert not any(call.command for call in calls)  # no game was started
    assert code != 0, output
    assert "401" in output and "key" in output.lower(), output
    assert "Traceback" not in output, output


def test_an_api_that_cannot_be_reached_fails_clearly(runner: CliRunner, tmp_path: Path) -> None:
    base_url = f"http://127.0.0.1:{_free_port()}"
    profiles = profile_file(tmp_path, "http://127.0.0.1:9/v1")
    result = runner.invoke(
        app, run_args(profiles, tmp_path / "runs", ["maze-0001"]), env=arc_env(base_url)
    )
    assert result.exit_code != 0, result.output
    assert not crashed(result), repr(result.exception)
    assert base_url.removeprefix("http://") in result.output, result.output
