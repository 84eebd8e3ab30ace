"""`satchel serve` as the process a service manager runs: it announces its address only once it
listens, refuses a busy port at once, runs its worker as a supervised child process at the lowest
priority that is restarted when it dies and never outlives the server, reports the worker on
`/ready`, and writes one access line per request."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from memory_kit import LiveServer, free_port
from memory_process import (
    Served,
    embedded_postmaster,
    environment,
    postgres_of,
    running,
    satchel,
    stop_embedded,
    wait_gone,
)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-life-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def until[T](check: Callable[[], T], timeout: float = 30, every: float = 0.02) -> T:
    """Poll `check()` until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(every)
    return value


def test_serving_on_is_printed_only_once_it_listens(
    live_server: LiveServer, data_dir: Path
) -> None:
    server = Served(data_dir, environment(live_server.database_url))
    try:
        until(lambda: "serving on" in server.output() or server.process.poll() is not None)
        assert server.process.poll() is None, server.output()
        with httpx.Client(base_url=server.base_url) as client:  # no retry: it listens already
            assert client.get("/health").status_code == 200
    finally:
        assert server.terminate() == 0
    assert "Traceback" not in server.output()


def test_a_port_in_use_fails_at_once_naming_it_and_starts_nothing(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = satchel(
            "serve", "--port", str(port), "--data-dir", str(data_dir), env=environment(None)
        )
    assert result.returncode == 1
    assert "serving on" not in result.stdout
    [line] = result.stderr.strip().splitlines()
    assert f"port {port} on 127.0.0.1 is already in use" in line
    assert "Traceback" not in result.stdout + result.stderr
    assert postgres_of(data_dir) == []
    assert not (data_dir / "pgdata").exists()  # no database was started for it


def test_the_worker_is_a_supervised_child_at_the_lowest_priority(
    live_server: LiveServer, data_dir: Path
) -> None:
    server = Served(data_dir, environment(live_server.database_url))
    try:
        server.wait_ready()
        assert server.ready() == {"status": "ready", "worker": "running"}
        first = server.worker()
        child = psutil.Process(first)
        assert child.nice() == 19
        environ = child.environ()
        assert environ["OPENBLAS_NUM_THREADS"] == "1" and environ["OMP_NUM_THREADS"] == "1"
        assert environ["SATCHEL_DATABASE_URL"] == live_server.database_url

        child.kill()
        until(lambda: (server.ready() or {}).get("worker") == "stopped")
        second = server.worker(other_than=first)
        until(lambda: (server.ready() or {}).get("worker") == "running")
        assert re.search(r"formation worker exited \(signal 9\); restarting it", server.output())
    finally:
        assert server.terminate() == 0
    wait_gone([first, second])
    assert "Traceback" not in server.output()


def test_a_server_killed_outright_leaves_no_worker_behind(
    live_server: LiveServer, data_dir: Path
) -> None:
    server = Served(data_dir, environment(live_server.database_url))
    server.wait_ready()
    worker = server.worker()
    server.kill()
    wait_gone([worker], timeout=15)
    assert "the server (pid" in server.output()


def test_role_api_runs_no_worker(live_server: LiveServer, data_dir: Path) -> None:
    server = Served(data_dir, environment(live_server.database_url), None, "--role", "api")
    try:
        server.wait_ready()
        assert server.ready() == {"status": "ready", "worker": "off"}
        assert server.workers() == []
    finally:
        assert server.terminate() == 0


ACCESS = re.compile(
    r"^\S+Z INFO satchel\.memory\.access method=(?P<method>[A-Z]+) route=(?P<route>\S+) "
    r"status=(?P<status>\d+) duration_ms=(?P<ms>\d+\.\d\d) request_id=(?P<id>\S+)$",
    re.MULTILINE,
)


def test_one_access_line_per_request_never_with_a_secret(
    live_server: LiveServer, data_dir: Path
) -> None:
    token = live_server.token("alpha")
    secret = f"my secret {uuid.uuid4()}"
    server = Served(data_dir, environment(live_server.database_url))
    try:
        server.wait_ready()
        with httpx.Client(base_url=server.base_url) as client:
            given = client.get("/health", headers={"X-Request-Id": "trace-42.a:b"})
            body = {
                "idempotency_key": str(uuid.uuid4()),
                "messages": [{"role": "user", "content": secret}],
            }
            stored = client.post(
                "/v1/observations", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            queried = client.get(
                "/v1/freshness?api_key=QUERYSECRET", headers={"Authorization": f"Bearer {token}"}
            )
            lost = client.get("/v1/nothing?x=QUERYSECRET", headers={"X-Request-Id": "bad id!"})
        assert given.headers["x-request-id"] == "trace-42.a:b"
        assert stored.status_code == 201
        assert re.fullmatch(r"[0-9a-f]{32}", lost.headers["x-request-id"])
        answers = [given, stored, queried, lost]
    finally:
        assert server.terminate() == 0
    output = server.output()
    lines = [m.groupdict() for m in ACCESS.finditer(output) if m["route"] != "/ready"]
    expected = [
        ("GET", "/health", 200),
        ("POST", "/v1/observations", 201),
        ("GET", "/v1/freshness", 200),
        ("GET", "/v1/nothing", 404),
    ]
    seen = [(line["method"], line["route"], int(line["status"])) for line in lines]
    assert seen == expected
    assert [line["id"] for line in lines] == [a.headers["x-request-id"] for a in answers]
    for leak in (token, token[12:], secret, "QUERYSECRET", "bad id"):
        assert leak not in output


def test_the_access_log_can_be_turned_off(live_server: LiveServer, data_dir: Path) -> None:
    env = environment(live_server.database_url) | {"SATCHEL_ACCESS_LOG": "0"}
    quiet = Served(data_dir, env)
    flagged = Served(data_dir, environment(live_server.database_url), None, "--no-access-log")
    try:
        for server in (quiet, flagged):
            server.wait_ready()
            answer = httpx.get(server.base_url + "/health")
            assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["x-request-id"])
    finally:
        statuses = [server.stop(signal.SIGTERM) for server in (quiet, flagged)]
    assert statuses == [0, 0]
    for server in (quiet, flagged):
        assert "satchel.memory.access" not in server.output()
        assert running(server.process.pid) is False


def test_a_second_server_on_the_same_port_is_refused(
    live_server: LiveServer, data_dir: Path
) -> None:
    port = free_port()
    first = Served(data_dir, environment(live_server.database_url), port)
    try:
        first.wait_ready()
        second = satchel(
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            env=environment(live_server.database_url),
        )
        assert second.returncode == 1
        assert f"port {port} on 127.0.0.1 is already in use" in second.stderr
        assert first.ready() is not None  # the first one serves on
    finally:
        assert first.terminate() == 0


def test_servers_sharing_a_data_dir_never_stop_each_others_postgres(data_dir: Path) -> None:
    env = environment(None)
    first = Served(data_dir, env)
    servers = [first]
    try:
        first.wait_ready()
        postmaster = embedded_postmaster(data_dir)
        assert postmaster is not None
        crashed = Served(data_dir, env)
        servers.append(crashed)
        crashed.wait_ready()
        crashed.kill()  # died attached: its handle is stale, the server is not
        again = Served(data_dir, env)
        servers.append(again)
        again.wait_ready()  # attached to the live server, not restarted
        assert "cleared the lock file" not in again.output()
        assert again.terminate() == 0
        assert first.ready() is not None  # the first one still has its database
        assert embedded_postmaster(data_dir) == postmaster
    finally:
        for server in reversed(servers):
            server.terminate()
    assert postgres_of(data_dir) == []  # the last one out stopped it
