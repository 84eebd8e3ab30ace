"""Whether the deployment can serve: the database answers within a second."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from satchel.memory.store.database import ping

READY_TIMEOUT = 1.0  # seconds to wait for a connection before saying the database is away


async def database_answers(pool: AsyncConnectionPool) -> bool:
    """True once a pooled connection answers a trivial statement; any failure is a no."""
    try:
        async with pool.connection(timeout=READY_TIMEOUT) as conn:
            await ping(conn)
    except Exception:
        return False
    return True
