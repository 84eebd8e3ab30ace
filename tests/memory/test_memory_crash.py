"""Crash safety: SIGKILL `satchel serve` while clients stream observations; after a restart on the
same data every observation answered 201 is there and the log has no gaps."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from memory_process import Served, embedded_url, environment, satchel, stop_embedded

CLIENTS = 4


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-crash-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


class Stream:
    """Client threads observing turns with idempotency keys until told to stop.

    A turn answered 201 is recorded with its receipt; a turn whose answer was lost (the server
    died) is retried with the same key and content until some server answers it.
    """

    def __init__(self, token: str) -> None:
        self.token = token
        self.base_url = ""
        self.answered: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (content, receipt)
        self.lost = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(n,)) for n in range(CLIENTS)]

    def point_at(self, base_url: str) -> None:
        self.base_url = base_url

    def run(self, number: int) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        pending: tuple[str, str] | None = None
        count = 0
        while not self.stopping.is_set() or pending is not None:
            if pending is None:
                count += 1
                pending = (str(uuid.uuid4()), f"client {number} turn {count}")
            key, content = pending
            body = {
                "idempotency_key": key,
                "data_subject_id": f"person-{number}",
                "messages": [{"role": "user", "content": content}],
            }
            try:
                with httpx.Client(base_url=self.base_url, headers=headers, timeout=10) as client:
                    answer = client.post("/v1/observations", json=body)
            except httpx.TransportError:
                with self.lock:
                    self.lost += 1
                time.sleep(0.05)
                continue
            if answer.status_code == 429:
                time.sleep(0.01)
                continue
            assert answer.status_code == 201, answer.text
            with self.lock:
                self.answered[key] = (content, answer.json())
            pending = None

    def wait_for(self, total: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.answered) < total:
            assert time.monotonic() < deadline, f"only {len(self.answered)} turns answered"
            assert all(t.is_alive() for t in self.threads), "a client thread failed"
            time.sleep(0.02)


def check_log(url: str, stream: Stream) -> None:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT o.id, o.log_offset, m.content FROM observations o"
            " JOIN messages m ON m.observation_id = o.id ORDER BY o.log_offset"
        ).fetchall()
        stored = conn.execute("SELECT stored FROM projects WHERE name = 'crash'").fetchone()
    by_id = {str(row[0]): (row[1], row[2]) for row in rows}
    for content, receipt in stream.answered.values():
        assert by_id[receipt["id"]] == (receipt["log_offset"], content)
    assert [row[1] for row in rows] == list(range(len(rows)))
    assert stored == (len(rows) - 1,)
    assert len({row[2] for row in rows}) == len(rows)  # no turn stored twice


def crash_and_restart(data_dir: Path, env: dict[str, str]) -> None:
    first = Served(data_dir, env)
    servers = [first]
    try:
        first.wait_ready()
        created = satchel(
            "tokens", "create", "--data-dir", str(data_dir), "--project", "crash", env=env
        )
        assert created.returncode == 0, created.stderr
        stream = Stream(created.stdout.strip())
        stream.point_at(first.base_url)
        for thread in stream.threads:
            thread.start()
        try:
            stream.wait_for(60)
            first.kill()
            lost_before = stream.lost
            answered_before = len(stream.answered)
            time.sleep(0.3)  # clients keep trying against the dead server
            second = Served(data_dir, env, port=first.port)
            servers.append(second)
            second.wait_ready()
            stream.wait_for(answered_before + 60)
        finally:
            stream.stopping.set()
            for thread in stream.threads:
                thread.join(timeout=120)
        assert stream.lost > lost_before  # the kill did cut requests off
        with httpx.Client(
            base_url=second.base_url, headers={"Authorization": f"Bearer {stream.token}"}
        ) as client:
            deadline = time.monotonic() + 60  # the in-process worker forms what was stored
            freshness = client.get("/v1/freshness").json()
            while freshness["formed"] != freshness["stored"] and time.monotonic() < deadline:
                time.sleep(0.1)
                freshness = client.get("/v1/freshness").json()
        assert freshness["stored"] == freshness["formed"]
        check_log(env.get("SATCHEL_DATABASE_URL") or embedded_url(data_dir), stream)
        assert second.interrupt() in (0, 130)  # Ctrl-C: a clean stop, status 130 or 0
        assert "Traceback" not in second.output()
    finally:
        for server in servers:
            if server.process.poll() is None:
                server.kill()


def test_sigkill_of_serve_with_a_database_url_loses_no_answered_turn(
    db_url: str, data_dir: Path
) -> None:
    crash_and_restart(data_dir, environment(db_url))


def test_sigkill_of_serve_with_the_embedded_database_loses_no_answered_turn(
    data_dir: Path,
) -> None:
    crash_and_restart(data_dir, environment(None))
