"""What an operator reads and does: `/ready` requiring a recent worker heartbeat, `satchel health`,
`satchel formation parked` (metadata, never content) and `satchel formation unpark --id`."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from formation_kit import embedder, observe, passes, rows, with_model
from memory_kit import LiveServer
from memory_process import environment, satchel
from model_server import Failure, ModelServer, Reply, text_of

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Worker

SUBJECT = "person-kx42-operator"
SECRET = "FLAKY my passport number is 5512"


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False, require_worker=30.0)


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        server.respond = flaky
        yield server


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        yield client


def flaky(body: dict[str, Any]) -> Reply:
    return Failure(503) if "FLAKY" in text_of(body) else {"claims": []}


class RunningWorker:
    """A worker running its passes in a thread of its own until stopped."""

    def __init__(self, url: str, settings: MemorySettings, model: ModelServer) -> None:
        self.worker = Worker(url, settings, embedder=embedder(model))
        self.loop = asyncio.new_event_loop()
        self.stop_event = asyncio.Event()
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self.worker.run(self.stop_event),)
        )

    def __enter__(self) -> RunningWorker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(timeout=30)
        self.loop.close()


def ready(server: LiveServer) -> httpx.Response:
    return httpx.get(server.base_url + "/ready", timeout=10)


def test_ready_requires_a_recent_worker_heartbeat(
    live_server: LiveServer, model: ModelServer
) -> None:
    unready = ready(live_server)
    assert unready.status_code == 503
    assert unready.json()["status"] == "unavailable"
    assert "SATCHEL_REQUIRE_WORKER" in unready.json()["reason"]
    assert "30 s" in unready.json()["reason"]
    settings = with_model(MemorySettings(), model)
    with RunningWorker(live_server.database_url, settings, model):
        answers = []
        for _ in range(200):
            answers.append(ready(live_server).status_code)
            if answers[-1] == 200:
                break
            threading.Event().wait(0.05)
        assert answers[-1] == 200, answers
        assert ready(live_server).json() == {"status": "ready", "worker": "off"}
    assert ready(live_server).status_code == 503  # a worker that stopped is not running


def health(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = satchel("health", "--json", *args, env=environment(url), timeout=60)
    assert result.returncode in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return result.returncode, report


def parked_ids(url: str, *args: str) -> list[str]:
    result = satchel("formation", "parked", "--json", *args, env=environment(url))
    assert result.returncode == 0, result.stderr
    return [json.loads(line)["id"] for line in result.stdout.splitlines()]


def test_health_reports_stored_formed_parked_and_workers(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    status, report = health(url)
    assert (status, report["healthy"], report["stored"], report["workers"]) == (0, True, 0, [])
    for text in ("I like plums.", SECRET, "I like pears."):
        observe(http, SUBJECT, ("user", text))
    settings = with_model(MemorySettings(), model, formation_attempts=1)
    passes(url, settings, model)

    status, report = health(url)
    assert status == 1 and report["healthy"] is False
    assert (report["stored"], report["formed"], report["pending"], report["parked"]) == (3, 2, 0, 1)
    assert [p["code"] for p in report["problems"]] == ["parked"]
    [worker] = report["workers"]
    assert (worker["formed"], worker["failed"], worker["embedded"]) == (
        2,
        1,
        3,
    )  # parked: embedded too
    assert worker["stopped_at"] is not None and worker["pid"] > 0
    assert report["last_failure"] == "model" and report["last_failure_at"]
    assert report["connections"]["in_use"] >= 1 and report["connections"]["max"] > 0
    [alpha] = report["projects"]
    assert (alpha["project"], alpha["stored"], alpha["formed"], alpha["parked"]) == (
        "alpha",
        3,
        2,
        1,
    )

    observe(http, SUBJECT, ("user", "I like figs."))
    status, report = health(url)
    assert report["pending"] == 1 and report["oldest_pending_age_seconds"] >= 0
    assert [p["code"] for p in report["problems"]] == ["no_worker", "parked"]
    text = satchel("health", env=environment(url))
    assert text.returncode == 1
    assert "problem no_worker" in text.stdout and "alpha" in text.stdout
    for output in (json.dumps(report), text.stdout):
        assert SUBJECT not in output and "passport" not in output


def test_parked_turns_are_listed_without_content_and_unparked_one_by_id(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    for n in range(2):
        observe(http, SUBJECT, ("user", f"{SECRET} ({n})"))
    observe(http, SUBJECT, ("user", "I like plums."))
    passes(url, with_model(MemorySettings(), model, formation_attempts=1), model)

    listing = satchel("formation", "parked", "--json", env=environment(url))
    assert listing.returncode == 0, listing.stderr
    turns = [json.loads(line) for line in listing.stdout.splitlines()]
    assert len(turns) == 2
    assert set(turns[0]) == {
        "id",
        "project",
        "kind",
        "log_offset",
        "attempts",
        "stored_at",
        "parked_at",
        "failure",
    }
    assert {(t["project"], t["failure"], t["attempts"]) for t in turns} == {
        ("alpha", "status 503", 1)
    }
    table = satchel("formation", "parked", env=environment(url))
    assert turns[0]["id"] in table.stdout
    for output in (listing.stdout, table.stdout):
        assert SUBJECT not in output and "passport" not in output
    assert parked_ids(url, "--project", "beta") == []

    first = turns[0]["id"]
    done = satchel("formation", "unpark", "--id", first, env=environment(url))
    assert done.returncode == 0, done.stderr
    assert "unparked 1 turn" in done.stdout
    assert parked_ids(url) == [turns[1]["id"]]
    [(parked, attempts)] = rows(
        url, "SELECT parked_at, attempts FROM observations WHERE id = %s", uuid.UUID(first)
    )
    assert (parked, attempts) == (None, 0)

    again = satchel("formation", "unpark", "--id", first, env=environment(url))
    assert again.returncode == 1 and first in again.stderr
    bad = satchel("formation", "unpark", "--id", "not-an-id", env=environment(url))
    assert bad.returncode == 2 and "'not-an-id'" in bad.stderr
    both = satchel("formation", "unpark", "--id", first, "--project", "alpha", env=environment(url))
    assert both.returncode == 2
    assert parked_ids(url) == [turns[1]["id"]]
