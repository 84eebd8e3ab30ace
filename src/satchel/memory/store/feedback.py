"""Feedback rows: reports about a record, their pages (newest first) and their promotion mark.
Each statement runs inside the caller's transaction, if any."""

from __future__ import annotations

import uuid
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.domain import Feedback
from satchel.memory.store.database import Conn

COLUMNS = (
    "id, fact_id, note, proposed_object, recorded_by, recorded_at, promoted_by, promoted_at,"
    " replacement_record_id"
)


async def record(
    conn: Conn,
    project_id: int,
    recorded_by: uuid.UUID,
    fact_id: uuid.UUID,
    note: str,
    proposed_object: str | None,
    at: datetime,
) -> Feedback | None:
    """Write a report about the project's fact `fact_id`; None when the project has no such fact.

    Nothing else is written: no fact, no observation, no log offset.
    """
    async with conn.cursor(row_factory=class_row(Feedback)) as cursor:
        await cursor.execute(
            "INSERT INTO feedback (id, project_id, fact_id, note, proposed_object, recorded_by,"
            " recorded_at) SELECT %s, f.project_id, f.id, %s, %s, %s, %s FROM facts f"
            f" WHERE f.project_id = %s AND f.id = %s RETURNING {COLUMNS}",
            (uuid.uuid4(), note, proposed_object, recorded_by, at, project_id, fact_id),
        )
        return await cursor.fetchone()


def page_sql(*, by_record: bool, open_only: bool, after: bool) -> str:
    """The statement of one kind of page; each reads its index in page order and never sorts:
    `feedback_record` for one record, `feedback_open` for the open queue, else `feedback_page`."""
    where = ["project_id = %(p)s"]
    if by_record:
        where.append("fact_id = %(f)s")
    if open_only:
        where.append("promoted_at IS NULL")
    if after:
        where.append("(recorded_at, id) < (%(at)s, %(id)s)")
    return (
        f"SELECT {COLUMNS} FROM feedback WHERE {' AND '.join(where)}"
        " ORDER BY recorded_at DESC, id DESC LIMIT %(n)s"
    )


async def page(
    conn: Conn,
    project_id: int,
    fact_id: uuid.UUID | None,
    open_only: bool,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Feedback]:
    """Up to `limit` reports of the project (or of one record), newest first, after `after`."""
    sql = page_sql(by_record=fact_id is not None, open_only=open_only, after=after is not None)
    params = {
        "p": project_id,
        "f": fact_id,
        "at": after[0] if after else None,
        "id": after[1] if after else None,
        "n": limit,
    }
    async with conn.cursor(row_factory=class_row(Feedback)) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchall()


async def lock(conn: Conn, project_id: int, feedback_id: uuid.UUID) -> Feedback | None:
    """The project's report `feedback_id`, locked until the transaction ends (promotions queue)."""
    async with conn.cursor(row_factory=class_row(Feedback)) as cursor:
        await cursor.execute(
            f"SELECT {COLUMNS} FROM feedback WHERE project_id = %s AND id = %s FOR UPDATE",
            (project_id, feedback_id),
        )
        return await cursor.fetchone()


async def mark_promoted(
    conn: Conn,
    feedback_id: uuid.UUID,
    promoted_by: uuid.UUID,
    at: datetime,
    replacement_record_id: uuid.UUID | None,
) -> None:
    """Note that a locked, open report was promoted (once: the row's check keeps it whole)."""
    await conn.execute(
        "UPDATE feedback SET promoted_by = %s, promoted_at = %s, replacement_record_id = %s"
        " WHERE id = %s AND promoted_at IS NULL",
        (promoted_by, at, replacement_record_id, feedback_id),
    )
