"""`satchel run --memory` against a real deployment (`satchel serve` on embedded PostgreSQL): a
lesson the model writes when a game ends is stored, recalled when the next game starts, and
read by the model; a deployment that cannot answer never ends a game."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from harness.test_run import KEY_ENV, LAMP, act, meta, profile_file
from satchel.cli import app
from satchel.conformance.deployment import Deployment
from satchel.harness.lessons import LESSON_PROMPT
from satchel.harness.memory_games import TOKEN_ENV, lesson_messages, subject_of
from satchel.harness.play import GameResult
from satchel.harness.script import winning_script
from satchel.harness.scripted import ScriptedModelServer
from satchel.memory.client import MemoryClient
from satchel.memory.message import MEMORY_MESSAGE_PREFIX

GAMES = ("lamp-0001", "tapx-0001")
HINT = "tap each yellow square once and never the black field"
LESSON = f"Lesson for every game: {HINT}."
ENDING = ("game_id", "exit_reason", "levels_completed", "win_levels", "actions", "steps", "score")
MISS = act("ACTION6", x=63, y=63)  # the black field: a miss, not yet a loss


def script() -> dict[str, list[Any]]:
    """A model that writes `LESSON` when asked for one, wins tapx at once when the lesson is in
    its request, and misses twice first otherwise; lamp is won the same way either time."""
    taps = [{"text": reply.text} for reply in winning_script(["tapx-0001"])["tapx-0001"]]
    return {
        LESSON_PROMPT[:40]: [LESSON] * 4,
        HINT: taps,
        "lamp-0001": [act(name) for name in LAMP],
        "tapx-0001": [MISS, MISS, *taps],
    }


def profiles(folder: Path, url: str, config: str) -> Path:
    """The scripted open-weight profile under the id `config` (a subject of its own)."""
    path = profile_file(folder, url)
    (entry,) = yaml.safe_load(path.read_text("utf-8"))
    path.write_text(yaml.safe_dump([entry | {"id": config}]), encoding="utf-8")
    return path


def run(folder: Path, config: str, *extra: str, env: Mapping[str, str | None]) -> Result:
    args = ["run", "--config", config, "--profiles", str(folder / "profiles.yaml"), "--offline"]
    args += [arg for game in GAMES for arg in ("--game", game)]
    args += ["--runs-dir", str(folder / "runs"), *extra]
    return CliRunner().invoke(app, args, env={KEY_ENV: "sk-canary-key-0000", **env})


def run_metas(folder: Path) -> dict[str, dict[str, Any]]:
    return {
        path.name.split(".")[0]: meta(path)
        for path in (folder / "runs").glob("*.*")
        if path.is_dir()
    }


def played(
    folder: Path, config: str, *extra: str, env: Mapping[str, str | None]
) -> tuple[Result, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    folder.mkdir()
    with ScriptedModelServer(script()) as server:
        profiles(folder, server.base_url, config)
        result = run(folder, config, *extra, env=env)
        requests = server.requests
    return result, run_metas(folder), requests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_lesson_from_the_first_game_wins_the_second_in_fewer_actions(
    tmp_path: Path, deployment: Deployment
) -> None:
    config = "lessons-open-weight"
    without, plain, _ = played(tmp_path / "plain", config, env={TOKEN_ENV: None})
    memory = ("--memory", deployment.api)
    token = {TOKEN_ENV: deployment.token}
    result, remembered, requests = played(tmp_path / "memory", config, *memory, env=token)
    assert without.exit_code == 0 and result.exit_code == 0, result.output
    assert {game: run["exit_reason"] for game, run in remembered.items()} == dict.fromkeys(
        GAMES, "WIN"
    )
    assert remembered["tapx-0001"]["actions"] == 5 < plain["tapx-0001"]["actions"] == 7
    assert remembered["lamp-0001"]["actions"] == plain["lamp-0001"]["actions"]

    first, second = (remembered[game]["memory"] for game in GAMES)
    subject = subject_of(config)
    assert first["subject"] == second["subject"] == subject
    assert first["recall"]["message"] is None  # nothing stored yet
    assert "tapx-0001" in second["recall"]["question"]
    assert second["recall"]["message"].startswith(MEMORY_MESSAGE_PREFIX)
    assert LESSON in second["recall"]["message"]
    assert first["lesson"]["text"] == LESSON and first["stored"]["receipt"]["id"]
    assert first["stored"]["idempotency_key"] != second["stored"]["idempotency_key"]

    # The memory message is the first request's, after the instructions and before the frame.
    opening = next(body for body in requests if "Game: tapx-0001" in json.dumps(body))
    roles = [message["role"] for message in opening["messages"]]
    assert roles == ["system", "user", "user"]
    assert opening["messages"][1]["content"] == second["recall"]["message"]
    assert "Game: tapx-0001" in opening["messages"][2]["content"]

    # Each lesson request is recorded like a compaction and billed once into the run's total.
    for game in GAMES:
        run_dir = next((tmp_path / "memory" / "runs").glob(f"{game}.*"))
        record = json.loads((run_dir / "lesson.json").read_text("utf-8"))
        assert record["text"] == LESSON and record["attempts"] == 1
        steps = [json.loads(p.read_text("utf-8")) for p in sorted(run_dir.glob("step_*.json"))]
        spent = sum(step["usage"]["requests"] for step in steps)
        run = remembered[game]
        assert run["total_usage"]["requests"] == spent + record["usage"]["requests"] == spent + 1
        assert deployment.token not in json.dumps(run) + json.dumps(record)
    assert deployment.token not in result.output

    # The lessons really are in the deployment, under the config's subject: recall finds stored
    # messages by their words at once (turns are formed into facts only by a worker).
    with MemoryClient(deployment.api, deployment.token) as client:
        recall = client.recall(
            question="lessons for every game", data_subject_id=subject, source_roles=["assistant"]
        )
        # An observe sent again (a retry) with the recorded key is the turn already stored.
        lamp = remembered["lamp-0001"]
        ended = GameResult(*(lamp[name] for name in ENDING))
        again = client.observe(
            messages=lesson_messages(ended, LESSON),
            idempotency_key=first["stored"]["idempotency_key"],
            data_subject_id=subject,
        )
    lessons = {passage["source_id"]: passage["quote"] for passage in recall["passages"]}
    receipts = {remembered[game]["memory"]["stored"]["receipt"]["id"] for game in GAMES}
    assert lessons == dict.fromkeys(receipts, LESSON)
    assert again["id"] == first["stored"]["receipt"]["id"]


def test_without_memory_the_requests_carry_nothing_of_it(tmp_path: Path) -> None:
    result, runs, requests = played(tmp_path / "plain", "plain-open-weight", env={})
    assert result.exit_code == 0, result.output
    assert len(requests) == sum(run["steps"] for run in runs.values())  # no lesson request
    for body in requests:
        text = json.dumps(body)
        assert MEMORY_MESSAGE_PREFIX not in text and LESSON_PROMPT[:40] not in text
    firsts = [body for body in requests if len(body["messages"]) == 2]
    assert [[m["role"] for m in body["messages"]] for body in firsts] == [["system", "user"]] * 2
    assert all("memory" not in run for run in runs.values())
    assert not list((tmp_path / "plain" / "runs").glob("*/lesson.json"))


def test_memory_without_its_token_is_refused_naming_the_variable(tmp_path: Path) -> None:
    tmp_path.joinpath("runs").mkdir()
    profiles(tmp_path, "http://127.0.0.1:9/v1", "refused-open-weight")
    result = run(
        tmp_path,
        "refused-open-weight",
        "--memory",
        "http://127.0.0.1:9",
        env={TOKEN_ENV: None},
    )
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert TOKEN_ENV in line and "--memory" in line
    assert not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("down", ["unreachable", "wrong token"])
def test_a_deployment_that_cannot_answer_never_ends_a_game(
    tmp_path: Path, deployment: Deployment, down: str
) -> None:
    url = f"http://127.0.0.1:{free_port()}" if down == "unreachable" else deployment.api
    token = "not-a-token-canary" if down == "wrong token" else deployment.token
    result, runs, _ = played(
        tmp_path / "down", "down-open-weight", "--memory", url, env={TOKEN_ENV: token}
    )
    assert result.exit_code == 1, result.output
    for game in GAMES:
        run = runs[game]
        assert run["exit_reason"] == "WIN"
        assert run["memory"]["recall"]["message"] is None
        assert run["memory"]["recall"]["error"]
        assert run["memory"]["lesson"]["text"] == LESSON
        assert run["memory"]["stored"]["error"] and run["memory"]["stored"]["receipt"] is None
        assert token not in json.dumps(run)
        assert f"{game}: the lesson was not stored in memory" in result.output
    assert tapx_actions(runs) == 7  # played as if without memory
    assert token not in result.output


def tapx_actions(runs: dict[str, dict[str, Any]]) -> int:
    actions: int = runs["tapx-0001"]["actions"]
    return actions


@pytest.mark.parametrize(
    ("config", "adapter", "key"),
    [
        ("claude-opus-5-messages-native", "anthropic.messages.v1", "ANTHROPIC_API_KEY"),
        ("gpt-5-mini-chat-rolling", "openai.chat_completions.v1", "OPENAI_API_KEY"),
    ],
)
def test_memory_with_an_adapter_that_cannot_write_a_lesson_is_refused(
    tmp_path: Path, config: str, adapter: str, key: str
) -> None:
    args = ["run", "--config", config, "--game", "lamp-0001", "--offline"]
    args += ["--runs-dir", str(tmp_path / "runs"), "--memory", "http://127.0.0.1:9"]
    result = CliRunner().invoke(app, args, env={key: "sk-canary", TOKEN_ENV: "tsk-canary"})
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert adapter in line and "--memory" in line and config in line
    assert not (tmp_path / "runs").exists()


def test_a_lesson_request_the_model_refuses_is_recorded_and_nothing_is_stored(
    tmp_path: Path, deployment: Deployment
) -> None:
    refusing = script() | {LESSON_PROMPT[:40]: [{"status": 400, "error_message": "no lessons"}]}
    folder = tmp_path / "refusing"
    folder.mkdir()
    with ScriptedModelServer(refusing) as server:
        profiles(folder, server.base_url, "refusing-open-weight")
        args = ["run", "--config", "refusing-open-weight", "--game", "lamp-0001", "--offline"]
        args += ["--profiles", str(folder / "profiles.yaml"), "--runs-dir", str(folder / "runs")]
        args += ["--memory", deployment.api]
        env = {KEY_ENV: "sk-canary-key-0000", TOKEN_ENV: deployment.token}
        result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output  # the game's result is the run's
    run = run_metas(folder)["lamp-0001"]
    assert run["exit_reason"] == "WIN"
    assert run["memory"]["lesson"]["text"] is None and run["memory"]["stored"] is None
    record = json.loads(next((folder / "runs").glob("lamp-0001.*/lesson.json")).read_text())
    assert record["text"] is None and record["attempts"] == 1
    assert record["failures"][0]["kind"] == "FatalAttemptError"
    assert "lamp-0001: the model wrote no lesson" in result.output
