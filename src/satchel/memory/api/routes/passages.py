"""`POST /v1/passages/search`: validated controls over the hybrid passage index."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import (
    CANDIDATES_RULE,
    MAX_CANDIDATE_LIMIT,
    Answer,
    Body,
    CandidateCount,
    Text,
)
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.service import passages
from satchel.memory.service.passages import DEFAULT_LIMIT

router = APIRouter(route_class=StrictRoute)

MAX_LIMIT = MAX_CANDIDATE_LIMIT
MAX_QUESTION_BYTES = 8192
MAX_SUBJECT_BYTES = 1024
Role = Literal["", "user", "assistant", "system", "tool"]


class PassageRequest(Body):
    refusal: ClassVar[str] = "invalid_passage_query"

    question: Annotated[str, Text(MAX_QUESTION_BYTES)]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None = Field(
        default=None, description=f"passages to answer; default {DEFAULT_LIMIT}"
    )
    candidates: CandidateCount | None = Field(default=None, description=CANDIDATES_RULE)
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


@router.post("/v1/passages/search", response_model=PassagePage, **access("read"))
async def passages_search(
    body: PassageRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> PassagePage:
    query = passages.query_of(
        body.question, body.limit, body.candidates, body.data_subject_id, body.source_role
    )
    found = await passages.search(parts.pool, grant.project_id, query, parts.search_caches)
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
