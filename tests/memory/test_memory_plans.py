"""Generic plans: set for a pipeline on an autocommit connection and gone after it; never
inside a caller's transaction."""

from __future__ import annotations

import asyncio

import psycopg

from satchel.memory.store.plans import generic_plans


async def modes(url: str) -> list[str]:
    """plan_cache_mode inside and after a block, on an autocommit connection and then inside a
    transaction."""
    seen: list[str] = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:

        async def show() -> None:
            cursor = await conn.execute("SHOW plan_cache_mode")
            row = await cursor.fetchone()
            assert row is not None
            seen.append(row[0])

        async with generic_plans(conn):
            await show()
        await show()
        async with conn.transaction():
            async with generic_plans(conn):
                await show()
            await show()
        await show()
    return seen


def test_generic_plans_last_as_long_as_the_block_and_stay_out_of_transactions(
    db_url: str,
) -> None:
    assert asyncio.run(modes(db_url)) == ["force_generic_plan", "auto", "auto", "auto", "auto"]


async def planned(url: str) -> tuple[str, str]:
    """The plan of a prepared statement over `log_offset > $1` inside and outside the block."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CREATE TEMP TABLE t AS SELECT g AS n FROM generate_series(1, 1000) g")
        await conn.execute("CREATE INDEX ON t (n)")
        await conn.execute("ANALYZE t")
        await conn.execute("PREPARE q(int) AS SELECT count(*) FROM t WHERE n > $1")

        async def plan() -> str:
            cursor = await conn.execute("EXPLAIN EXECUTE q(999)")
            return "\n".join(row[0] for row in await cursor.fetchall())

        async with generic_plans(conn):
            inside = await plan()
        return inside, await plan()


def test_a_prepared_statement_runs_its_generic_plan_inside_the_block(db_url: str) -> None:
    inside, outside = asyncio.run(planned(db_url))
    assert "$1" in inside, inside  # the generic plan keeps the parameter
    assert "$1" not in outside and "999" in outside, outside
