"""Citations: a fact's record with a page of its evidence, each quote in its message's context."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import NotFound, TooLargeToAnswer
from satchel.memory.store.citations import Cited, Evidence, cited, evidence_page, largest_source
from satchel.memory.store.facts import Retraction, retraction_of

MAX_SOURCE_BYTES = 256 * 1024
MAX_STATEMENT_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Citation:
    """A fact, one page of its evidence, the page's last piece when more follow (else None), and
    the fact's retraction if it was retracted."""

    fact: Cited
    evidence: list[Evidence]
    last: Evidence | None
    retraction: Retraction | None


async def resolve(
    pool: AsyncConnectionPool,
    project_id: int,
    fact_id: uuid.UUID,
    after: tuple[uuid.UUID, int, int] | None,
    limit: int,
) -> Citation:
    """The project's fact `fact_id` with up to `limit` pieces of evidence after `after` (source,
    ordinal, byte_start); refused when the fact or one of its sources is too large to cite."""
    async with pool.connection() as conn:
        fact = await cited(conn, project_id, fact_id)
        if fact is None:
            raise NotFound("record not found")
        if (
            len(fact.statement.encode()) > MAX_STATEMENT_BYTES
            or await largest_source(conn, fact_id) > MAX_SOURCE_BYTES
        ):
            raise TooLargeToAnswer(
                "the record or one of its sources is too large to cite", "citation_limit"
            )
        rows = await evidence_page(conn, fact_id, after, limit + 1)
        retraction = await retraction_of(conn, fact_id)
    page = rows[:limit]
    return Citation(fact, page, page[-1] if len(rows) > limit else None, retraction)
