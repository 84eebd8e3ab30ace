"""The observation log: contiguous per-project offsets and the formed watermark."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

Conn = AsyncConnection[Any]


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
