"""Fixtures of the memory tests: a real PostgreSQL (embedded, or SATCHEL_DATABASE_URL), one fresh
database per test cloned from a migrated template, and the real service on a loopback port.

The tests of the modules in `ON_BOTH_SERVERS` run twice: on that server, and on an external one
the tests start apart from satchel (`external_postgres`: TCP and a password), one a test process.

The embedded test server runs without fsync (a throwaway folder: only an operating-system crash
could lose its writes, and no test makes one). A test's service is stopped, and its database
dropped, behind the next test by one teardown thread, in order: a stop waits out uvicorn's
shutdown ticks, which the next test need not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from client_kit import FLAVOURS, client_for, close
from external_postgres import start_external
from memory_kit import LiveServer, with_database
from model_server import ModelServer
from records_kit import api

from satchel.memory.config import MemorySettings
from satchel.memory.store.database import migrate
from satchel.memory.store.embedded import start_embedded

# One template a test process: parallel workers (pytest-xdist) may share one external server.
TEMPLATE = "satchel_test_template_" + os.environ.get("PYTEST_XDIST_WORKER", "main")
UNSAFE_FOR_SPEED = ("fsync", "synchronous_commit", "full_page_writes")
SERVERS = ("embedded", "external")  # the first: the embedded server, or SATCHEL_DATABASE_URL
# The memory API through the HTTP server: observe, recall, passages, contexts, erasure, tokens,
# what an operator watches (metrics, readiness, health, parked turns), retention, artifact expiry.
ON_BOTH_SERVERS = {
    "test_memory_idempotency",
    "test_memory_recall",
    "test_memory_passages",
    "test_memory_contexts",
    "test_memory_erasure",
    "test_memory_auth",
    "test_memory_metrics",
    "test_memory_operator",
    "test_memory_retention",
    "test_memory_retention_reads",
    "test_memory_artifact_expiry",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test of a module in `ON_BOTH_SERVERS` that uses a database runs on each of `SERVERS`."""
    if "db_url" in metafunc.fixturenames and metafunc.module.__name__ in ON_BOTH_SERVERS:
        metafunc.parametrize("database_server", SERVERS, indirect=True)


class Teardowns:
    """Stops and drops run in order on one thread; `drain` (once or more) waits for them and
    raises the first failure."""

    def __init__(self) -> None:
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="teardown")
        self.pending: list[Future[None]] = []

    def later(self, job: Callable[[], None]) -> None:
        self.pending = [done for done in self.pending if not done.done() or done.exception()]
        self.pending.append(self.thread.submit(job))

    def drain(self) -> None:
        self.thread.shutdown(wait=True)
        for done in self.pending:
            done.result()


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A server to create test databases on, with a migrated template database.

    The embedded server lives in a folder of its own, outside pytest's shared temp root, which
    a concurrent pytest run may reset.
    """
    external = os.environ.get("SATCHEL_DATABASE_URL")
    embedded = None
    folder = Path(tempfile.mkdtemp(prefix="satchel-pg-"))
    if external:
        url = external
    else:
        embedded = start_embedded(folder)
        url = embedded.url
        with psycopg.connect(url, autocommit=True) as conn:
            for setting in UNSAFE_FOR_SPEED:
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
    make_template(url)
    try:
        yield url
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        if embedded is not None:
            embedded.stop()
        shutil.rmtree(folder, ignore_errors=True)


def make_template(admin_url: str) -> None:
    """The migrated database each test's database is cloned from."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    migrate(with_database(admin_url, TEMPLATE))


@pytest.fixture(scope="session")
def teardowns(pg_admin_url: str) -> Iterator[Teardowns]:
    """The teardown thread, drained before the server it drops databases on stops."""
    running = Teardowns()
    try:
        yield running
    finally:
        running.drain()


@pytest.fixture(scope="session")
def external_admin_url(teardowns: Teardowns) -> Iterator[str]:
    """The superuser's URL (password, TCP) of the external server, with the migrated template;
    the server is stopped once the databases dropped on it are."""
    server = start_external()
    try:
        make_template(server.url)
        yield server.url
    finally:
        teardowns.drain()
        server.stop()


@pytest.fixture
def database_server(request: pytest.FixtureRequest) -> str:
    """Which of `SERVERS` the test's database is made on (the first, unless parametrized)."""
    return str(getattr(request, "param", SERVERS[0]))


@pytest.fixture
def external_empty_db(external_admin_url: str, teardowns: Teardowns) -> Iterator[str]:
    """The superuser's URL to a new, empty database on the external server (no migrations)."""
    name = f"satchel_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(external_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")

    def drop() -> None:
        with psycopg.connect(external_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    try:
        yield with_database(external_admin_url, name)
    finally:
        teardowns.later(drop)


@pytest.fixture
def db_url(
    database_server: str, request: pytest.FixtureRequest, teardowns: Teardowns
) -> Iterator[str]:
    """A fresh, migrated database for one test, on the server `database_server` names."""
    admin = "external_admin_url" if database_server == "external" else "pg_admin_url"
    pg_admin_url: str = request.getfixturevalue(admin)
    name = f"satchel_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")

    def drop() -> None:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    try:
        yield with_database(pg_admin_url, name)
    finally:
        teardowns.later(drop)


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings()


@pytest.fixture
def live_server(
    db_url: str, memory_settings: MemorySettings, teardowns: Teardowns
) -> Iterator[LiveServer]:
    server = LiveServer(db_url, memory_settings)
    server.start()
    try:
        yield server
    finally:
        teardowns.later(server.stop)


@pytest.fixture
def token(live_server: LiveServer) -> Callable[..., str]:
    """`token(project="alpha", read_only=False)` makes a bearer token on the live server."""
    return live_server.token


@pytest.fixture
def alpha(live_server: LiveServer) -> Iterator[httpx.Client]:
    """An HTTP client on the live server with a token for project `alpha`."""
    token = live_server.token("alpha")
    with httpx.Client(
        base_url=live_server.base_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        yield client


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    """Which `satchel.memory.client` flavour a client test runs with (sync or async)."""
    return str(request.param)


@pytest.fixture
async def memory(live_server: LiveServer, flavour: str) -> AsyncIterator[Any]:
    """A `satchel.memory.client` client of project alpha, of the flavour under test."""
    client = client_for(live_server, flavour, live_server.token("alpha"))
    yield client
    await close(client)


@pytest.fixture
def model() -> Iterator[ModelServer]:
    """A scripted loopback model server (formation's chat model and embeddings) for the test."""
    with ModelServer() as server:
        yield server


@pytest.fixture
def http(live_server: LiveServer) -> Iterator[httpx.Client]:
    """A client of the live server holding project alpha's token."""
    with api(live_server) as client:
        yield client
