"""Build the passage index: embed the messages of a project's turns in log order."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from satchel.memory.passages.embedder import Embedder, EmbedderUnavailable, Vectors
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


@dataclass(frozen=True, slots=True)
class PassageBatch:
    """The next whole turns' messages to embed: read at `generation`, after the project's
    vectors reached `after`, through offset `through` (of the `stored` ones then); `rows` are
    (offset, message id, subject, role, turn, content) and `texts` their distinct contents, in
    order."""

    project_id: int
    generation: uuid.UUID
    after: int
    through: int
    stored: int
    rows: list[tuple[Any, ...]]
    texts: list[str]

    @property
    def last(self) -> bool:
        """Whether it reaches the last turn stored when it was read."""
        return self.through >= self.stored


async def index_passages(conn: Conn, project_id: int, embedder: Embedder, limit: int = 256) -> int:
    """Embed the messages of the next turns in log order, whole turns and about `limit`
    messages at a time; how many were embedded (`next_passages`, the model in a thread, then
    `store_passages`)."""
    batch = await next_passages(conn, project_id, embedder, limit)
    if batch is None:
        return 0
    vectors = await asyncio.to_thread(embedder.embed, batch.texts) if batch.texts else None
    return await store_passages(conn, embedder, batch, vectors) or 0


async def next_passages(
    conn: Conn, project_id: int, embedder: Embedder, limit: int = 256, after: int | None = None
) -> PassageBatch | None:
    """The messages of the next whole turns, about `limit` in all, to embed; None when every
    stored turn has its vectors. `after`: the offset a batch not yet stored reaches, to read
    the batch that follows it (its store then checks that the one before was stored).

    They are read outside any transaction, and the caller embeds them outside any too, so no
    lock or transaction id is held while the model runs (one would hold back the pruning of
    every row updated meanwhile, the project's log row first).
    """
    async with conn.transaction():
        begun = await generation(conn, project_id, embedder)
        stored, reached, _ = await progress(conn, project_id)
    after = reached if after is None else after
    if stored <= after:
        return None
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
    # A text said again (an assistant's stock reply) is embedded once a batch.
    texts = list(dict.fromkeys(row[5] for row in rows))
    return PassageBatch(project_id, begun, after, through, stored, rows, texts)


async def store_passages(
    conn: Conn, embedder: Embedder, batch: PassageBatch, vectors: Vectors | None
) -> int | None:
    """Write the batch's vectors (`vectors[i]` is `batch.texts[i]`'s); how many messages.

    A short transaction locks the project's progress row and first checks that no other builder
    moved it and the generation is the same; otherwise nothing is written (None) and the next
    pass starts from where it is. It holds erasures off (`lock_erasures`) and writes vectors only of
    the messages still stored: one erased while it was embedded is passed over, as if it had
    never been read.
    """
    project_id = batch.project_id
    values: list[tuple[Any, ...]] = []
    if batch.rows:
        if vectors is None or len(vectors) != len(batch.texts):
            found = 0 if vectors is None else len(vectors)
            raise EmbedderUnavailable(
                f"the embedder answered {found} vectors for {len(batch.texts)} texts"
            )
        forms = {text: packed(vector) for text, vector in zip(batch.texts, vectors, strict=True)}
        values = [(project_id, r[2], r[3], r[4], forms[r[5]], r[1]) for r in batch.rows]
    async with conn.transaction():
        await lock_erasures(conn, project_id, shared=True)
        if await generation(conn, project_id, embedder) != batch.generation:
            return None
        if (await progress(conn, project_id))[1] != batch.after:
            return None
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
            (batch.through, project_id),
        )
    return len(batch.rows)


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
