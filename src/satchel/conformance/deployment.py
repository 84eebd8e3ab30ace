"""A deployment of our own for a suite run: `satchel serve` on a loopback port and a fresh token.

It goes through the public entry point (the `satchel` command), exactly as an operator would.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PROJECT = "conformance"


@dataclass(frozen=True)
class Deployment:
    api: str
    token: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/ready")
        return connection.getresponse().status == 200
    except OSError:
        return False


def _satchel(*args: str) -> list[str]:
    return [sys.executable, "-m", "satchel", *args]


@contextmanager
def started(folder: Path | None = None, *, timeout: float = 90.0) -> Iterator[Deployment]:
    """Serve the API over an embedded database under `folder` (a temporary one by default)."""
    with tempfile.TemporaryDirectory(prefix="satchel-conformance-") as scratch:
        root = folder or Path(scratch)
        data = root / "data"
        port = _free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("SATCHEL_DATABASE_URL", None)
        log = root / "serve.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                _satchel("serve", "--role", "api", "--port", str(port), "--data-dir", str(data)),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + timeout
            while not _ready(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"satchel serve did not start:\n{log.read_text()}")
                time.sleep(0.1)
            made = subprocess.run(
                _satchel("tokens", "create", "--project", PROJECT, "--data-dir", str(data)),
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if made.returncode != 0:
                raise RuntimeError(f"satchel tokens create failed:\n{made.stderr}")
            yield Deployment(api=f"http://127.0.0.1:{port}", token=made.stdout.strip())
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
