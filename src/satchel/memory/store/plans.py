"""Generic plans for statements whose best plan does not depend on their values.

PostgreSQL plans a prepared statement anew on every call while it guesses that a generic plan
would cost more than a custom one, and for the joins of recall and passage search it mostly
guesses so: planning then costs as much as running. Inside
`generic_plans` they run the plan made once per connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import pq

from satchel.memory.store.database import Conn

# Local to the transaction: in a pipeline on an autocommit connection, the statements up to the
# pipeline's end (or the first fetch) are one implicit transaction, so the setting ends with it.
GENERIC = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"


def committing(conn: Conn) -> bool:
    """Whether each statement on `conn` commits itself (outside any transaction)."""
    return conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE


@asynccontextmanager
async def generic_plans(conn: Conn) -> AsyncIterator[None]:
    """A pipeline whose prepared statements run their generic plan, when `conn` commits each
    statement itself; inside a caller's transaction, a plain pipeline (the setting would
    outlive it)."""
    async with conn.pipeline():
        if committing(conn):
            await conn.execute(GENERIC)
        yield
