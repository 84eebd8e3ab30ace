"""Changes the database announces: a connection that listens on a channel of migration 0012."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import psycopg

CREDENTIALS_CHANNEL = "satchel_credentials"  # notified by every change to tokens and projects


async def changes(url: str, channel: str = CREDENTIALS_CHANNEL) -> AsyncGenerator[None]:
    """Yield once as soon as the LISTEN on `channel` has taken effect, then once per notification;
    a lost connection ends the iteration with its `psycopg.Error`."""
    conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(url, autocommit=True)
    async with conn:
        await conn.execute(f"LISTEN {channel}")
        yield
        async for _ in conn.notifies():
            yield
