"""Retention's statements: projects' policies, their expired turns and idle subjects, and the
receipts of sweeps."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from satchel.memory.store.database import Conn

LOCK_NAME = "satchel.memory.retention"
MAX_INACTIVE = 1_000  # idle subjects named in one receipt; the rest are only counted


@dataclass(frozen=True, slots=True)
class Policy:
    """A project's policy: turns are kept `keep_days` after they were stored; a subject with no
    turn stored in `inactive_after_days` is reported (None: never)."""

    project_id: int
    project: str
    keep_days: int
    inactive_after_days: int | None
    updated_at: datetime

    def deadline(self, now: datetime) -> datetime:
        """Turns stored before this instant have expired at `now`."""
        return now - timedelta(days=self.keep_days)


@dataclass(frozen=True, slots=True)
class Sweep:
    """One sweep's receipt for one project."""

    id: uuid.UUID
    project: str
    swept_at: datetime
    now_used: datetime
    deadline: datetime | None
    deleted: dict[str, int]
    residual: dict[str, int]
    inactive: list[dict[str, Any]]

    @property
    def clean(self) -> bool:
        return not any(self.residual.values())


_POLICY = (
    "SELECT r.project_id, p.name, r.keep_days, r.inactive_after_days, r.updated_at"
    " FROM retention_policies r JOIN projects p ON p.id = r.project_id"
)


async def project_id(conn: Conn, name: str) -> int | None:
    cursor = await conn.execute("SELECT id FROM projects WHERE name = %s", (name,))
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def project_ids(conn: Conn) -> list[int]:
    """Every project, oldest first."""
    cursor = await conn.execute("SELECT id FROM projects ORDER BY id")
    return [row[0] for row in await cursor.fetchall()]


async def set_policy(
    conn: Conn, project_id: int, keep_days: int, inactive_after_days: int | None
) -> None:
    await conn.execute(
        "INSERT INTO retention_policies (project_id, keep_days, inactive_after_days)"
        " VALUES (%s, %s, %s) ON CONFLICT (project_id) DO UPDATE SET"
        " keep_days = excluded.keep_days, inactive_after_days = excluded.inactive_after_days,"
        " updated_at = now()",
        (project_id, keep_days, inactive_after_days),
    )


async def clear_policy(conn: Conn, project_id: int) -> bool:
    cursor = await conn.execute(
        "DELETE FROM retention_policies WHERE project_id = %s", (project_id,)
    )
    return cursor.rowcount > 0


async def policies(conn: Conn, project_id: int | None = None) -> list[Policy]:
    cursor = await conn.execute(
        _POLICY + " WHERE %(p)s::bigint IS NULL OR r.project_id = %(p)s ORDER BY p.name",
        {"p": project_id},
    )
    return [Policy(*row) for row in await cursor.fetchall()]


async def lock_sweeps(conn: Conn, project_id: int) -> None:
    """Inside a transaction: the project's sweep lock until it ends, so two sweepers take turns
    and the second finds only what the first left."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(%s::int, hashtext(%s))", (project_id, LOCK_NAME)
    )


async def expired_turns(
    conn: Conn, project_id: int, deadline: datetime, limit: int
) -> list[uuid.UUID]:
    """Up to `limit` of the project's observed turns stored before `deadline`, oldest first."""
    cursor = await conn.execute(
        "SELECT id FROM observations WHERE project_id = %s AND kind = 'turn'"
        " AND stored_at < %s ORDER BY stored_at LIMIT %s",
        (project_id, deadline, limit),
    )
    return [row[0] for row in await cursor.fetchall()]


async def anything_expired(conn: Conn, project_id: int) -> bool:
    """Whether the project has a policy and a turn stored before its deadline at the
    database's clock."""
    cursor = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM retention_policies r JOIN observations o"
        " ON o.project_id = r.project_id AND o.kind = 'turn'"
        " AND o.stored_at < clock_timestamp() - make_interval(days => r.keep_days)"
        " WHERE r.project_id = %s)",
        (project_id,),
    )
    row = await cursor.fetchone()
    return bool(row and row[0])


async def count_expired(
    conn: Conn, project_id: int, deadline: datetime | None, at: datetime
) -> dict[str, int]:
    """What is left past its deadline: turns stored before `deadline` (when there is one) and
    artifacts expired at `at`, counted again."""
    cursor = await conn.execute(
        "SELECT (SELECT count(*) FROM observations WHERE project_id = %(p)s AND kind = 'turn'"
        "  AND stored_at < %(d)s),"
        " (SELECT count(*) FROM artifacts WHERE project_id = %(p)s AND expires_at <= %(at)s)",
        {"p": project_id, "d": deadline, "at": at},
    )
    row = await cursor.fetchone()
    assert row is not None
    left = {"agent_artifact": int(row[1])}
    if deadline is not None:
        left["observation"] = int(row[0])
    return left


async def inactive_subjects(
    conn: Conn, project_id: int, idle_since: datetime
) -> list[dict[str, Any]]:
    """Up to `MAX_INACTIVE` of the project's subjects none of whose turns was stored since
    `idle_since`, longest idle first, with when each last had a turn stored."""
    cursor = await conn.execute(
        "SELECT data_subject_id, max(stored_at) AS last FROM observations"
        " WHERE project_id = %s AND kind = 'turn' AND data_subject_id IS NOT NULL"
        " GROUP BY data_subject_id HAVING max(stored_at) < %s"
        " ORDER BY last, data_subject_id LIMIT %s",
        (project_id, idle_since, MAX_INACTIVE),
    )
    return [
        {"data_subject_id": subject, "last_stored_at": last.isoformat()}
        for subject, last in await cursor.fetchall()
    ]


async def write_receipt(
    conn: Conn,
    project_id: int,
    now: datetime,
    deadline: datetime | None,
    deleted: dict[str, int],
    residual: dict[str, int],
    inactive: list[dict[str, Any]],
) -> Sweep:
    cursor = await conn.execute(
        "INSERT INTO retention_sweeps (id, project_id, now_used, deadline, deleted, residual,"
        " inactive) VALUES (%s, %s, %s, %s, %s, %s, %s)"
        " RETURNING id, (SELECT name FROM projects WHERE id = %s), swept_at, now_used, deadline,"
        " deleted, residual, inactive",
        (
            uuid.uuid4(),
            project_id,
            now,
            deadline,
            Jsonb(deleted),
            Jsonb(residual),
            Jsonb(inactive),
            project_id,
        ),
    )
    row = await cursor.fetchone()
    assert row is not None
    return Sweep(*row)


async def receipts(conn: Conn, project_id: int | None, limit: int) -> list[Sweep]:
    """The latest `limit` sweep receipts, of one project or of all, newest first."""
    cursor = await conn.execute(
        "SELECT s.id, p.name, s.swept_at, s.now_used, s.deadline, s.deleted, s.residual,"
        " s.inactive FROM retention_sweeps s JOIN projects p ON p.id = s.project_id"
        " WHERE %(p)s::bigint IS NULL OR s.project_id = %(p)s"
        " ORDER BY s.swept_at DESC, s.id DESC LIMIT %(n)s",
        {"p": project_id, "n": limit},
    )
    return [Sweep(*row) for row in await cursor.fetchall()]
