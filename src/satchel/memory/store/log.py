"""The observation log: appending turns (idempotently), contiguous per-project offsets and the
formed watermark.

An append claims offsets only while the project's backlog (its offsets above the formed
watermark: `stored - formed`, both on the project's row, which the append locks anyway) stays
within the limit it is given; otherwise it writes nothing, and a retry key already used still
answers what it names.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from satchel.memory.store.database import Conn
from satchel.memory.store.notifications import SAVE_DELIVERIES

# The messages of the turns written, in one insert.
_SAID = (
    " said AS (INSERT INTO messages (id, observation_id, project_id, data_subject_id, ordinal,"
    "  role, content, group_ordinal, occurred_at)"
    "  SELECT m.id, m.turn, %(p)s, m.subject, m.ordinal, m.role, m.content, m.g, m.at"
    "  FROM unnest(%(mids)s::uuid[], %(mturns)s::uuid[], %(msubjects)s::text[],"
    "  %(ordinals)s::int[], %(roles)s::text[], %(contents)s::text[], %(groups)s::int[],"
    "  %(times)s::timestamptz[]) AS m(id, turn, subject, ordinal, role, content, g, at)"
    "  JOIN turn ON turn.id = m.turn),"
)
# One statement, committed by itself, for one turn: what its retry key already names, if
# anything; else claim the next offset and write the turn, its messages and its retry key.
_APPEND_ONE = (
    "WITH seen AS (SELECT r.fingerprint, o.id, o.log_offset FROM retry_keys r"
    "  LEFT JOIN observations o ON o.id = r.observation_id"
    "  WHERE r.project_id = %(p)s AND r.key_digest = (%(d)s::bytea[])[1]),"
    " claimed AS (UPDATE projects SET stored = COALESCE(stored, -1) + 1{moved}"
    "  WHERE id = %(p)s AND NOT EXISTS (SELECT 1 FROM seen)"
    "  AND COALESCE(stored, -1) - COALESCE(formed, -1) < %(backlog)s RETURNING stored),"
    " turn AS (INSERT INTO observations (id, project_id, log_offset, data_subject_id,"
    "  occurred_at, formed_at) SELECT (%(o)s::uuid[])[1], %(p)s, stored, (%(s)s::text[])[1],"
    "  (%(t)s::timestamptz[])[1], CASE WHEN %(formed)s THEN now() END FROM claimed"
    "  RETURNING id, log_offset),"
    + _SAID
    + " keyed AS (INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
    "  SELECT %(p)s, (%(d)s::bytea[])[1], (%(f)s::bytea[])[1], turn.id FROM turn"
    "  WHERE (%(d)s::bytea[])[1] IS NOT NULL)"
    " SELECT 1::bigint, log_offset, NULL::bytea, NULL::uuid FROM turn"
    " UNION ALL SELECT 1, log_offset, fingerprint, id FROM seen"
)
# The same for a group of turns: the turns whose keys are not seen claim that many offsets at
# once, in the group's order.
_APPEND_GROUP = (
    "WITH given AS (SELECT * FROM unnest(%(o)s::uuid[], %(s)s::text[], %(t)s::timestamptz[],"
    "  %(d)s::bytea[], %(f)s::bytea[]) WITH ORDINALITY AS g(id, subject, at, digest, print, n)),"
    " seen AS (SELECT g.n, r.fingerprint, o.id, o.log_offset FROM given g"
    "  JOIN retry_keys r ON r.project_id = %(p)s AND r.key_digest = g.digest"
    "  LEFT JOIN observations o ON o.id = r.observation_id),"
    " fresh AS (SELECT g.*, row_number() OVER (ORDER BY g.n) AS k,"
    "  count(*) OVER () AS total FROM given g WHERE g.n NOT IN (SELECT n FROM seen)),"
    " claimed AS (UPDATE projects SET stored = COALESCE(stored, -1)"
    "  + (SELECT count(*) FROM fresh){moved}"
    "  WHERE id = %(p)s AND EXISTS (SELECT 1 FROM fresh)"
    "  AND COALESCE(stored, -1) - COALESCE(formed, -1) + (SELECT count(*) FROM fresh)"
    "  <= %(backlog)s RETURNING stored),"
    " turn AS (INSERT INTO observations (id, project_id, log_offset, data_subject_id,"
    "  occurred_at, formed_at) SELECT f.id, %(p)s, c.stored - f.total + f.k, f.subject, f.at,"
    "  CASE WHEN %(formed)s THEN now() END FROM fresh f, claimed c"
    "  RETURNING id, log_offset),"
    + _SAID
    + " keyed AS (INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
    "  SELECT %(p)s, f.digest, f.print, f.id FROM fresh f JOIN turn ON turn.id = f.id"
    "  WHERE f.digest IS NOT NULL)"
    " SELECT f.n, turn.log_offset, NULL::bytea, NULL::uuid FROM fresh f"
    "  JOIN turn ON turn.id = f.id"
    " UNION ALL SELECT n, log_offset, fingerprint, id FROM seen"
)
# For turns formed at once: `formed` moves with the claim when no turn before them waits. Only
# in these statements, never behind a parameter in the others: an append that waited for the
# project's row evaluates every subquery of the update again, and this one reads the
# unformed turns.
_MOVED = (
    ", formed = CASE WHEN NOT EXISTS (SELECT 1 FROM observations u"
    "  WHERE u.project_id = %(p)s AND u.formed_at IS NULL AND u.parked_at IS NULL)"
    "  THEN COALESCE(stored, -1) + {claimed} ELSE formed END"
)
APPEND: dict[tuple[bool, bool], str] = {  # by (one turn, formed at once)
    (True, True): _APPEND_ONE.format(moved=_MOVED.format(claimed="1")),
    (True, False): _APPEND_ONE.format(moved=""),
    (False, True): _APPEND_GROUP.format(
        moved=_MOVED.format(claimed="(SELECT count(*) FROM fresh)")
    ),
    (False, False): _APPEND_GROUP.format(moved=""),
}
RETRY_KEY = "retry_keys_pkey"  # the constraint a concurrent first attempt with a key trips


@dataclass(frozen=True, slots=True)
class NewMessage:
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


@dataclass(frozen=True, slots=True)
class NewTurn:
    """A turn to append: its id, subject, time, messages, and its retry key's digest (None:
    no key) with the fingerprint a retry must repeat."""

    observation_id: uuid.UUID
    subject: str | None
    occurred_at: datetime
    messages: list[NewMessage]
    digest: bytes | None
    fingerprint: bytes

    @property
    def size(self) -> int:
        return sum(len(m.content) for m in self.messages)


async def append_group(
    conn: Conn, project_id: int, turns: list[NewTurn], *, formed: bool, backlog: int
) -> list[int | Retry | None]:
    """Append `turns` (no two with one retry key) in one statement that commits itself (`conn`
    autocommits), so the project's row is locked for that statement and its commit alone; for
    each turn, its log offset, or what its retry key already names (it is then not written), or
    None when the new turns would take the project's backlog past `backlog` offsets (none of
    them is written). `formed`: the turns count as formed at once (no worker forms them)."""
    said = [(turn, m) for turn in turns for m in turn.messages]
    ordinals = [i for turn in turns for i in range(len(turn.messages))]
    cursor = await conn.execute(
        APPEND[len(turns) == 1, formed],
        {
            "p": project_id,
            "formed": formed,
            "backlog": backlog,
            "o": [turn.observation_id for turn in turns],
            "s": [turn.subject for turn in turns],
            "t": [turn.occurred_at for turn in turns],
            "d": [turn.digest for turn in turns],
            "f": [turn.fingerprint for turn in turns],
            "mids": [uuid.uuid4() for _ in said],
            "mturns": [turn.observation_id for turn, _ in said],
            "msubjects": [turn.subject for turn, _ in said],
            "ordinals": ordinals,
            "roles": [m.role for _, m in said],
            "contents": [m.content for _, m in said],
            "groups": [m.group for _, m in said],
            "times": [m.occurred_at for _, m in said],
        },
    )
    outcomes: dict[int, int | Retry] = {}
    for n, offset, seen, observation in await cursor.fetchall():
        outcomes[n] = offset if seen is None else Retry(bytes(seen), observation, offset)
    return [outcomes.get(n) for n in range(1, len(turns) + 1)]


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


# The one statement that moves the formed watermark, saving a notification delivery for each of
# the project's live endpoints when it moved forward.
_RECOMPUTE_FORMED = (
    "WITH moved AS (UPDATE projects SET turn_revision = turn_revision + 1, formed = ("
    " SELECT CASE WHEN u.low IS NULL THEN projects.stored WHEN u.low = 0 THEN NULL"
    "  ELSE u.low - 1 END"
    " FROM (SELECT min(log_offset) AS low FROM observations WHERE project_id = %(p)s"
    "       AND formed_at IS NULL AND parked_at IS NULL) u"
    ") WHERE id = %(p)s RETURNING old.formed AS was, new.formed AS formed, new.stored AS stored),"
    + SAVE_DELIVERIES
)


async def recompute_formed(conn: Conn, project_id: int) -> None:
    """`formed` is one below the lowest turn neither formed nor parked, else the highest claimed
    offset (`stored`), so erasing the newest turns does not move it back; the project's turn
    revision counts one up. When `formed` moves forward, a notification delivery is saved in
    the same statement for each of the project's live endpoints."""
    await conn.execute(_RECOMPUTE_FORMED, {"p": project_id})


TurnState = tuple[int | None, int | None, int]


async def turn_state(conn: Conn, project_id: int) -> TurnState:
    """The project's highest claimed offset, formed watermark and turn revision: while all three
    stay the same, no turn of the project was appended, formed, parked, unparked or erased."""
    cursor = await conn.execute(
        "SELECT stored, formed, turn_revision FROM projects WHERE id = %s", (project_id,)
    )
    row = await cursor.fetchone()
    return (None, None, -1) if row is None else (row[0], row[1], row[2])


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
