"""Whether the deployment can serve (the database answers; a worker reported in recently, when
one is required), and the figures a metrics scrape reads, each within a short timeout."""

from __future__ import annotations

import asyncio

from psycopg_pool import AsyncConnectionPool

from satchel.memory.store.database import ping
from satchel.memory.store.figures import Figures, figures
from satchel.memory.store.workers import freshest_beat_age

READY_TIMEOUT = 1.0  # seconds to wait for a connection before saying the database is away


async def database_answers(pool: AsyncConnectionPool) -> bool:
    """True once a pooled connection answers a trivial statement; any failure is a no."""
    try:
        async with pool.connection(timeout=READY_TIMEOUT) as conn:
            await ping(conn)
    except Exception:
        return False
    return True


async def worker_beat_age(pool: AsyncConnectionPool) -> tuple[bool, float | None]:
    """Whether the database answered, and the seconds since the freshest running worker's
    beat (None: no worker runs)."""
    try:
        async with pool.connection(timeout=READY_TIMEOUT) as conn:
            return True, await freshest_beat_age(conn)
    except Exception:
        return False, None


async def read_figures(
    pool: AsyncConnectionPool, *, by_project: bool, live_within: float, timeout: float
) -> Figures | None:
    """The scrape's figures, or None when the database does not give them within `timeout`
    seconds (no connection free, or the statement too slow)."""
    try:
        async with asyncio.timeout(timeout), pool.connection(timeout=timeout) as conn:
            return await figures(conn, by_project=by_project, live_within=live_within)
    except Exception:
        return None
