"""Formation receipts' statements: write what one formation of a source admitted, mark facts
withdrawn, and read each source's newest receipt. Each runs inside the caller's transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import class_row

from satchel.memory.domain import Extractor
from satchel.memory.store.database import Conn

# One admitted fact as the receipt keeps it: the row as written, its entities' names and ids,
# and its evidence in order.
FACT_JSON = (
    "jsonb_build_object('id', f.id, 'subject_entity_id', f.subject_entity_id,"
    " 'subject', s.name, 'predicate', f.predicate, 'object', f.object,"
    " 'object_entity_id', f.object_entity_id, 'object_name', o.name,"
    " 'statement', f.statement, 'confidence', f.confidence, 'source_role', f.source_role,"
    " 'version', f.version, 'valid_from', f.valid_from, 'known_from', f.known_from,"
    " 'recorded_at', f.recorded_at, 'generation_id', f.generation_id,"
    " 'evidence', (SELECT coalesce(jsonb_agg(to_jsonb(e) - 'fact_id'"
    "  ORDER BY e.observation_id, e.source_ordinal), '[]') FROM fact_evidence e"
    "  WHERE e.fact_id = f.id))"
)


@dataclass(frozen=True, slots=True)
class Receipt:
    """The newest formation of one source: the facts it admitted, and which were withdrawn."""

    id: uuid.UUID
    observation_id: uuid.UUID
    data_subject_id: str | None
    formed_at: datetime
    facts: list[dict[str, Any]]
    withdrawn: list[uuid.UUID]


async def write(
    conn: Conn,
    project_id: int,
    observation_id: uuid.UUID,
    data_subject_id: str | None,
    extractor: Extractor,
    at: datetime,
    fact_ids: list[uuid.UUID],
) -> None:
    """The receipt of the formation of `observation_id` at `at`: the facts `fact_ids` as they
    were written, in that order."""
    await conn.execute(
        "INSERT INTO fact_receipts (id, project_id, data_subject_id, observation_id,"
        " formed_at, extractor_model, extractor_prompt, extractor_code, facts)"
        f" SELECT %s, %s, %s, %s, %s, %s, %s, %s, coalesce(jsonb_agg({FACT_JSON} ORDER BY a.n),"
        " '[]') FROM unnest(%s::uuid[]) WITH ORDINALITY AS a(id, n)"
        " JOIN facts f ON f.id = a.id JOIN entities s ON s.id = f.subject_entity_id"
        " LEFT JOIN entities o ON o.id = f.object_entity_id",
        (
            uuid.uuid4(),
            project_id,
            data_subject_id,
            observation_id,
            at,
            extractor.model,
            extractor.prompt,
            extractor.code,
            fact_ids,
        ),
    )


async def withdraw(conn: Conn, chosen: str, params: dict[str, Any]) -> None:
    """Mark the facts `chosen` (a parenthesized query of fact ids, with its `params`) withdrawn
    in their sources' receipts, so recovery never restores them."""
    await conn.execute(
        "UPDATE fact_receipts r SET withdrawn = r.withdrawn || ARRAY(SELECT f.id FROM facts f"
        f" WHERE f.source_observation_id = r.observation_id AND f.id IN {chosen}"
        " AND f.id <> ALL(r.withdrawn)) WHERE r.observation_id IN (SELECT source_observation_id"
        f" FROM facts WHERE id IN {chosen})",
        params,
    )


async def newest(conn: Conn, project_id: int, source: uuid.UUID | None) -> list[Receipt]:
    """The newest receipt of each of the project's sources (or of `source` alone), in the order
    the sources were formed."""
    async with conn.cursor(row_factory=class_row(Receipt)) as cursor:
        await cursor.execute(
            "SELECT * FROM (SELECT DISTINCT ON (observation_id) id, observation_id,"
            " data_subject_id, formed_at, facts, withdrawn FROM fact_receipts"
            " WHERE project_id = %(p)s AND (%(o)s::uuid IS NULL OR observation_id = %(o)s)"
            " ORDER BY observation_id, formed_at DESC, id DESC) newest ORDER BY formed_at, id",
            {"p": project_id, "o": source},
        )
        return await cursor.fetchall()
