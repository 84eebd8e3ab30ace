"""`POST /v1/passages/search`: validated controls over the hybrid passage index.

With no embedder that can run the search is refused (503 `passage_unavailable`), as the
contract says, although full text alone could rank: a caller reading 200 would take a ranking
by words for one by meaning. Recall, which can say so in `degraded`, still answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Text
from satchel.memory.api.deps import deployment
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.passages import query_embedder
from satchel.memory.passages.search import search_passages
from satchel.memory.store.database import autocommitting, spare_connection
from satchel.memory.store.passage_scope import Scope

router = APIRouter(route_class=StrictRoute)

DEFAULT_LIMIT = 10
MAX_LIMIT = 32
MAX_CANDIDATES = 1000
MAX_QUESTION_BYTES = 8192
MAX_SUBJECT_BYTES = 1024
Role = Literal["", "user", "assistant", "system", "tool"]


class PassageRequest(Body):
    refusal: ClassVar[str] = "invalid_passage_query"

    question: Annotated[str, Text(MAX_QUESTION_BYTES)]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None = Field(
        default=None, description=f"passages to answer; default {DEFAULT_LIMIT}"
    )
    candidates: (
        Annotated[
            int,
            Field(
                ge=0,
                le=MAX_CANDIDATES,
                json_schema_extra={"anyOf": [{"const": 0}, {"minimum": MAX_LIMIT}]},
            ),
        ]
        | None
    ) = Field(
        default=None,
        description="candidates to rank from: 0 (the default) or at least `limit`, at most"
        f" {MAX_CANDIDATES}; the schema admits 0 and {MAX_LIMIT}..{MAX_CANDIDATES}, which fit"
        " every limit",
    )
    data_subject_id: Annotated[str, Text(MAX_SUBJECT_BYTES, blank="any")] | None = None
    source_role: Role | None = Field(default=None, description='only this role; "" for any')


class Passage(Answer):
    chunk_id: str
    source_id: str
    ordinal: int
    role: str
    preview: str
    similarity: float
    occurred_at: datetime
    message_bytes: int
    preview_complete: bool
    preview_byte_end: int
    content_digest: str


class PassagePage(Answer):
    generation_id: str
    through_offset: int
    covered_through_offset: int
    build_state: str
    approximate: bool
    passages: list[Passage]


@dataclass(frozen=True, slots=True)
class PassageQuery:
    """A search the index can run: a question and bounded controls (0 candidates: exact)."""

    question: str
    limit: int
    candidates: int
    subject: str
    role: str


def query_of(body: PassageRequest) -> PassageQuery:
    """The contract's bounds on a passage search, or 400 `invalid_passage_query`."""
    limit = DEFAULT_LIMIT if body.limit is None else body.limit
    candidates = body.candidates or 0
    if 0 < candidates < limit:
        raise ApiError(
            400,
            "invalid_passage_query",
            f"candidates: is {candidates}, must be 0 or at least limit ({limit})",
        )
    return PassageQuery(
        body.question, limit, candidates, body.data_subject_id or "", body.source_role or ""
    )


def unavailable() -> ApiError:
    return ApiError(
        503, "passage_unavailable", "no embedding model can run: passage search needs one"
    )


async def search(request: Request, grant: Grant, query: PassageQuery) -> PassagePage:
    """Run `query` in the grant's project over the passage index, or 503 `passage_unavailable`
    when no embedder can read the question."""
    embedder = await query_embedder()
    if embedder is None:
        raise unavailable()
    scope = Scope(grant.project_id, query.subject, (query.role,) if query.role else ())
    pool = request.app.state.pool
    async with autocommitting(pool) as conn, spare_connection(pool) as spare:
        found = await search_passages(
            conn,
            scope,
            query.question,
            limit=query.limit,
            candidates=query.candidates,
            exact=query.candidates == 0,
            embedder=embedder,
            caches=deployment(request).search_caches,
            spare=spare,
        )
    if not found.embedded:
        raise unavailable()
    return PassagePage(
        generation_id=found.generation_id,
        through_offset=found.through_offset,
        covered_through_offset=found.covered_through_offset,
        build_state=found.build_state,
        approximate=found.approximate,
        passages=[
            Passage(
                chunk_id=str(hit.chunk_id),
                source_id=str(hit.source_id),
                ordinal=hit.ordinal,
                role=hit.role,
                preview=(preview := hit.preview()),
                similarity=hit.similarity,
                occurred_at=hit.occurred_at,
                message_bytes=hit.message_bytes,
                preview_complete=len(preview.encode("utf-8")) == hit.message_bytes,
                preview_byte_end=len(preview.encode("utf-8")),
                content_digest=hit.content_digest,
            )
            for hit in found.hits
        ],
    )


@router.post("/v1/passages/search", response_model=PassagePage, **access("read"))
async def passages_search(
    body: PassageRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> PassagePage:
    return await search(request, grant, query_of(body))
