"""Build the passage index: embed the messages of a project's turns in log order."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

from satchel.memory.passages.embedder import Embedder
from satchel.memory.store.database import Conn
from satchel.memory.store.erasure import lock_erasures
from satchel.memory.store.terms import progress
from satchel.memory.store.vectors import packed

MAX_TURN_MESSAGES = 64  # the most messages one observed turn holds


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
        await conn.execute("DELETE FROM message_vectors WHERE project_id = %s", (project_id,))
        await conn.execute(
            "UPDATE passage_progress SET vectors_through = -1 WHERE project_id = %s",
            (project_id,),
        )
    return fresh


async def index_passages(conn: Conn, project_id: int, embedder: Embedder, limit: int = 256) -> int:
    """Embed the messages of the next turns in log order, whole turns and about `limit`
    messages at a time; how many were embedded.

    The messages are read and embedded outside any transaction, so no lock or transaction id is
    held while the model runs (one would hold back the pruning of every row updated meanwhile,
    the project's log row first). The vectors are written in a short transaction that locks the
    project's progress row and first checks that no other builder moved it and the generation
    is the same; otherwise nothing is written and the next pass starts from where it is. That
    transaction holds erasures off (`lock_erasures`) and writes vectors only of the messages
    still stored: one erased while it embedded is passed over, as if it had never been read.
    """
    async with conn.transaction():
        begun = await generation(conn, project_id, embedder)
        stored, after, _ = await progress(conn, project_id)
    if stored <= after:
        return 0
    cursor = await conn.execute(
        "SELECT o.log_offset, m.id, m.data_subject_id, m.role, m.turn, m.content"
        " FROM observations o JOIN messages m ON m.observation_id = o.id"
        " WHERE o.project_id = %s AND o.log_offset > %s AND o.log_offset <= %s"
        " ORDER BY o.log_offset, m.ordinal LIMIT %s",
        (project_id, after, stored, limit + MAX_TURN_MESSAGES),
    )
    rows = await cursor.fetchall()
    through = _whole_turns(rows, limit, stored)
    rows = [row for row in rows if row[0] <= through]
    values: list[tuple[Any, ...]] = []
    if rows:
        # A text said again (an assistant's stock reply) is embedded once a pass.
        texts = list(dict.fromkeys(row[5] for row in rows))
        vectors = await asyncio.to_thread(embedder.embed, texts)
        forms = {text: packed(vector) for text, vector in zip(texts, vectors, strict=True)}
        values = [(project_id, row[2], row[3], row[4], forms[row[5]], row[1]) for row in rows]
    async with conn.transaction():
        await lock_erasures(conn, project_id, shared=True)
        if await generation(conn, project_id, embedder) != begun:
            return 0
        if (await progress(conn, project_id))[1] != after:
            return 0
        if values:
            async with conn.cursor() as writer:
                await writer.executemany(  # a message erased since it was read is skipped
                    "INSERT INTO message_vectors"
                    " (message_id, project_id, data_subject_id, role, turn, embedding)"
                    " SELECT m.id, %s, %s, %s, %s, %s::vector FROM messages m WHERE m.id = %s"
                    " ON CONFLICT DO NOTHING",
                    values,
                )
        await conn.execute(
            "UPDATE passage_progress SET vectors_through = %s WHERE project_id = %s",
            (through, project_id),
        )
    return len(rows)


def _whole_turns(rows: list[tuple[Any, ...]], limit: int, stored: int) -> int:
    """The last offset to embed through: whole turns of at most `limit` messages in all (at
    least one turn), or the stored offset once every remaining row is taken (turns left with no
    messages are passed over)."""
    sizes = Counter(row[0] for row in rows)
    taken = 0
    through = None
    for offset in sorted(sizes):
        if through is not None and taken + sizes[offset] > limit:
            return int(through)
        taken += sizes[offset]
        through = offset
    if len(rows) < limit + MAX_TURN_MESSAGES:
        return stored
    return int(through) if through is not None else stored
