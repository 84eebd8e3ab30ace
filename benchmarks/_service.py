"""Start `satchel serve` over a database on a loopback port, for the benchmarks that need it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Served:
    """A running `satchel serve`: its loopback port and its process id."""

    port: int
    pid: int


@contextmanager
def service(url: str, folder: Path) -> Iterator[Served]:
    """`satchel serve` over `url` on a loopback port, until the block ends."""
    port = free_port()
    env = {**os.environ, "SATCHEL_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
    log = folder / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "satchel", "serve", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while not ready(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"satchel serve did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield Served(port, process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ready(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/ready")
        return connection.getresponse().status == 200
    except OSError:
        return False


class Client:
    """One keep-alive connection with a bearer token."""

    def __init__(self, port: int, token: str, timeout: float = 60) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, Any], expect: int = 200) -> dict[str, Any]:
        self.connection.request("POST", path, json.dumps(body).encode(), self.headers)
        answer = self.connection.getresponse()
        data = answer.read()
        if answer.status != expect:
            raise RuntimeError(f"{path} answered {answer.status}: {data[:300]!r}")
        parsed: dict[str, Any] = json.loads(data)
        return parsed

    def timed(self, path: str, body: dict[str, Any], expect: int = 200) -> float:
        """Milliseconds from sending the request to reading the whole answer."""
        start = time.perf_counter()
        self.post(path, body, expect)
        return (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self.connection.close()


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass(slots=True)
class Spent:
    """CPU seconds spent while a block ran: by the service process (its threads, the question
    embeddings among them), its worker process, PostgreSQL (every process of the server) and
    this process (the clients); and the share of the machine's cores that were busy."""

    service: float = 0.0
    worker: float = 0.0
    database: float = 0.0
    client: float = 0.0
    busy: float = 0.0

    def per(self, count: int) -> str:
        """Each part's milliseconds per one of `count` requests, and how busy the cores were."""
        parts = [
            ("service", self.service),
            ("worker", self.worker),
            ("PostgreSQL", self.database),
            ("clients", self.client),
        ]
        shown = ", ".join(f"{name} {seconds / count * 1000:.2f}" for name, seconds in parts)
        cores = psutil.cpu_count() or 1
        return f"ms of CPU a request: {shown}; the {cores} cores {self.busy:.0%} busy"

    def total(self) -> float:
        return self.service + self.worker + self.database + self.client


def _cpu(processes: list[psutil.Process]) -> dict[int, float]:
    used = {}
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        used[process.pid] = times.user + times.system
    return used


def _grown(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the processes alive at the end spent since the start (a newer one: all)."""
    return sum(spent - before.get(pid, 0.0) for pid, spent in after.items())


@contextmanager
def cpu_spent(served: Served, pgdata: Path) -> Iterator[Spent]:
    """What the service, its worker, PostgreSQL (the postmaster of `pgdata` and its children)
    and this process spend while the block runs; filled in when it ends."""
    server = psutil.Process(served.pid)
    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    me = psutil.Process()

    def groups() -> tuple[dict[int, float], ...]:
        return (
            _cpu([server]),
            _cpu(server.children(recursive=True)),
            _cpu([postmaster, *postmaster.children(recursive=True)]),
            _cpu([me]),
        )

    spent = Spent()
    machine = psutil.cpu_times()
    before = groups()
    yield spent
    after = groups()
    ended = psutil.cpu_times()
    spent.service, spent.worker, spent.database, spent.client = (
        _grown(b, a) for b, a in zip(before, after, strict=True)
    )
    idle = _idle(ended) - _idle(machine)
    whole = _whole(ended) - _whole(machine)
    spent.busy = 1 - idle / whole if whole > 0 else 0.0


def worker_quiet(served: Served, timeout: float, window: float = 3.0, share: float = 0.05) -> float:
    """Seconds until the service's worker went quiet: using less than `share` of a core over
    `window` seconds (the time returned is when that window began)."""
    server = psutil.Process(served.pid)
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        before = _cpu(server.children(recursive=True))
        time.sleep(window)
        used = _grown(before, _cpu(server.children(recursive=True)))
        if used < share * (time.perf_counter() - start):
            return start - began
        if time.perf_counter() - began > timeout:
            raise RuntimeError(f"the worker was still busy after {timeout:g} s")


def _idle(times: Any) -> float:
    return float(times.idle + getattr(times, "iowait", 0.0))


def _whole(times: Any) -> float:
    """All the cores' time: on Linux a guest's time is counted in user time already."""
    fields = times._asdict()
    return float(sum(fields.values()) - fields.get("guest", 0.0) - fields.get("guest_nice", 0.0))
