"""The observation log: appending turns (idempotently), contiguous per-project offsets and the
formed watermark."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, AsyncCursor

Conn = AsyncConnection[Any]

# One round trip: claim the next offset (moving `formed` with it when this turn is formed at
# once and none before it waits), then write the turn, its messages and its retry key.
APPEND = (
    "WITH claimed AS (UPDATE projects SET stored = COALESCE(stored, -1) + 1,"
    " formed = CASE WHEN %(formed)s AND NOT EXISTS (SELECT 1 FROM observations u"
    "  WHERE u.project_id = %(p)s AND u.formed_at IS NULL AND u.parked_at IS NULL)"
    "  THEN COALESCE(stored, -1) + 1 ELSE formed END"
    " WHERE id = %(p)s RETURNING stored),"
    " turn AS (INSERT INTO observations (id, project_id, log_offset, data_subject_id,"
    "  occurred_at, formed_at) SELECT %(o)s, %(p)s, stored, %(s)s, %(t)s,"
    "  CASE WHEN %(formed)s THEN now() END FROM claimed RETURNING id, log_offset),"
    " said AS (INSERT INTO messages (id, observation_id, project_id, data_subject_id, ordinal,"
    "  role, content, group_ordinal, occurred_at)"
    "  SELECT m.id, turn.id, %(p)s, %(s)s, m.n - 1, m.role, m.content, m.g, m.at FROM turn,"
    "  unnest(%(ids)s::uuid[], %(roles)s::text[], %(contents)s::text[], %(groups)s::int[],"
    "  %(times)s::timestamptz[]) WITH ORDINALITY AS m(id, role, content, g, at, n)),"
    " keyed AS (INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
    "  SELECT %(p)s, %(d)s, %(f)s, turn.id FROM turn WHERE %(d)s::bytea IS NOT NULL)"
    " SELECT log_offset FROM turn"
)


@dataclass(frozen=True, slots=True)
class Said:
    """One message of a turn to append: role, content, group ordinal, time (UTC)."""

    role: str
    content: str
    group: int
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class Retry:
    """What a retry key already names: its fingerprint, and its turn (None once erased)."""

    fingerprint: bytes
    observation_id: uuid.UUID | None
    log_offset: int | None


async def retried(conn: Conn, project_id: int, key: uuid.UUID, digest: bytes) -> Retry | None:
    """Serialize attempts with one retry key until the transaction ends; what it names, if any."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (project_id, str(key)))
    cursor = await conn.execute(
        "SELECT r.fingerprint, o.id, o.log_offset FROM retry_keys r "
        "LEFT JOIN observations o ON o.id = r.observation_id "
        "WHERE r.project_id = %s AND r.key_digest = %s",
        (project_id, digest),
    )
    row = await cursor.fetchone()
    return None if row is None else Retry(bytes(row[0]), row[1], row[2])


async def append(
    conn: Conn,
    project_id: int,
    observation_id: uuid.UUID,
    subject: str | None,
    occurred_at: datetime,
    messages: list[Said],
    *,
    formed: bool,
    digest: bytes | None,
    fingerprint: bytes,
) -> AsyncCursor[Any]:
    """Send the one statement that appends a turn; `offset_of` its cursor reads the log offset.
    `digest`: the retry key's digest to remember with the turn's `fingerprint` (None: no key);
    `formed`: the turn counts as formed at once (no worker forms it).

    The statement locks the project's row until the transaction ends. In a pipeline, read the
    offset after the transaction block: its COMMIT then goes out with the statement, and the
    lock is held for the statement and the commit alone, not while the answer travels back."""
    return await conn.execute(
        APPEND,
        {
            "p": project_id,
            "o": observation_id,
            "s": subject,
            "t": occurred_at,
            "formed": formed,
            "d": digest,
            "f": fingerprint,
            "ids": [uuid.uuid4() for _ in messages],
            "roles": [m.role for m in messages],
            "contents": [m.content for m in messages],
            "groups": [m.group for m in messages],
            "times": [m.occurred_at for m in messages],
        },
    )


async def offset_of(appended: AsyncCursor[Any]) -> int:
    """The log offset `append` claimed."""
    row = await appended.fetchone()
    assert row is not None
    offset: int = row[0]
    return offset


async def claim_offset(conn: Conn, project_id: int) -> int:
    """Claim the next log offset inside the caller's transaction (a rollback leaves no gap)."""
    cursor = await conn.execute(
        "UPDATE projects SET stored = COALESCE(stored, -1) + 1 WHERE id = %s RETURNING stored",
        (project_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    offset: int = row[0]
    return offset


async def recompute_formed(conn: Conn, project_id: int) -> None:
    """`formed` is one below the lowest turn neither formed nor parked, else the highest claimed
    offset (`stored`), so erasing the newest turns does not move it back."""
    await conn.execute(
        "UPDATE projects SET formed = ("
        " SELECT CASE WHEN u.low IS NULL THEN projects.stored WHEN u.low = 0 THEN NULL"
        "  ELSE u.low - 1 END"
        " FROM (SELECT min(log_offset) AS low FROM observations WHERE project_id = %(p)s"
        "       AND formed_at IS NULL AND parked_at IS NULL) u"
        ") WHERE id = %(p)s",
        {"p": project_id},
    )


async def freshness(conn: Conn, project_id: int) -> dict[str, Any]:
    cursor = await conn.execute(
        "SELECT p.name, p.stored, p.formed,"
        " (SELECT count(*) FROM observations o WHERE o.project_id = p.id"
        "  AND o.parked_at IS NOT NULL) FROM projects p WHERE p.id = %s",
        (project_id,),
    )
    row = await cursor.fetchone()
    assert row is not None
    return {"scope": row[0], "stored": row[1], "formed": row[2], "parked": row[3]}
