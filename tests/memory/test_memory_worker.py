"""The worker: failures stored and retried with backoff, parking and unpark, the recomputed
watermark, two workers sharing one database, and the worker as a command and beside serve."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from formation_kit import claim, embedder, freshness, observe, passes, rows, with_model
from memory_kit import LiveServer
from memory_process import SATCHEL, Served, environment, satchel, stop_embedded, wait_gone
from model_server import Failure, ModelServer, Reply, text_of
from records_kit import api

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Worker

ANN = "person-ann"


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-worker-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def flaky(body: dict[str, Any]) -> Reply:
    """Fail every turn that says FLAKY; find one fact in the others."""
    text = text_of(body)
    if "FLAKY" in text:
        return Failure(503)
    return {"claims": [claim("I", "uses", "Python", "I use Python")]} if "Python" in text else {}


def state(url: str) -> list[tuple[Any, ...]]:
    return rows(
        url,
        "SELECT log_offset, attempts, last_error, parked_at IS NOT NULL, formed_at IS NOT NULL"
        " FROM observations ORDER BY log_offset",
    )


def test_failures_back_off_then_park_and_unpark_puts_them_back(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    for text in ("I use Python daily.", "FLAKY turn", "I use Python at work too."):
        observe(http, ANN, ("user", text))
    model.respond = flaky
    settings = with_model(MemorySettings(), model)

    [tally] = passes(url, settings, model)
    assert (tally.formed, tally.failed, tally.parked) == (2, 1, 0)
    assert freshness(http) == (2, 0, 0)  # the failed turn holds the watermark
    assert state(url)[1] == (1, 1, "status 503", False, False)

    tallies = passes(url, settings, model, count=5)
    assert [t.failed for t in tallies] == [1] * 5 and tallies[-1].parked == 1
    assert freshness(http) == (2, 2, 1)  # parked: counted, and passed by the watermark
    assert state(url)[1] == (1, 6, "status 503", True, False)
    assert passes(url, settings, model)[0].failed == 0  # parked turns wait for an operator

    env = environment(url)
    result = satchel("formation", "unpark", "--project", "beta", env=env)
    assert result.returncode == 0, result.stderr
    assert freshness(http) == (2, 2, 1)
    result = satchel("formation", "unpark", "--project", "alpha", env=env)
    assert result.returncode == 0, result.stderr
    assert "unparked 1 turn" in result.stdout
    assert freshness(http) == (2, 0, 0)

    model.respond = None
    [tally] = passes(url, settings, model)
    assert tally.formed == 1
    assert freshness(http) == (2, 2, 0)
    assert state(url)[1] == (1, 0, None, False, True)


def test_a_failed_turn_waits_out_its_backoff(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    observe(http, ANN, ("user", "FLAKY"))
    model.respond = flaky
    settings = with_model(MemorySettings(), model, formation_backoff=600.0)
    tallies = passes(url, settings, model, count=3)
    assert [t.failed for t in tallies] == [1, 0, 0]
    assert len(model.requests) == 1
    [(waits,)] = rows(
        url,
        "SELECT next_attempt_at - now() > interval '500 seconds' FROM observations",
    )
    assert waits


def test_two_workers_form_each_turn_exactly_once(
    live_server: LiveServer, model: ModelServer
) -> None:
    url = live_server.database_url
    projects = ("alpha", "beta", "gamma")
    for project in projects:
        with api(live_server, project) as client:
            for number in range(10):
                observe(client, ANN, ("user", f"{project} turn {number}: I use Python."))
    settings = with_model(MemorySettings(), model, formation_batch=4)

    def whole_turn(body: dict[str, Any]) -> Reply:
        said = body["messages"][1]["content"].split(":\n", 1)[1]
        return {"claims": [claim("I", "uses", said, said)]}

    model.respond = whole_turn

    async def drain(worker: Worker) -> int:
        formed = 0
        try:
            while True:
                tally = await worker.run_once()
                formed += tally.formed
                if tally.work == 0 and not tally.busy:
                    return formed
                await asyncio.sleep(0)
        finally:
            await worker.close()

    async def both() -> list[int]:
        workers = [Worker(url, settings, embedder=embedder(model)) for _ in range(2)]
        return list(await asyncio.gather(*(drain(worker) for worker in workers)))

    counts = asyncio.run(both())
    assert sum(counts) == 30
    asked = Counter(body["messages"][1]["content"] for body in model.requests)
    assert len(asked) == 30 and set(asked.values()) == {1}
    per_turn = rows(
        url,
        "SELECT o.id, count(f.id) FROM observations o LEFT JOIN facts f"
        " ON f.source_observation_id = o.id GROUP BY o.id",
    )
    assert len(per_turn) == 30 and {count for _, count in per_turn} == {1}
    for project in projects:
        with api(live_server, project) as client:
            assert freshness(client) == (9, 9, 0)


def wait_formed(client: httpx.Client, offset: int, process: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "the worker exited"
        if freshness(client)[1] == offset:
            return
        time.sleep(0.1)
    raise AssertionError("the turn was not formed")


def test_satchel_worker_forms_turns_until_interrupted(
    live_server: LiveServer, http: httpx.Client, model: ModelServer, data_dir: Path
) -> None:
    env = environment(live_server.database_url)
    env |= {
        "SATCHEL_FORMATION_MODEL": "scripted",
        "SATCHEL_FORMATION_BASE_URL": model.base_url,
        "SATCHEL_EMBEDDINGS_BASE_URL": model.base_url,
        "SATCHEL_EMBEDDINGS_MODEL": "scripted-embedder",
    }
    model.respond = flaky
    observe(http, ANN, ("user", "I use Python."))
    log = data_dir.parent / "worker.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(SATCHEL), "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_formed(http, 0, process)
        observe(http, ANN, ("user", "I use Python here too."))
        wait_formed(http, 1, process)
    finally:
        process.send_signal(signal.SIGINT)
        status = process.wait(timeout=60)
    assert status == 0, log.read_text()
    assert "Traceback" not in log.read_text()
    assert rows(live_server.database_url, "SELECT count(*) FROM facts") == [(1,)]

    refused = satchel(
        "worker",
        env={**env, "SATCHEL_FORMATION_BASE_URL": "https://models.example.com/v1"},
    )
    assert refused.returncode == 2
    assert "models.example.com" in refused.stdout + refused.stderr


def test_serve_forms_turns_in_its_worker_process(live_server: LiveServer, data_dir: Path) -> None:
    env = environment(live_server.database_url)
    server = Served(data_dir, env)
    try:
        server.wait_ready()
        worker = server.worker()
        with api(live_server) as client:
            client.base_url = httpx.URL(server.base_url)
            observe(client, ANN, ("user", "I live in Cork."))
            wait_formed(client, 0, server.process)
    finally:
        status = server.interrupt()
    assert status == 0
    wait_gone([worker])
    assert "Traceback" not in server.output()
