"""Each project's vectors in a partition of their own (migration 0013), and the settings the
embedded server starts with."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psutil  # type: ignore[import-untyped]
import psycopg
import pytest
from memory_kit import with_database

from satchel.memory.passages.embedder import DIMENSIONS
from satchel.memory.passages.ranking import period_window
from satchel.memory.store.database import migrate, migrations
from satchel.memory.store.embedded import (
    INCLUDE,
    LOCKS_PER_TRANSACTION,
    MIB,
    SETTINGS,
    shared_buffers_mib,
    start_embedded,
    usable_memory,
    write_settings,
)
from satchel.memory.store.passage_hits import ask_hits
from satchel.memory.store.passage_rankings import ScanSettings, period_ranking, vector_ranking
from satchel.memory.store.passage_scope import Scope, Terms
from satchel.memory.store.vectors import Packed, packed

PARTITIONED = 13  # the migration that gives each project its partition


def vector(axis: int) -> Packed:
    return packed(np.eye(DIMENSIONS, dtype=np.float32)[axis])


@pytest.fixture
def before_url(pg_admin_url: str) -> Iterator[str]:
    """A database migrated up to the migration before vectors were partitioned."""
    name = f"satchel_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = with_database(pg_admin_url, name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for version, migration, text in migrations():
                if version < PARTITIONED:
                    conn.execute(text.encode())
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (version, migration),
                    )
        yield url
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def add_project(conn: psycopg.Connection, name: str) -> int:
    row = conn.execute("INSERT INTO projects (name) VALUES (%s) RETURNING id", (name,)).fetchone()
    assert row is not None
    project: int = row[0]
    return project


def add_message(conn: psycopg.Connection, project: int, offset: int, role: str) -> uuid.UUID:
    observation, message = uuid.uuid4(), uuid.uuid4()
    conn.execute(
        "INSERT INTO observations (id, project_id, log_offset, kind, occurred_at)"
        " VALUES (%s, %s, %s, 'turn', now())",
        (observation, project, offset),
    )
    conn.execute(
        "INSERT INTO messages (id, observation_id, project_id, ordinal, role, content,"
        " group_ordinal, occurred_at) VALUES (%s, %s, %s, 0, %s, 'hello', 0, now())",
        (message, observation, project, role),
    )
    return message


def add_vector(conn: psycopg.Connection, message: uuid.UUID, axis: int) -> None:
    conn.execute(
        "INSERT INTO message_vectors (message_id, project_id, data_subject_id, role, turn,"
        " embedding) SELECT id, project_id, data_subject_id, role, true, %s::vector"
        " FROM messages WHERE id = %s",
        (vector(axis), message),
    )


def partition_rows(conn: psycopg.Connection) -> dict[str, list[uuid.UUID]]:
    rows = conn.execute(
        "SELECT tableoid::regclass::text, message_id FROM message_vectors ORDER BY 1, 2"
    ).fetchall()
    found: dict[str, list[uuid.UUID]] = {}
    for table, message in rows:
        found.setdefault(table, []).append(message)
    return found


def graphs_of(conn: psycopg.Connection, table: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_indexes WHERE tablename = %s AND indexdef LIKE '%%USING hnsw%%'",
        (table,),
    ).fetchone()
    assert row is not None
    count: int = row[0]
    return count


def test_migration_moves_every_vector_into_its_projects_partition(before_url: str) -> None:
    with psycopg.connect(before_url, autocommit=True) as conn:
        alpha, beta = add_project(conn, "alpha"), add_project(conn, "beta")
        kept = {
            alpha: [add_message(conn, alpha, n, "user") for n in range(3)],
            beta: [add_message(conn, beta, n, "assistant") for n in range(2)],
        }
        for messages in kept.values():
            for axis, message in enumerate(messages):
                add_vector(conn, message, axis)
    assert migrate(before_url)[0] == "0013_vectors_by_project.sql"
    with psycopg.connect(before_url, autocommit=True) as conn:
        assert partition_rows(conn) == {
            f"message_vectors_{project}": sorted(messages) for project, messages in kept.items()
        }
        assert conn.execute("SELECT to_regclass('message_vectors_shared')").fetchone() == (None,)
        for project in kept:
            assert graphs_of(conn, f"message_vectors_{project}") == 8


def test_a_new_project_has_a_partition_with_every_graph(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        project = add_project(conn, "fresh")
        assert graphs_of(conn, f"message_vectors_{project}") == 8
        message = add_message(conn, project, 0, "user")
        add_vector(conn, message, 0)
        assert partition_rows(conn) == {f"message_vectors_{project}": [message]}
        # A message's vector goes with it (the cascade finds it by message id alone).
        conn.execute("DELETE FROM messages WHERE id = %s", (message,))
        assert partition_rows(conn) == {}


def test_a_project_is_made_while_a_search_reads_vectors(db_url: str) -> None:
    """Making a project's partition does not wait for a search under way (nor would it hold
    the searches behind it back)."""
    with (
        psycopg.connect(db_url) as searching,
        psycopg.connect(db_url, autocommit=True) as admin,
    ):
        searching.execute("SELECT count(*) FROM message_vectors").fetchone()
        admin.execute("SET lock_timeout = '2s'")
        project = add_project(admin, "meanwhile")
        assert graphs_of(admin, f"message_vectors_{project}") == 8
        searching.rollback()


async def test_a_vector_search_reads_only_its_projects_graph(db_url: str) -> None:
    """The nearest vectors of a small project beside a large one: found whole, and the walk
    never meets the large project's rows."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        large, small = add_project(conn, "large"), add_project(conn, "small")
        for n in range(300):
            add_vector(conn, add_message(conn, large, n, "user"), 0)
        mine = [add_message(conn, small, n, "user") for n in range(3)]
        for message in mine:
            add_vector(conn, message, 0)
        conn.execute("ANALYZE message_vectors")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        scope = Scope(small, "", ("user",), turns_only=True)
        found = await vector_ranking(conn, scope, vector(0), 8, scans=ScanSettings())
        assert sorted(place.id for place, _ in found.ranking) == sorted(mine)
        plan = await conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF) SELECT message_id FROM message_vectors"
            " WHERE project_id = %s AND turn AND role = 'user'"
            " ORDER BY embedding <=> %s::vector LIMIT 8",
            (small, vector(0)),
        )
        text = "\n".join(row[0] for row in await plan.fetchall())
    assert f"message_vectors_{small}" in text
    assert f"message_vectors_{large}" not in text
    assert "Rows Removed by Filter" not in text


async def test_no_search_statement_opens_another_projects_vectors(db_url: str) -> None:
    """Under the generic plans searches run with, every statement that reads vectors names the
    project's own partition: a generic plan of the parent would lock every project's."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        mine, other = add_project(conn, "mine"), add_project(conn, "other")
        messages = {project: add_message(conn, project, 0, "user") for project in (mine, other)}
        for message in messages.values():
            add_vector(conn, message, 0)
    scope = Scope(mine, "", ("user",), turns_only=True)
    now = datetime.now(UTC)
    async with await psycopg.AsyncConnection.connect(db_url, prepare_threshold=0) as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        async with conn.transaction():
            for exact in (False, True):
                found = await vector_ranking(
                    conn, scope, vector(0), 8, exact, scans=ScanSettings(), terms=Terms([], "")
                )
                assert [place.id for place, _ in found.ranking] == [messages[mine]]
            rows = await (await ask_hits(conn, mine, [messages[mine]], vector(0), Terms([], "")))()
            assert list(rows) == [messages[mine]]
            window = period_window((now - timedelta(days=1), now + timedelta(days=1)))
            dated = await period_ranking(conn, scope, [window], vector(0), 8)
            assert [place.id for place, _ in dated] == [messages[mine]]
            locked = await conn.execute(
                "SELECT DISTINCT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'message\\_vectors\\_%%'"
            )
            names = {name for (name,) in await locked.fetchall()}
    assert f"message_vectors_{mine}" in names
    theirs = f"message_vectors_{other}"
    assert not {name for name in names if name == theirs or name.startswith(f"{theirs}_")}


@pytest.mark.parametrize(
    ("memory", "expected"),
    [(512 * MIB, 128), (2048 * MIB, 256), (8192 * MIB, 1024), (24 * 1024 * MIB, 2048)],
)
def test_shared_buffers_are_an_eighth_of_memory_within_bounds(memory: int, expected: int) -> None:
    assert shared_buffers_mib(memory) == expected


def test_settings_are_included_once_and_read_at_start(tmp_path: Path) -> None:
    server = start_embedded(tmp_path)
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            shown = conn.execute("SHOW shared_buffers").fetchone()
            locks = conn.execute("SHOW max_locks_per_transaction").fetchone()
    finally:
        server.stop()
    pgdata = tmp_path / "pgdata"
    assert (pgdata / SETTINGS).is_file()
    size = shared_buffers_mib(usable_memory())
    assert shown == (f"{size // 1024}GB" if size % 1024 == 0 else f"{size}MB",)
    assert locks == (str(LOCKS_PER_TRANSACTION),)
    write_settings(pgdata, 1024 * MIB)
    lines = (pgdata / "postgresql.conf").read_text().splitlines()
    assert lines.count(INCLUDE) == 1
    assert "shared_buffers = '128MB'" in (pgdata / SETTINGS).read_text()


def test_a_containers_memory_limit_bounds_the_buffer_cache(tmp_path: Path) -> None:
    machine = psutil.virtual_memory().total
    limited, unlimited, absent = tmp_path / "v2", tmp_path / "v1", tmp_path / "none"
    limited.write_text(f"{machine // 4}\n")
    unlimited.write_text("max\n")
    assert usable_memory([absent, unlimited]) == machine
    assert usable_memory([absent, limited, unlimited]) == machine // 4
    assert usable_memory([tmp_path / "huge"]) == machine
    (tmp_path / "huge").write_text(str(2**63))
    assert usable_memory([tmp_path / "huge"]) == machine
