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
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def service(url: str, folder: Path) -> Iterator[int]:
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
        yield port
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
