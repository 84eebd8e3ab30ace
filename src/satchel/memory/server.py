"""Running the deployment: find or start the database, migrate, serve HTTP beside a supervised
worker process, and stop all of it (the embedded PostgreSQL included) on SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from types import FrameType
from typing import Any

import psycopg
import uvicorn

from satchel.memory.config import MemorySettings
from satchel.memory.logs import log_to_stderr
from satchel.memory.service.formation import unpark as unpark_turns
from satchel.memory.store.database import (
    MigrationState,
    connection_slots,
    describe_url,
    is_deployment,
    migrate,
    migration_state,
)
from satchel.memory.store.embedded import has_data, start_embedded
from satchel.memory.supervisor import STOP_GRACE, WorkerSupervisor
from satchel.memory.worker_process import run_until_stopped

log = logging.getLogger("satchel.memory")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
BACKLOG = 2048


class ServeError(RuntimeError):
    """The service cannot start; the message says why in one line."""


class NoRoom(RuntimeError):
    """The database server has too few free connection slots for this process."""


class NoDeployment(RuntimeError):
    """There is no deployment where a manage command looked; the message says where."""


class NotMigrated(NoDeployment):
    """The database's migrations are behind this satchel's (or absent), and the connected role
    may not apply them: `satchel bootstrap` must."""


BOOTSTRAP = "satchel bootstrap --admin-url URL"


@contextmanager
def _server(settings: MemorySettings) -> Iterator[str]:
    """The URL: `SATCHEL_DATABASE_URL`, or the embedded server under the data dir (started, or
    attached to, and stopped again at the end unless another process still uses it)."""
    if settings.database_url:
        yield settings.database_url
        return
    embedded = start_embedded(settings.data_dir)
    try:
        yield embedded.url
    finally:
        embedded.stop()


@contextmanager
def database(settings: MemorySettings) -> Iterator[str]:
    """The database URL, once its migrations are current (see `prepare`). A superuser given in
    `SATCHEL_DATABASE_URL` is warned about."""
    with _server(settings) as url:
        state = prepare(settings, url)
        if settings.database_url and state.superuser:
            log.warning(
                "connected as %r, a superuser: give SATCHEL_DATABASE_URL the login role"
                " `satchel bootstrap` makes, which may not change the schema",
                state.role,
            )
        yield url


def prepare(settings: MemorySettings, url: str) -> MigrationState:
    """Apply pending migrations (under an advisory lock) when the connected role owns the
    deployment, as on the embedded server; else `NotMigrated` unless they are all applied."""
    try:
        state = migration_state(url)
    except psycopg.errors.InsufficientPrivilege:
        raise NotMigrated(
            f"the role of {where(settings)} may not read satchel's migrations:"
            f" run `{BOOTSTRAP}` to make its roles and grants"
        ) from None
    except psycopg.OperationalError as exc:
        raise ServeError(f"cannot reach {where(settings)}: {first_line(exc)}") from None
    pending = state.pending
    if not pending:
        return state
    if state.may_migrate:
        migrate(url)
        return state
    if not state.found:
        raise NotMigrated(
            f"no satchel deployment in {where(settings)}, and role {state.role!r} may not make"
            f" one: run `{BOOTSTRAP}` with an administrator's URL first"
        )
    raise NotMigrated(
        f"{where(settings)} lacks {len(pending)} of this satchel's migrations (first:"
        f" {pending[0]}), and role {state.role!r} may not apply them:"
        f" run `{BOOTSTRAP}` with an administrator's URL to upgrade it"
    )


def first_line(exc: Exception) -> str:
    """The first line of a driver's error (its next lines are hints for a terminal)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def where(settings: MemorySettings) -> str:
    """The database a command works on, for people: never a password."""
    if settings.database_url:
        return f"the database at {describe_url(settings.database_url)}"
    return f"the embedded database in {settings.data_dir.resolve()}"


@contextmanager
def deployment(settings: MemorySettings) -> Iterator[str]:
    """Like `database`, for manage commands: `NoDeployment` rather than a new database where
    `satchel serve` never ran (no embedded data, or a database without satchel's tables)."""
    if not settings.database_url and not has_data(settings.data_dir):
        raise NoDeployment(_no_deployment(settings))
    with _server(settings) as url:
        try:
            found = is_deployment(url)
        except psycopg.OperationalError as exc:
            raise NoDeployment(f"cannot reach {where(settings)}: {first_line(exc)}") from None
        if not found:
            raise NoDeployment(_no_deployment(settings))
        prepare(settings, url)
        yield url


def _no_deployment(settings: MemorySettings) -> str:
    if settings.database_url:
        hint = "start `satchel serve` against it once first"
    else:
        hint = (
            "pass the --data-dir (or SATCHEL_DATA_DIR) of the deployment you serve, "
            "or start `satchel serve` there once first"
        )
    return f"no satchel deployment in {where(settings)}: {hint}"


def check_room(settings: MemorySettings, url: str, *, pool: bool, worker: bool) -> None:
    """`NoRoom` unless the server at `url` has a free slot for each connection this process
    will hold: the API's pool and its grants listener (`pool`), a worker's one (`worker`)."""
    parts = [f"a pool of {settings.pool_size} (SATCHEL_POOL_SIZE)", "a listener"] if pool else []
    parts += ["a worker"] if worker else []
    needed = (settings.pool_size + 1 if pool else 0) + (1 if worker else 0)
    slots = connection_slots(url)
    if needed <= slots.free:
        return
    room = slots.free - needed + settings.pool_size
    advice = f"set SATCHEL_POOL_SIZE to at most {room}" if pool and room > 0 else "end sessions"
    raise NoRoom(
        f"{needed} connection{'s' if needed != 1 else ''} ({', '.join(parts)}) will not fit:"
        f" {where(settings)} has {slots.free} free (max_connections {slots.limit},"
        f" {slots.reserved} reserved, {slots.in_use} in use); {advice}"
        " or raise the server's max_connections"
    )


def listen_socket(host: str, port: int, other: str = "pass --port") -> socket.socket:
    """A socket bound to `host:port`, not yet listening, or `ServeError` naming the port (and,
    when it is in use, saying to stop what listens there or `other`)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise _bind_error(host, port, exc, other) from None
    return sock


def _bind_error(host: str, port: int, exc: OSError, other: str = "pass --port") -> ServeError:
    if exc.errno == errno.EADDRINUSE:
        return ServeError(
            f"port {port} on {host} is already in use: stop what listens there or {other}"
        )
    return ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def metrics_address_free(host: str, port: int) -> None:
    """`ServeError` naming SATCHEL_METRICS_ADDRESS unless its listener could be bound now."""
    try:
        listen_socket(host, port, "set another").close()
    except ServeError as exc:
        raise ServeError(f"SATCHEL_METRICS_ADDRESS={host}:{port}: {exc}") from None


class StopSignals:
    """SIGINT and SIGTERM as a request to stop, never an exception: noted while the database
    starts, then passed on to the HTTP server (a second SIGINT forces it)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.on_stop: Callable[[bool], None] | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._noted)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        force = self.signum is not None and signum == signal.SIGINT
        self.signum = signum
        if self.on_stop is not None:
            self.on_stop(force)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency except on Windows), else None
    (asyncio's own)."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def serve(
    settings: MemorySettings,
    host: str,
    port: int,
    announce: object = print,
    *,
    with_worker: bool = True,
    access_log: bool = True,
) -> None:
    """Serve the API until SIGINT or SIGTERM, then stop cleanly: the HTTP server, the worker
    process (`with_worker`) and the embedded PostgreSQL this process started. `announce` gets
    the address once it listens. Either way stored turns wait for a worker (`form_on_store` is
    off). Refusals are `ServeError`; a bad formation host is `HostNotAllowed`."""
    settings = settings.for_worker()
    if with_worker and settings.formation is not None:
        from satchel.memory.formation.model import allowed_url

        allowed_url(settings.formation)
    log_to_stderr(access=access_log)
    if settings.metrics and settings.metrics_address is not None:
        metrics_address_free(*settings.metrics_address)
    with (
        closing(listen_socket(host, port)) as listener,
        StopSignals() as signals,
        database(settings) as url,
    ):
        if signals.signum is not None:
            return
        check_room(settings, url, pool=True, worker=with_worker)
        try:
            listener.listen(BACKLOG)
        except OSError as exc:
            raise _bind_error(host, port, exc) from None
        address = _address(host, listener)
        asyncio.run(
            _serve(url, settings, listener, signals, address, announce, with_worker),
            loop_factory=event_loop_factory(),
        )


def facts_line(settings: MemorySettings) -> str:
    """What the worker does about facts, said once at start: formed by which model, or off."""
    if settings.formation is not None:
        return f"facts: formed by the model {settings.formation.model!r}"
    return (
        "facts: off (no SATCHEL_FORMATION_MODEL and SATCHEL_FORMATION_BASE_URL): turns are"
        " stored, searched and summarized, but no facts are formed; set both to form facts"
    )


def _address(host: str, listener: socket.socket) -> str:
    port = listener.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


async def _serve(
    url: str,
    settings: MemorySettings,
    listener: socket.socket,
    signals: StopSignals,
    address: str,
    announce: object,
    with_worker: bool,
) -> None:
    from satchel.memory.api.app import create_app

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    supervisor = WorkerSupervisor(url) if with_worker else None
    app = create_app(url, settings, worker=supervisor.state if supervisor else None)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=int(STOP_GRACE),
    )

    def started() -> None:
        _say(announce, f"satchel memory serving on {address}")
        if with_worker:
            _say(announce, facts_line(settings))

    server = _Server(config, started)

    def on_stop(force: bool) -> None:
        server.should_exit = True
        server.force_exit = server.force_exit or force
        loop.call_soon_threadsafe(stop.set)

    signals.on_stop = on_stop
    worker = asyncio.create_task(supervisor.run(stop)) if supervisor else None
    try:
        await server.serve(sockets=[listener])
    finally:
        signals.on_stop = None
        stop.set()
        if worker is not None:
            await worker


def _say(announce: object, text: str) -> None:
    if callable(announce):
        announce(text)


class _Server(uvicorn.Server):
    """uvicorn's server, announcing once it listens and leaving signals to `StopSignals`."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_started = on_started

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.on_started()


def work(settings: MemorySettings, announce: object = print) -> None:
    """Run a worker until SIGINT or SIGTERM (it finishes the turn at hand first)."""
    settings = settings.for_worker()
    log_to_stderr()
    with StopSignals() as signals, database(settings) as url:
        if signals.signum is not None:
            return
        check_room(settings, url, pool=False, worker=True)
        _say(announce, "satchel memory worker running")
        _say(announce, facts_line(settings))
        asyncio.run(run_until_stopped(url, settings, parent=None))


def unpark(url: str, project: str | None) -> int:
    """Put parked turns back in line for the worker; how many."""
    return asyncio.run(_unpark(url, project))


async def _unpark(url: str, project: str | None) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await unpark_turns(conn, project)
