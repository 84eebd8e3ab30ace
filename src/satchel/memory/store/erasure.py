"""Erasure's statements: delete every row derived from a subject or from chosen observations."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb

from satchel.memory.store.database import Conn
from satchel.memory.store.derived import SOURCES, Kind, Scope, kinds_for, mark
from satchel.memory.store.log import recompute_formed
from satchel.memory.store.terms import counted_subjects, recount

LOCK_NAME = "satchel.memory.erasure"

# The order rows go in: feedback and evidence before facts, facts before the entities they name,
# everything before the observations whose deletion would otherwise cascade. Reports go first:
# deleting a fact they drew on would remove them uncounted.
ORDER = (
    "report",
    "feedback",
    "fact_evidence",
    "fact_history",
    "record_retraction",
    "fact",
    "entity",
    "segment",
    "rejected_claim",
    "fact_receipt",
    "agent_artifact",
    "data_subject",
    "message",
    "observation",
)


@dataclass(frozen=True, slots=True)
class Erased:
    """What one erasure did: rows deleted and rows of the same predicates left, per kind."""

    id: uuid.UUID
    completed_at: datetime
    deleted: dict[str, int]
    residual: dict[str, int]

    @property
    def clean(self) -> bool:
        return not any(self.residual.values())


async def lock_erasures(conn: Conn, project_id: int, *, shared: bool) -> None:
    """Inside a transaction: the project's erasure lock until it ends. An erasure takes it alone;
    a writer of rows that refer to messages it read earlier, outside any transaction, takes it
    shared, so no erasure commits between its check that those messages remain and its write."""
    take = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    await conn.execute(f"SELECT {take}(%s::int, hashtext(%s))", (project_id, LOCK_NAME))


async def _count(conn: Conn, sql: str, scope: Scope) -> int:
    cursor = await conn.execute(sql, scope.params())
    row = await cursor.fetchone()
    assert row is not None
    count: int = row[0]
    return count


async def _delete(conn: Conn, kind: Kind, scope: Scope) -> int:
    if kind.name == "agent_artifact":
        await conn.execute(
            "INSERT INTO artifact_tombstones (project_id, id)"
            f" {kind.select('t.project_id, t.id')} ON CONFLICT DO NOTHING",
            scope.params(),
        )
    if kind.name == "data_subject":
        # The registration key stays used (a delayed retry conflicts) but forgets the fields.
        await conn.execute(
            "UPDATE retry_keys SET fingerprint = ''::bytea WHERE project_id = %(p)s"
            f" AND key_digest IN ({kind.select('t.key_digest')})",
            scope.params(),
        )
    if kind.name == "observation":
        await conn.execute(
            "UPDATE retry_keys SET observation_id = NULL, fingerprint = ''::bytea"
            f" WHERE project_id = %(p)s AND observation_id IN {SOURCES}",
            scope.params(),
        )
    cursor = await conn.execute(kind.delete(), scope.params())
    if kind.detach is not None:
        await conn.execute(kind.detach, scope.params())
    return cursor.rowcount


async def remove(conn: Conn, scope: Scope) -> tuple[dict[str, int], dict[str, int]]:
    """Delete the scope's rows kind by kind and count again what is left of each, inside the
    caller's transaction: (deleted, residual). The project's row is locked first, so no turn of
    the scope can be appended meanwhile, then the erasure lock, so no vectors of its messages
    are being written."""
    await conn.execute(
        "SELECT 1 FROM projects WHERE id = %s FOR NO KEY UPDATE", (scope.project_id,)
    )
    await lock_erasures(conn, scope.project_id, shared=False)
    await mark(conn, scope)
    kinds = {kind.name: kind for kind in kinds_for(scope)}
    touched: list[str] = []
    if "message" in kinds:
        touched = await counted_subjects(conn, kinds["message"].where, scope.params())
    deleted: dict[str, int] = {}
    for name in ORDER:
        if name in kinds:
            deleted[name] = await _delete(conn, kinds[name], scope)
    await recount(conn, scope.project_id, touched)
    residual = {
        name: await _count(conn, kind.select("count(*)"), scope)
        for name, kind in kinds.items()
        if name != "observation"
    }
    await recompute_formed(conn, scope.project_id)
    return deleted, residual


async def erase(conn: Conn, scope: Scope, reason: str | None) -> Erased:
    """Remove the scope's rows and write the erasure's receipt, inside the caller's transaction."""
    deleted, residual = await remove(conn, scope)
    cursor = await conn.execute(
        "INSERT INTO erasures (id, project_id, reason, deleted, residual)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id, completed_at",
        (uuid.uuid4(), scope.project_id, reason, Jsonb(deleted), Jsonb(residual)),
    )
    row = await cursor.fetchone()
    assert row is not None
    return Erased(row[0], row[1], deleted, residual)
