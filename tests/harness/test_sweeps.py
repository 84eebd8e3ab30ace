"""Sweeps through the real command (in a real process where it is killed or interrupted):
every config x game pair is played and listed in `sweep.json`; a sweep killed or interrupted
halfway is finished by `--resume`, which plays only the pairs without an ending; one failing
pair never stops the others."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner, Result

from harness.test_run import KEY_ENV, profile_file
from harness.test_run_refusals import KEY, TOOLKIT_ENV
from satchel.cli import app
from satchel.harness.script import Reply, winning_script
from satchel.harness.scripted import ScriptedModelServer

GAMES = ("lamp-0001", "tapx-0001")
CONFIGS = ("model-a", "model-b")
WINS = {"lamp-0001": 7, "tapx-0001": 5}  # the replies that win each game
WAIT_S = 60


def profiles(folder: Path, urls: Mapping[str, str]) -> Path:
    """A profile file with one scripted open-weight profile per config, each its own server."""
    (template,) = yaml.safe_load(profile_file(folder, "http://unused/v1").read_text("utf-8"))
    entries = [
        template | {"id": config, "client": template["client"] | {"base_url": url}}
        for config, url in urls.items()
    ]
    path = folder / "profiles.yaml"
    path.write_text(yaml.safe_dump(entries), encoding="utf-8")
    return path


def command(folder: Path, configs: Sequence[str], games: Sequence[str], *extra: str) -> list[str]:
    args = [sys.executable, "-m", "satchel", "run", "--profiles", str(folder / "profiles.yaml")]
    args += [arg for config in configs for arg in ("--config", config)]
    args += [arg for game in games for arg in ("--game", game)]
    return [*args, "--offline", "--runs-dir", str(folder / "runs"), *extra]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TOOLKIT_ENV}
    return env | {"COLUMNS": "200", KEY_ENV: KEY}


def in_process(folder: Path, games: Sequence[str], configs: Sequence[str], *extra: str) -> Result:
    """`satchel run` in this process (the same command, where no signal or kill is needed)."""
    args = command(folder, configs, games, *extra)[3:]
    return CliRunner().invoke(app, args, env={KEY_ENV: KEY})


def refused(folder: Path, games: Sequence[str], configs: Sequence[str], *extra: str) -> str:
    """The one line a `satchel run` that must be refused says."""
    result = in_process(folder, games, configs, *extra)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    return line


@contextmanager
def started(folder: Path, configs: Sequence[str] = CONFIGS) -> Iterator[subprocess.Popen[str]]:
    """`satchel run` in the background, killed if the test leaves it running."""
    process = subprocess.Popen(
        command(folder, configs, GAMES),
        cwd=folder,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=WAIT_S)


def manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "runs" / "sweep.json").read_text("utf-8"))
    return data


def wait_for(folder: Path, *statuses: str) -> dict[str, Any]:
    """The manifest once a pair has each of `statuses` and the running pairs' folders exist (the
    manifest is replaced whole, never half written)."""
    runs = folder / "runs"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (runs / "sweep.json").exists():
            data = manifest(folder)
            pairs = data["pairs"]
            running = [pair for pair in pairs if pair["status"] == "running"]
            if all(any(pair["status"] == status for pair in pairs) for status in statuses) and all(
                (runs / pair["run_dir"]).is_dir() for pair in running
            ):
                return data
        time.sleep(0.02)
    raise AssertionError(f"no pair {' and '.join(statuses)} within {WAIT_S} s")


def servers(stack: ExitStack, *, slow_first_move: bool = False) -> dict[str, ScriptedModelServer]:
    """A server per config serving the replies that win both games; `slow_first_move` makes
    each game's first answer take a second, so a run can be stopped while a game is in play."""
    script = winning_script(GAMES)
    if slow_first_move:
        for game in GAMES:
            first, *rest = script[game]
            script[game] = (Reply(first.text, reasoning=first.reasoning, delay_s=1.0), *rest)
    return {config: stack.enter_context(ScriptedModelServer(script)) for config in CONFIGS}


def asked(server: ScriptedModelServer) -> dict[str, int]:
    """How many requests the server received for each game."""
    bodies = [json.dumps(body) for body in server.requests]
    return {game: sum(f"Game: {game}" in body for body in bodies) for game in GAMES}


def endings(data: Mapping[str, Any]) -> dict[tuple[str, str], str | None]:
    return {(pair["config"], pair["game"]): pair["exit_reason"] for pair in data["pairs"]}


def exit_of(folder: Path, run_dir: str) -> str:
    meta = json.loads((folder / "runs" / run_dir / "run_meta.json").read_text("utf-8"))
    exit_reason: str = meta["exit_reason"]
    return exit_reason


def test_a_killed_sweep_is_resumed_playing_only_the_pairs_without_an_ending(
    tmp_path: Path,
) -> None:
    with ExitStack() as stack:
        first = servers(stack, slow_first_move=True)
        profiles(tmp_path, {config: server.base_url for config, server in first.items()})
        with started(tmp_path) as process:
            before = wait_for(tmp_path, "ended", "running")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=WAIT_S)
        (kept,) = [pair for pair in before["pairs"] if pair["status"] == "ended"]
        assert (kept["config"], kept["game"], kept["exit_reason"]) == ("model-a", GAMES[0], "WIN")
        killed = manifest(tmp_path)
        assert killed == before  # nothing was written after the kill
        assert [pair["status"] for pair in killed["pairs"]] == [
            "ended",
            "running",
            *["pending"] * 2,
        ]
        partial = killed["pairs"][1]["run_dir"]
        assert not (tmp_path / "runs" / partial / "run_meta.json").exists()
        kept_meta = tmp_path / "runs" / kept["run_dir"] / "run_meta.json"
        kept_written = kept_meta.stat().st_mtime_ns

    with ExitStack() as stack:
        second = servers(stack)
        profiles(tmp_path, {config: server.base_url for config, server in second.items()})
        ran = in_process(tmp_path, GAMES, CONFIGS, "--resume")
        assert ran.exit_code == 0, ran.output
        assert asked(second["model-a"]) == {"lamp-0001": 0, "tapx-0001": WINS["tapx-0001"]}
        assert asked(second["model-b"]) == WINS

    after = manifest(tmp_path)
    assert endings(after) == {(config, game): "WIN" for config in CONFIGS for game in GAMES}
    assert all(pair["status"] == "ended" for pair in after["pairs"])
    assert after["pairs"][0] == kept  # the pair that had ended is kept as it was
    assert kept_meta.stat().st_mtime_ns == kept_written
    assert after["pairs"][1]["replaced"] == [f"replaced/{partial}"]
    assert (tmp_path / "runs" / "replaced" / partial).is_dir()
    assert not (tmp_path / "runs" / partial).exists()
    for pair in after["pairs"]:
        assert exit_of(tmp_path, pair["run_dir"]) == "WIN"
    assert "1 pair(s) that had ended are kept" in ran.output


def test_ctrl_c_records_interrupted_and_resume_plays_it_again(tmp_path: Path) -> None:
    with ExitStack() as stack:
        first = servers(stack, slow_first_move=True)
        profiles(tmp_path, {"model-a": first["model-a"].base_url})
        with started(tmp_path, ["model-a"]) as process:
            wait_for(tmp_path, "running")
            deadline = time.monotonic() + WAIT_S
            while not first["model-a"].requests and time.monotonic() < deadline:
                time.sleep(0.02)  # the first move is asked for: the signal comes while it is
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=WAIT_S) == 130
        assert asked(first["model-a"]) == {"lamp-0001": 1, "tapx-0001": 0}

    stopped = manifest(tmp_path)
    interrupted, untouched = stopped["pairs"]
    assert (interrupted["status"], interrupted["exit_reason"]) == ("ended", "INTERRUPTED")
    assert exit_of(tmp_path, interrupted["run_dir"]) == "INTERRUPTED"
    assert (untouched["status"], untouched["run_dir"]) == ("pending", None)

    hidden = refused(tmp_path, GAMES, ["model-a"])  # a new sweep would hide the unfinished one
    assert "2 pair(s) without an ending" in hidden and "--resume" in hidden
    other = refused(tmp_path, ["lamp-0001"], ["model-a"], "--resume")
    assert "--game lamp-0001, tapx-0001, not lamp-0001" in other
    assert manifest(tmp_path) == stopped

    with ScriptedModelServer(winning_script(GAMES)) as server:
        profiles(tmp_path, {"model-a": server.base_url})
        ran = in_process(tmp_path, GAMES, ["model-a"], "--resume")
        assert ran.exit_code == 0, ran.output
        assert asked(server) == WINS
    resumed = manifest(tmp_path)
    assert endings(resumed) == {("model-a", game): "WIN" for game in GAMES}
    assert resumed["pairs"][0]["replaced"] == [f"replaced/{interrupted['run_dir']}"]


def test_a_failing_pair_never_stops_the_others_and_stays_ended(tmp_path: Path) -> None:
    refusing = [{"status": 401, "error_code": "invalid_api_key", "error_type": "auth"}] * 2
    with (
        ScriptedModelServer(winning_script(GAMES)) as working,
        ScriptedModelServer({"*": refusing}) as failing,
    ):
        profiles(tmp_path, {"model-a": working.base_url, "model-b": failing.base_url})
        ran = in_process(tmp_path, GAMES, CONFIGS, "--parallel", "2")
        assert ran.exit_code == 1, ran.output
        assert endings(manifest(tmp_path)) == {
            ("model-a", "lamp-0001"): "WIN",
            ("model-a", "tapx-0001"): "WIN",
            ("model-b", "lamp-0001"): "API_ERROR",
            ("model-b", "tapx-0001"): "API_ERROR",
        }
        results = ran.output[ran.output.index("results") :]
        assert "model-b" in results and "config" in results
        seen = (len(working.requests), len(failing.requests))

        again = in_process(tmp_path, GAMES, CONFIGS, "--resume")  # an error is an ending: kept
        assert again.exit_code == 1, again.output
        assert (len(working.requests), len(failing.requests)) == seen
        assert "4 pair(s) that had ended are kept" in again.output

    data = manifest(tmp_path)  # a failed pair is played again once marked pending by hand
    failed = [pair for pair in data["pairs"] if pair["exit_reason"] == "API_ERROR"]
    for pair in failed:
        pair["status"] = "pending"
    (tmp_path / "runs" / "sweep.json").write_text(json.dumps(data), encoding="utf-8")
    with (
        ScriptedModelServer(winning_script(GAMES)) as working,
        ScriptedModelServer(winning_script(GAMES)) as mended,
    ):
        profiles(tmp_path, {"model-a": working.base_url, "model-b": mended.base_url})
        last = in_process(tmp_path, GAMES, CONFIGS, "--resume")
        assert last.exit_code == 0, last.output
        assert (asked(working), asked(mended)) == ({game: 0 for game in GAMES}, WINS)
    replayed = manifest(tmp_path)
    assert set(endings(replayed).values()) == {"WIN"}
    assert [pair["replaced"] for pair in replayed["pairs"][2:]] == [
        [f"replaced/{pair['run_dir']}"] for pair in failed
    ]


def test_a_config_or_game_named_twice_is_refused(tmp_path: Path) -> None:
    profiles(tmp_path, {"model-a": "http://127.0.0.1:9/v1"})
    assert "--config 'model-a' is given twice" in refused(tmp_path, GAMES, ["model-a"] * 2)
    assert "--game 'lamp-0001' is given twice" in refused(tmp_path, ["lamp-0001"] * 2, ["model-a"])
    assert not (tmp_path / "runs").exists()
