"""Durability of `satchel serve` on an embedded database: SIGKILL of the whole service (its
process group and its PostgreSQL) loses no acknowledged turn and leaves no gap in the log; a
restart at once comes back every time; SIGTERM stops server, worker and PostgreSQL cleanly."""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from memory_process import (
    Served,
    embedded_url,
    environment,
    handle_pids,
    postgres_of,
    running,
    satchel,
    stop_embedded,
    wait_gone,
)

CLIENTS = 8
PROJECT = "durable"
RESTART_TIMEOUT = 15  # seconds a restart after a crash may take to answer /ready


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-durable-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def started(data_dir: Path, port: int | None = None) -> Served:
    server = Served(data_dir, environment(None), port, own_group=True)
    server.wait_ready(timeout=RESTART_TIMEOUT if port else 120)
    return server


def token_for(data_dir: Path) -> str:
    made = satchel(
        "tokens", "create", "--project", PROJECT, "--data-dir", str(data_dir), env=environment(None)
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


class Observers:
    """`CLIENTS` threads observing turns, each with keys of its own, until the server dies:
    every 201 is kept with the body it answered."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.acknowledged: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.enough = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(CLIENTS)]
        self.failures: list[str] = []

    def start(self, enough: int) -> None:
        self.wanted = enough
        for thread in self.threads:
            thread.start()

    def run(self, number: int) -> None:
        with httpx.Client(base_url=self.base_url, headers=self.headers, timeout=10) as client:
            for count in range(100_000):
                body = {
                    "idempotency_key": str(uuid.uuid4()),
                    "data_subject_id": f"person-{number}",
                    "messages": [{"role": "user", "content": f"client {number} turn {count}"}],
                }
                try:
                    answer = client.post("/v1/observations", json=body)
                except httpx.TransportError:
                    return  # the server is gone: this turn was never acknowledged
                if answer.status_code == 429:
                    continue
                if answer.status_code != 201:
                    self.failures.append(f"{answer.status_code} {answer.text[:200]}")
                    return
                with self.lock:
                    self.acknowledged[body["idempotency_key"]] = (body, answer.json())
                    if len(self.acknowledged) >= self.wanted:
                        self.enough.set()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)


def offsets(data_dir: Path) -> list[int]:
    with psycopg.connect(embedded_url(data_dir)) as conn:
        rows = conn.execute(
            "SELECT o.log_offset FROM observations o JOIN projects p ON p.id = o.project_id"
            " WHERE p.name = %s ORDER BY o.log_offset",
            (PROJECT,),
        ).fetchall()
    return [row[0] for row in rows]


def replay(base_url: str, token: str, observers: Observers) -> None:
    """Every acknowledged turn, sent again with its key, answers its original receipt."""
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}) as client:
        for body, receipt in observers.acknowledged.values():
            again = client.post("/v1/observations", json=body)
            assert again.status_code == 201, again.text
            assert again.json() == receipt


def test_acknowledged_turns_survive_sigkill_of_the_whole_service(data_dir: Path) -> None:
    first = started(data_dir)
    token = token_for(data_dir)
    observers = Observers(first.base_url, token)
    observers.start(enough=150)
    try:
        assert observers.enough.wait(timeout=60), observers.failures
    finally:
        first.kill_everything()
        observers.join()
    assert observers.failures == []
    assert postgres_of(data_dir) == []

    second = started(data_dir, first.port)
    try:
        replay(second.base_url, token, observers)
        log = offsets(data_dir)
        assert log == list(range(len(log)))
        assert len(log) >= len(observers.acknowledged)
        assert {receipt["log_offset"] for _, receipt in observers.acknowledged.values()} <= set(log)
    finally:
        assert second.terminate() == 0
    assert "Traceback" not in second.output()


def test_a_restart_at_once_after_sigkill_of_everything_comes_back_every_time(
    data_dir: Path,
) -> None:
    server = started(data_dir)
    token = token_for(data_dir)
    try:
        for attempt in range(2):
            server.kill_everything()
            server = started(data_dir, server.port)  # at once, as a supervisor would
            assert server.ready() == {"status": "ready", "worker": "running"}, attempt
            headers = {"Authorization": f"Bearer {token}"}
            body = {
                "idempotency_key": str(uuid.uuid4()),
                "messages": [{"role": "user", "content": f"after crash {attempt}"}],
            }
            stored = httpx.post(server.base_url + "/v1/observations", json=body, headers=headers)
            assert stored.status_code == 201
            assert stored.json()["log_offset"] == attempt
            assert "Traceback" not in server.output()
    finally:
        assert server.terminate() == 0


def test_sigterm_stops_server_worker_and_postgres_and_keeps_the_data(data_dir: Path) -> None:
    first = started(data_dir)
    token = token_for(data_dir)
    workers = [first.worker()]
    postgres = postgres_of(data_dir)
    assert postgres
    observers = Observers(first.base_url, token)
    observers.start(enough=20)
    assert observers.enough.wait(timeout=60), observers.failures

    assert first.stop(signal.SIGTERM) == 0
    observers.join()
    wait_gone(workers + postgres)
    assert not running(first.process.pid)
    assert postgres_of(data_dir) == []
    assert handle_pids(data_dir) == []
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
    assert "Traceback" not in first.output()

    second = started(data_dir)
    try:
        replay(second.base_url, token, observers)
        log = offsets(data_dir)
        assert log == list(range(len(log))) and len(log) >= len(observers.acknowledged)
    finally:
        assert second.terminate() == 0
    assert postgres_of(data_dir) == []
