"""Export's statements: every row derived from a subject or from chosen observations, as raw JSON
rows, read inside the caller's transaction."""

from __future__ import annotations

from typing import Any

from satchel.memory.store.database import Conn
from satchel.memory.store.derived import Kind, Scope, kinds_for, mark

# Columns derived for search, not the person's data (and large): left out of exported rows.
DERIVED_COLUMNS = {"message": ("embedding", "search_text"), "report": ("embedding",)}


def _row(kind: Kind) -> str:
    """A row as JSON without the internal project key or search columns; `bytea` columns (an
    artifact's content among them) as PostgreSQL renders them, `\\x` and hex."""
    return "to_jsonb(t) - 'project_id'" + "".join(
        f" - '{column}'" for column in DERIVED_COLUMNS.get(kind.name, ())
    )


async def snapshot(conn: Conn, scope: Scope) -> tuple[Kind, ...]:
    """Make the transaction read one snapshot and mark the scope; the kinds it covers."""
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    await mark(conn, scope)
    return kinds_for(scope)


async def row_count(conn: Conn, scope: Scope, kinds: tuple[Kind, ...]) -> int:
    """How many rows of `kinds` the scope holds."""
    total = 0
    for kind in kinds:
        cursor = await conn.execute(kind.select("count(*)"), scope.params())
        row = await cursor.fetchone()
        assert row is not None
        total += row[0]
    return total


async def sections(conn: Conn, scope: Scope, kinds: tuple[Kind, ...]) -> dict[str, list[Any]]:
    """The scope's rows per kind, each kind's in its order."""
    found: dict[str, list[Any]] = {}
    for kind in kinds:
        cursor = await conn.execute(
            f"{kind.select(_row(kind))} ORDER BY {kind.order}", scope.params()
        )
        found[kind.name] = [row[0] for row in await cursor.fetchall()]
    return found
