"""Whether a project's turns were formed with no model (recall's `facts_not_formed`) is read from
the partial index of such turns whatever the statistics say: another project's many turns formed
with no model must not make the probe read the observations table through."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from satchel.memory.store.formation import formed_without_model

# Observations read by one probe when it reads the index: a few entries, never the table.
MOST_ROWS_READ = 5


def projects(url: str) -> tuple[int, int]:
    """A project of 20,000 turns formed with no model (fresh statistics say so), and one of
    60,000 curated records and 10,000 turns of `ann` formed by a model."""
    with psycopg.connect(url, autocommit=True) as conn:
        ids = [
            conn.execute("INSERT INTO projects (name) VALUES (%s) RETURNING id", (n,)).fetchone()
            for n in ("busy", "modelled")
        ]
        busy, modelled = (row[0] for row in ids if row is not None)
        conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind,"
            " occurred_at, formed_at)"
            " SELECT gen_random_uuid(), %s, n, 'person-' || n %% 50, 'turn', now(), now()"
            " FROM generate_series(0, 19999) n",
            (busy,),
        )
        conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, kind, occurred_at, formed_at)"
            " SELECT gen_random_uuid(), %s, n, 'curated', now(), now()"
            " FROM generate_series(0, 59999) n",
            (modelled,),
        )
        conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind,"
            " occurred_at, formed_at, extractor_model)"
            " SELECT gen_random_uuid(), %s, n, 'ann', 'turn', now(), now(), 'a-model'"
            " FROM generate_series(60000, 69999) n",
            (modelled,),
        )
        conn.execute("ANALYZE observations")
    return busy, modelled


async def probed(url: str, mode: str, project_id: int, subject: str | None) -> tuple[bool, int]:
    """The probe's answer, and the observations it read (one transaction's statistics), with
    prepared statements planned as `mode` says (the pool prepares every statement)."""
    async with await psycopg.AsyncConnection.connect(url, prepare_threshold=0) as conn:
        await conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (mode,))
        for _ in range(6):  # past the calls PostgreSQL plans for the values before choosing
            answer = await formed_without_model(conn, project_id, subject)
        cursor = await conn.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
            " FROM pg_stat_xact_user_tables WHERE relname = 'observations'"
        )
        row = await cursor.fetchone()
    assert row is not None
    read: int = row[0]
    return answer, read


@pytest.mark.parametrize("mode", ["auto", "force_custom_plan", "force_generic_plan"])
def test_the_probe_reads_the_index_of_turns_formed_without_a_model(db_url: str, mode: str) -> None:
    busy, modelled = projects(db_url)
    for project_id, subject, expected in [
        (modelled, None, False),
        (modelled, "ann", False),
        (busy, None, True),
        (busy, "person-7", True),
        (busy, "ann", False),
    ]:
        answer, read = asyncio.run(probed(db_url, mode, project_id, subject))
        assert answer is expected, (project_id, subject)
        assert read <= 6 * MOST_ROWS_READ, (project_id, subject, read)
