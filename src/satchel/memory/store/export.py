"""Export: every row derived from a subject or from chosen observations, as raw JSON rows."""

from __future__ import annotations

from typing import Any

from satchel.memory.store.database import Conn
from satchel.memory.store.derived import Kind, Scope, kinds_for, mark

MAX_EXPORT_ROWS = 50_000
# Columns derived for search, not the person's data (and large): left out of exported rows.
DERIVED_COLUMNS = {"message": ("embedding", "search_text")}


class ExportTooLarge(Exception):
    """The scope holds more rows than one export may carry."""


def _row(kind: Kind) -> str:
    """A row as JSON without the internal project key or search columns; `bytea` columns (an
    artifact's content among them) as PostgreSQL renders them, `\\x` and hex."""
    return "to_jsonb(t) - 'project_id'" + "".join(
        f" - '{column}'" for column in DERIVED_COLUMNS.get(kind.name, ())
    )


async def export(conn: Conn, scope: Scope) -> dict[str, list[Any]]:
    """The scope's rows per kind, read in one snapshot; raises ExportTooLarge past the cap."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        await mark(conn, scope)
        kinds = kinds_for(scope)
        total = 0
        for kind in kinds:
            cursor = await conn.execute(kind.select("count(*)"), scope.params())
            row = await cursor.fetchone()
            assert row is not None
            total += row[0]
        if total > MAX_EXPORT_ROWS:
            raise ExportTooLarge(total)
        sections: dict[str, list[Any]] = {}
        for kind in kinds:
            cursor = await conn.execute(
                f"{kind.select(_row(kind))} ORDER BY {kind.order}", scope.params()
            )
            sections[kind.name] = [row[0] for row in await cursor.fetchall()]
    return sections
