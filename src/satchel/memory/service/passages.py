"""Passage search: the contract's bounds on a search, and the search itself over the hybrid
passage index.

With no embedder that can run the search is refused (503 `passage_unavailable`), as the
contract says, although full text alone could rank: a caller reading 200 would take a ranking
by words for one by meaning. Recall, which can say so in `degraded`, still answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Invalid, Unavailable
from satchel.memory.passages.caches import SearchCaches
from satchel.memory.passages.search import SearchAnswer, search_passages
from satchel.memory.store.database import autocommitting, spare_connection
from satchel.memory.store.passage_scope import Scope

DEFAULT_LIMIT = 10


@dataclass(frozen=True, slots=True)
class PassageQuery:
    """A search the index can run: a question and bounded controls (0 candidates: exact)."""

    question: str
    limit: int
    candidates: int
    subject: str
    role: str


def query_of(
    question: str,
    limit: int | None,
    candidates: int | None,
    data_subject_id: str | None,
    source_role: str | None,
) -> PassageQuery:
    """The contract's bounds on a passage search, or `invalid_passage_query`."""
    limit = DEFAULT_LIMIT if limit is None else limit
    candidates = candidates or 0
    if 0 < candidates < limit:
        raise Invalid(
            f"candidates: is {candidates}, must be 0 or at least limit ({limit})",
            "invalid_passage_query",
        )
    return PassageQuery(question, limit, candidates, data_subject_id or "", source_role or "")


def unavailable() -> Unavailable:
    return Unavailable(
        "no embedding model can run: passage search needs one", "passage_unavailable"
    )


async def search(
    pool: AsyncConnectionPool, project_id: int, query: PassageQuery, caches: SearchCaches
) -> SearchAnswer:
    """Run `query` in the project over the passage index, or `passage_unavailable` when no
    embedder can read the question."""
    embedder = await caches.embedders.get()
    if embedder is None:
        raise unavailable()
    scope = Scope(project_id, query.subject, (query.role,) if query.role else ())
    async with autocommitting(pool) as conn, spare_connection(pool) as spare:
        found = await search_passages(
            conn,
            scope,
            query.question,
            limit=query.limit,
            candidates=query.candidates,
            exact=query.candidates == 0,
            embedder=embedder,
            spare=spare,
            caches=caches,
        )
    if not found.embedded:
        raise unavailable()
    return found
