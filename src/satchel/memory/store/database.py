"""The connection pool and the numbered SQL migrations, applied under an advisory lock."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg import AsyncConnection, conninfo
from psycopg_pool import AsyncConnectionPool, PoolTimeout

log = logging.getLogger("satchel.memory")

MIGRATION_LOCK = 7_301_918_114  # pg_advisory_lock key held while migrating
Conn = AsyncConnection[Any]  # the one name for a connection of the pool, everywhere
SPARE_WAIT = 0.001  # seconds a request waits for a second connection before doing without


def migrations() -> list[tuple[int, str, str]]:
    """The shipped migrations as (version, name, sql), in order."""
    found = []
    for entry in resources.files("satchel.memory.store.migrations").iterdir():
        name = entry.name
        if name.endswith(".sql"):
            found.append((int(name.split("_", 1)[0]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def migrate(url: str) -> list[str]:
    """Apply pending migrations; several processes may call this at once. Returns what ran."""
    with psycopg.connect(url, autocommit=True) as conn:
        return apply_migrations(conn)


def apply_migrations(conn: psycopg.Connection[Any]) -> list[str]:
    """Apply pending migrations on `conn` (autocommitting) as its current role, under the
    advisory lock. Returns what ran."""
    applied: list[str] = []
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in migrations():
            if version in done:
                continue
            with conn.transaction():
                conn.execute(sql.encode())
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (version, name),
                )
            applied.append(name)
            log.info("applied migration %s", name)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    return applied


@dataclass(frozen=True, slots=True)
class MigrationState:
    """What a role connected to a database finds of the deployment's migrations.

    `found`: the migrations table exists. `applied`: its versions. `may_migrate`: this role owns
    the migrations table, or (none yet) may create tables in its schema; a role that only uses
    a deployment others own never migrates it. `superuser`: the role is a superuser.
    """

    role: str
    found: bool
    applied: frozenset[int]
    may_migrate: bool
    superuser: bool

    @property
    def pending(self) -> list[str]:
        """The shipped migrations not applied, by file name."""
        return [name for version, name, _ in migrations() if version not in self.applied]


def migration_state(url: str) -> MigrationState:
    """The migrations of the database at `url` as its connecting role sees them."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_user, current_setting('is_superuser') = 'on',"
            " to_regclass('schema_migrations') IS NOT NULL,"
            " coalesce((SELECT relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)"
            "  FROM pg_class WHERE oid = to_regclass('schema_migrations')),"
            "  coalesce(has_schema_privilege(current_schema(), 'CREATE'), false))"
        ).fetchone()
        assert row is not None
        role, superuser, found, may_migrate = row
        applied: frozenset[int] = frozenset()
        if found:
            versions = conn.execute("SELECT version FROM schema_migrations").fetchall()
            applied = frozenset(version for (version,) in versions)
    return MigrationState(role, found, applied, may_migrate, superuser)


def is_deployment(url: str) -> bool:
    """Whether the database at `url` holds a deployment (its migrations table exists)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    return bool(row and row[0])


@dataclass(frozen=True, slots=True)
class ConnectionSlots:
    """The server's client connections: its limit, the slots kept for privileged roles, and
    those other sessions hold."""

    limit: int
    reserved: int
    in_use: int

    @property
    def free(self) -> int:
        return max(0, self.limit - self.reserved - self.in_use)


def connection_slots(url: str) -> ConnectionSlots:
    """The slots of the server at `url` as it counts them now, this asking session aside."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('max_connections')::int,"
            " current_setting('superuser_reserved_connections')::int"
            " + coalesce(current_setting('reserved_connections', true)::int, 0),"
            " (SELECT count(*) FROM pg_stat_activity"
            "  WHERE backend_type = 'client backend' AND pid <> pg_backend_pid())"
        ).fetchone()
    assert row is not None
    return ConnectionSlots(*row)


def describe_url(url: str) -> str:
    """`user@host:port/dbname` of a database URL, never its password."""
    info = conninfo.conninfo_to_dict(url)
    host = str(info.get("host") or "localhost")
    where = f"{host}:{info['port']}" if info.get("port") else host
    user = f"{info['user']}@" if info.get("user") else ""
    return f"{user}{where}/{info.get('dbname') or ''}"


def open_pool(url: str, size: int) -> AsyncConnectionPool:
    """An async pool (not yet opened) of `size` connections, each preparing a statement the
    first time it runs it (its parse and plan are then kept for the connection's next use)."""
    return AsyncConnectionPool(
        url, min_size=min(2, size), max_size=size, open=False, kwargs={"prepare_threshold": 0}
    )


@asynccontextmanager
async def spare_connection(pool: AsyncConnectionPool) -> AsyncIterator[AsyncConnection[Any] | None]:
    """A second, autocommitting connection for work that can run beside the request's first,
    when one is free at once; None otherwise. A request holding a connection never waits for
    another, so requests cannot deadlock over the pool."""
    async with AsyncExitStack() as stack:
        conn = None
        if pool.get_stats().get("pool_available"):
            with suppress(PoolTimeout):
                conn = await stack.enter_async_context(autocommitting(pool, SPARE_WAIT))
        yield conn


@asynccontextmanager
async def autocommitting(
    pool: AsyncConnectionPool, timeout: float | None = None
) -> AsyncIterator[AsyncConnection[Any]]:
    """A pooled connection for statements that stand alone: each commits itself, so none
    waits for a COMMIT round trip; the connection goes back as it came."""
    async with pool.connection(timeout=timeout) as conn:
        await conn.set_autocommit(True)
        try:
            yield conn
        finally:
            if not conn.closed:
                await conn.set_autocommit(False)


async def ping(conn: Conn) -> None:
    """A trivial statement: it answers while the database does."""
    await conn.execute("SELECT 1")
