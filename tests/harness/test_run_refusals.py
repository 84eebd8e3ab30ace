"""`satchel run` as a user meets it, in a real process: a run that cannot start is refused before
anything runs (exit 2, one line on stderr, no run folder, the model never called); a game that
fails says why on stderr in the provider's own words; the results name only folders that exist,
each on one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.test_run import KEY_ENV, act, profile_file
from satchel.harness.scripted import ScriptedModelServer

KEY = "sk-canary-key-0000"
LAMP_WIN = ["ACTION1", "ACTION3", "ACTION5", "ACTION1", "ACTION3", "ACTION4", "ACTION5"]
TOOLKIT_ENV = ("ARC_API_KEY", "ARC_BASE_URL", "OPERATION_MODE", "ENVIRONMENTS_DIR")


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str
    runs: Path

    @property
    def folders(self) -> list[Path]:
        return sorted(path for path in self.runs.glob("*.*") if path.is_dir())

    def errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def satchel_run(
    folder: Path,
    profiles: Path,
    games: Sequence[str],
    *extra: str,
    env: Mapping[str, str | None] | None = None,
    columns: int = 120,
) -> Ran:
    """`python -m satchel run ...` in `folder` with the scripted profile; None unsets a variable."""
    runs = folder / "runs"
    args = ["run", "--config", "scripted-open-weight", "--profiles", str(profiles)]
    args += ["--runs-dir", str(runs), *(arg for game in games for arg in ("--game", game))]
    environment = {k: v for k, v in os.environ.items() if k not in TOOLKIT_ENV}
    environment |= {"COLUMNS": str(columns), KEY_ENV: KEY}
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    done = subprocess.run(
        [sys.executable, "-m", "satchel", *args, *extra],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr, runs)


def lamp_server(*replies: Any) -> ScriptedModelServer:
    return ScriptedModelServer({"lamp-0001": list(replies)})


def assert_refused(ran: Ran, *words: str) -> None:
    """Exit 2, one line on stderr holding every word, no run folder, no traceback."""
    assert ran.code == 2, (ran.stdout, ran.stderr)
    (line,) = ran.errors()
    for word in words:
        assert word in line, line
    assert not ran.runs.exists(), ran.folders
    assert "Traceback" not in ran.stdout + ran.stderr


def test_a_misspelled_game_is_refused_naming_the_local_games(tmp_path: Path) -> None:
    with lamp_server(act("ACTION1")) as server:
        ran = satchel_run(tmp_path, profile_file(tmp_path, server.base_url), ["maze-001"])
        asked = server.requests
    assert_refused(ran, "'maze-001'", "did you mean 'maze-0001'", "lamp-0001", "tapx-0001")
    assert asked == []


def test_a_model_key_that_is_not_set_is_refused_naming_the_variable(tmp_path: Path) -> None:
    with lamp_server(act("ACTION1")) as server:
        profiles = profile_file(tmp_path, server.base_url)
        ran = satchel_run(tmp_path, profiles, ["lamp-0001"], "--offline", env={KEY_ENV: None})
        asked = server.requests
    assert_refused(ran, KEY_ENV)
    assert asked == []


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--max-actions", "0"),
        ("--max-actions", "-3"),
        ("--time-limit", "0"),
        ("--time-limit", "-1"),
        ("--parallel", "0"),
    ],
)
def test_limits_out_of_range_are_refused_before_the_model_is_called(
    tmp_path: Path, option: str, value: str
) -> None:
    with lamp_server(act("ACTION1")) as server:
        profiles = profile_file(tmp_path, server.base_url)
        ran = satchel_run(tmp_path, profiles, ["lamp-0001"], "--offline", option, value)
        asked = server.requests
    assert_refused(ran, option, value)
    assert asked == []


def test_online_without_the_arc_key_is_refused_naming_it(tmp_path: Path) -> None:
    ran = satchel_run(
        tmp_path, profile_file(tmp_path, "http://127.0.0.1:9/v1"), ["lamp-0001"], "--online"
    )
    assert_refused(ran, "ARC_API_KEY")


def test_a_provider_refusal_reaches_the_user_in_its_own_words(tmp_path: Path) -> None:
    said = f"The model `Qwen/Qwen3-32B` does not exist (key {KEY}, Authorization: Bearer {KEY})"
    missing = {"status": 404, "error_code": "model_not_found", "error_message": said}
    with lamp_server(missing) as server:
        ran = satchel_run(tmp_path, profile_file(tmp_path, server.base_url), ["lamp-0001"])
    assert ran.code == 1, (ran.stdout, ran.stderr)
    (line,) = [line for line in ran.errors() if line.startswith("lamp-0001:")]
    assert line.startswith("lamp-0001: API_ERROR: ")
    assert "HTTP 404 model_not_found: The model `Qwen/Qwen3-32B` does not exist" in line
    (folder,) = ran.folders
    run = json.loads((folder / "run_meta.json").read_text(encoding="utf-8"))
    assert "The model `Qwen/Qwen3-32B` does not exist" in run["error"]
    assert str(folder) in ran.stdout  # the results name the folder that was written
    written = "".join(path.read_text(encoding="utf-8") for path in folder.rglob("*.json"))
    for text in (ran.stdout, ran.stderr, written):
        assert KEY not in text


def test_an_exhausted_script_says_so_instead_of_an_opaque_api_error(tmp_path: Path) -> None:
    with lamp_server(act("ACTION1")) as server:
        ran = satchel_run(tmp_path, profile_file(tmp_path, server.base_url), ["lamp-0001"])
    assert ran.code == 1, (ran.stdout, ran.stderr)
    assert "lamp-0001: API_ERROR: " in ran.stderr
    assert "the script is exhausted: no reply left for key 'lamp-0001'" in ran.stderr


def test_a_model_server_that_is_down_is_named_by_its_url(tmp_path: Path) -> None:
    with ScriptedModelServer({}) as server:
        down = server.base_url  # nothing listens there once the block ends
    ran = satchel_run(tmp_path, profile_file(tmp_path, down), ["lamp-0001"], "--offline")
    assert ran.code == 1, (ran.stdout, ran.stderr)
    (line,) = [line for line in ran.errors() if line.startswith("lamp-0001:")]
    assert f"{down}/chat/completions could not be reached" in line, line


def test_the_retry_warning_keeps_the_parser_reason(tmp_path: Path) -> None:
    replies = [{"text": "I am not sure."}, *(act(name) for name in LAMP_WIN)]
    with lamp_server(*replies) as server:
        ran = satchel_run(tmp_path, profile_file(tmp_path, server.base_url), ["lamp-0001"])
    assert ran.code == 0, (ran.stdout, ran.stderr)
    (warning,) = [line for line in ran.errors() if "attempt 1 of step 1 failed" in line]
    assert warning.endswith(
        "attempt 1 of step 1 failed: invalid_answer: the answer names no available action"
    ), warning


@pytest.mark.parametrize("columns", [200, 80, 60])
def test_the_results_name_each_run_folder_whole_on_one_line(tmp_path: Path, columns: int) -> None:
    with lamp_server(*(act(name) for name in LAMP_WIN)) as server:
        profiles = profile_file(tmp_path, server.base_url)
        ran = satchel_run(tmp_path, profiles, ["lamp-0001"], "--offline", columns=columns)
    assert ran.code == 0, (ran.stdout, ran.stderr)
    (folder,) = ran.folders
    assert any(str(folder) in line for line in ran.stdout.splitlines()), ran.stdout
    results = ran.stdout[ran.stdout.index("results") :]
    if columns >= 200:
        assert all(word in results for word in ("exit", "levels", "actions", "score"))
