"""Build the passage index: embed a project's not-yet-embedded messages, oldest first."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from psycopg import AsyncConnection

from satchel.memory.passages.embedder import Embedder, Vectors

Conn = AsyncConnection[Any]


def vector_literal(row: Vectors) -> str:
    """pgvector's text form of one vector."""
    return "[" + ",".join(f"{value:.7g}" for value in row.tolist()) + "]"


async def generation(conn: Conn, project_id: int, embedder: Embedder) -> uuid.UUID:
    """The project's generation for `embedder`; a different embedder starts a new one and drops
    the vectors of the old (they cannot be compared with the new model's)."""
    cursor = await conn.execute(
        "SELECT id, embedder FROM passage_generations WHERE project_id = %s FOR UPDATE",
        (project_id,),
    )
    row = await cursor.fetchone()
    if row is not None and row[1] == embedder.identity:
        found: uuid.UUID = row[0]
        return found
    fresh = uuid.uuid4()
    await conn.execute(
        "INSERT INTO passage_generations (project_id, id, embedder) VALUES (%s, %s, %s)"
        " ON CONFLICT (project_id) DO UPDATE"
        " SET id = excluded.id, embedder = excluded.embedder, started_at = now()",
        (project_id, fresh, embedder.identity),
    )
    if row is not None:
        await conn.execute(
            "UPDATE messages SET embedding = NULL, indexed_at = NULL"
            " WHERE project_id = %s AND embedding IS NOT NULL",
            (project_id,),
        )
    return fresh


async def index_passages(conn: Conn, project_id: int, embedder: Embedder, limit: int = 256) -> int:
    """Embed up to `limit` messages of the project that have no vector yet, oldest first.

    Returns how many were embedded; the caller commits. Rows another indexer holds are skipped.
    """
    await generation(conn, project_id, embedder)
    cursor = await conn.execute(
        "SELECT m.id, m.content FROM messages m JOIN observations o ON o.id = m.observation_id"
        " WHERE m.project_id = %s AND m.embedding IS NULL"
        " ORDER BY o.log_offset, m.ordinal LIMIT %s FOR UPDATE OF m SKIP LOCKED",
        (project_id, limit),
    )
    rows = await cursor.fetchall()
    if not rows:
        return 0
    vectors = await asyncio.to_thread(embedder.embed, [content for _, content in rows])
    async with conn.cursor() as writer:
        await writer.executemany(
            "UPDATE messages SET embedding = %s::vector, indexed_at = now() WHERE id = %s",
            [(vector_literal(vector), row[0]) for row, vector in zip(rows, vectors, strict=True)],
        )
    return len(rows)
