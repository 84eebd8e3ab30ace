"""Exact counts of each project's log for the operator's health report: a scan of the turns, so
run on demand, never by a scrape."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store.database import Conn


@dataclass(frozen=True, slots=True)
class ProjectCounts:
    """A project's turns: stored now, formed, waiting to be formed, parked; when the oldest
    waiting one was stored."""

    project: str
    stored: int
    formed: int
    pending: int
    parked: int
    oldest_pending_at: datetime | None


async def project_counts(conn: Conn) -> list[ProjectCounts]:
    """Every project's counts, by name."""
    async with conn.cursor(row_factory=class_row(ProjectCounts)) as cursor:
        await cursor.execute(
            "SELECT p.name AS project, count(o.id) AS stored,"
            " count(o.id) FILTER (WHERE o.formed_at IS NOT NULL) AS formed,"
            " count(o.id) FILTER (WHERE o.formed_at IS NULL AND o.parked_at IS NULL) AS pending,"
            " count(o.id) FILTER (WHERE o.parked_at IS NOT NULL) AS parked,"
            " min(o.stored_at) FILTER (WHERE o.formed_at IS NULL AND o.parked_at IS NULL)"
            "  AS oldest_pending_at"
            " FROM projects p LEFT JOIN observations o ON o.project_id = p.id"
            " GROUP BY p.name ORDER BY p.name"
        )
        return await cursor.fetchall()


async def database_now(conn: Conn) -> datetime:
    """The database's clock, which every stored time was taken by."""
    cursor = await conn.execute("SELECT now()")
    row = await cursor.fetchone()
    assert row is not None
    now: datetime = row[0]
    return now
