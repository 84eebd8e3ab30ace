"""`POST /v1/entities/{list,get,candidates,purge}`: inspect, find and withdraw entities."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import UUID_PATTERN, Answer, Body, Instant, Text, Uuid, omitted
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.domain import NotFound
from satchel.memory.service import entities
from satchel.memory.service.pages import keyset_page
from satchel.memory.service.questions import MAX_QUESTION_BYTES

router = APIRouter(route_class=StrictRoute)

PREVIEW_CHARACTERS = 512
DEFAULT_PAGE = 20
MAX_PAGE = 100
DEFAULT_CANDIDATES = 10
MAX_CANDIDATES = 32
MAX_SCORED = 1000
MAX_REASON_BYTES = 4096
MAX_ID_BYTES = 1024
GENERATION = "spelling/v1"  # the spelling key of migration 0009; there is no vector generation


class EntityAfter(Body):
    id: Annotated[str, Uuid()]


class ListBody(Body):
    refusal: ClassVar[str] = "invalid_entity_page"

    after: EntityAfter | None = Field(default=None, description="the previous page's `next`")
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] | None = Field(
        default=None, description=f"default {DEFAULT_PAGE}"
    )


class Listed(Answer):
    id: str
    identity_kind: str
    name_preview: str
    name_bytes: int
    name_truncated: bool
    alias_count: int
    first_seen_at: Instant


class EntityCursor(Answer):
    id: str


class ListAnswer(Answer):
    entities: list[Listed]
    next: EntityCursor | None = omitted()


class GetBody(Body):
    refusal: ClassVar[str] = "invalid_entity_page"

    id: Annotated[str, Uuid()]


class EntityAnswer(Answer):
    id: str
    identity_kind: str
    canonical_name: str
    aliases: list[str]
    speaker_subject_id: str | None = omitted()
    first_seen_at: Instant


class CandidatesBody(Body):
    refusal: ClassVar[str] = "invalid_entity_candidate_query"

    question: Annotated[str, Text(MAX_QUESTION_BYTES)]
    limit: Annotated[int, Field(ge=1, le=MAX_CANDIDATES)] | None = Field(
        default=None, description=f"candidates to answer; default {DEFAULT_CANDIDATES}"
    )
    candidates: Annotated[int, Field(ge=0, le=MAX_SCORED)] | None = Field(
        default=None,
        description="entities scored per window of the question: 0 (the default) for every"
        " entity sharing the window's spelling key",
    )


class Candidate(Answer):
    entity_id: str
    identity_kind: str
    name_preview: str
    name_bytes: int
    name_truncated: bool
    similarity: float


class CandidatesAnswer(Answer):
    generation_id: str
    target_count: int
    build_state: str
    approximate: bool
    candidates: list[Candidate]


class PurgeBody(Body):
    id: Annotated[str, Text(MAX_ID_BYTES, blank="any")] = Field(
        description="the entity; a value that is not one of the project's entity ids answers 404"
    )
    reason: Annotated[str, Text(MAX_REASON_BYTES, blank="any")] | None = None
    confirm: bool | None = Field(default=None, description="true to purge; else a preview")


class PurgeAnswer(Answer):
    entity_id: str
    canonical_name: str
    reason: str | None = omitted()
    previewed: bool
    removed: dict[str, int]
    residual: dict[str, int]
    contributing_subjects: int
    claims_from_unattributed_turns: int
    source_turns_kept: int
    completed_at: Instant


def _preview(name: str) -> tuple[str, int, bool]:
    return name[:PREVIEW_CHARACTERS], len(name.encode()), len(name) > PREVIEW_CHARACTERS


@router.post("/v1/entities/list", response_model=ListAnswer, **access("read"))
async def list_entities(
    body: ListBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ListAnswer:
    limit = body.limit or DEFAULT_PAGE
    after = uuid.UUID(body.after.id) if body.after is not None else None
    rows = await entities.page(parts.pool, grant.project_id, after, limit + 1)
    page, last = keyset_page(rows, limit)
    listed = []
    for row in page:
        preview, size, cut = _preview(row.name)
        listed.append(
            Listed(
                id=str(row.id),
                identity_kind=row.kind,
                name_preview=preview,
                name_bytes=size,
                name_truncated=cut,
                alias_count=0,
                first_seen_at=row.first_seen_at,
            )
        )
    return ListAnswer(entities=listed, next=EntityCursor(id=str(last.id)) if last else None)


@router.post("/v1/entities/get", response_model=EntityAnswer, **access("read"))
async def get_entity(
    body: GetBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> EntityAnswer:
    found = await entities.get(parts.pool, grant.project_id, uuid.UUID(body.id))
    return EntityAnswer(
        id=str(found.id),
        identity_kind=found.kind,
        canonical_name=found.name,
        aliases=[],
        first_seen_at=found.first_seen_at,
    )


@router.post("/v1/entities/candidates", response_model=CandidatesAnswer, **access("read"))
async def entity_candidates(
    body: CandidatesBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> CandidatesAnswer:
    found = await entities.candidates(
        parts.pool,
        grant.project_id,
        body.question,
        body.limit or DEFAULT_CANDIDATES,
        body.candidates or None,
    )
    candidates = []
    for similar in found.similar:
        preview, size, cut = _preview(similar.entity.name)
        candidates.append(
            Candidate(
                entity_id=str(similar.entity.id),
                identity_kind=similar.entity.kind,
                name_preview=preview,
                name_bytes=size,
                name_truncated=cut,
                similarity=round(similar.similarity, 6),
            )
        )
    return CandidatesAnswer(
        generation_id=GENERATION,
        target_count=found.target_count,
        build_state="built",
        approximate=found.approximate,
        candidates=candidates,
    )


@router.post(
    "/v1/entities/purge",
    response_model=PurgeAnswer,
    response_model_exclude_none=True,
    **access("write"),
)
async def purge(
    body: PurgeBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> PurgeAnswer:
    if not re.fullmatch(UUID_PATTERN, body.id):
        raise NotFound("entity not found")  # a value that is no UUID names no entity
    purged = await entities.purge(
        parts.pool, grant.project_id, uuid.UUID(body.id), confirm=bool(body.confirm)
    )
    return PurgeAnswer(
        entity_id=str(purged.entity_id),
        canonical_name=purged.canonical_name,
        reason=body.reason or None,
        previewed=purged.previewed,
        removed=purged.removed,
        residual=purged.residual,
        contributing_subjects=purged.contributing_subjects,
        claims_from_unattributed_turns=purged.claims_from_unattributed_turns,
        source_turns_kept=purged.source_turns_kept,
        completed_at=purged.completed_at,
    )
