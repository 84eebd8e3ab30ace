"""`POST /v1/citations/resolve`: a fact's record with a page of its evidence, each in context."""

from __future__ import annotations

import uuid
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import (
    Answer,
    Body,
    Instant,
    Int64,
    Interval,
    Uuid,
    interval,
    omitted,
)
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.routes.records import Retracted, retraction_answer
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.service import citations
from satchel.memory.store.citations import Lineage

router = APIRouter(route_class=StrictRoute)

DEFAULT_EVIDENCE = 8
MAX_EVIDENCE = 32


Position = Annotated[Int64, Field(ge=0)]


class EvidenceAfter(Body):
    source_observation_id: Annotated[str, Uuid()]
    source_ordinal: Position
    byte_start: Position


class CitationBody(Body):
    refusal: ClassVar[str] = "invalid_citation"

    id: Annotated[str, Uuid(nil=False)] = Field(description="the fact_id")
    after: EvidenceAfter | None = Field(default=None, description="the previous page's `next`")
    limit: Annotated[int, Field(ge=0, le=MAX_EVIDENCE)] | None = Field(
        default=None, description=f"quotes per page; 0 or absent: {DEFAULT_EVIDENCE}"
    )


class CitedEvidence(Answer):
    authored_by: str | None = omitted()
    source_observation_id: str
    source_ordinal: int
    log_offset: int
    role: str
    occurred_at: Instant
    quote: str
    byte_start: int
    byte_end: int
    extractor_version: str
    context: str
    context_byte_start: int
    context_byte_end: int
    context_complete: bool


class EvidenceNext(Answer):
    source_observation_id: str
    source_ordinal: int
    byte_start: int


class GenerationLink(Answer):
    """A fact rebuild generation: the one that admitted a fact, or the one that retired it."""

    generation_id: str
    extractor_version: str
    applied_at: Instant


class Citation(Answer):
    """A fact's record. `generation` and `reinterpreted_by` link the rebuild generations that
    admitted and retired it; each is left out until a rebuild sets it."""

    generation: GenerationLink | None = omitted()
    reinterpreted_by: GenerationLink | None = omitted()
    version: str
    retraction: Retracted | None = omitted()
    id: str
    superseded_by: str | None = omitted()
    supersession_source_observation_id: str | None = omitted()
    scope: str
    subject_entity_id: str | None = omitted()
    object_entity_id: str | None = omitted()
    predicate: str
    statement: str
    confidence: float
    source_role: str
    recorded_at: Instant
    valid: Interval
    known: Interval
    status: str
    evidence: list[CitedEvidence]
    next: EvidenceNext | None = omitted()


def _link(lineage: Lineage | None) -> GenerationLink | None:
    if lineage is None:
        return None
    return GenerationLink(
        generation_id=str(lineage.id),
        extractor_version=lineage.extractor_version,
        applied_at=lineage.applied_at,
    )


def _after(after: EvidenceAfter | None) -> tuple[uuid.UUID, int, int] | None:
    if after is None:
        return None
    return uuid.UUID(after.source_observation_id), after.source_ordinal, after.byte_start


@router.post("/v1/citations/resolve", response_model=Citation, **access("read"))
async def resolve(
    body: CitationBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> Citation:
    found = await citations.resolve(
        parts.pool,
        grant.project_id,
        uuid.UUID(body.id),
        _after(body.after),
        body.limit or DEFAULT_EVIDENCE,
    )
    fact, last, retraction = found.fact, found.last, found.retraction
    evidence = []
    for row in found.evidence:
        window = row.window()
        evidence.append(
            CitedEvidence(
                authored_by=None if row.authored_by is None else str(row.authored_by),
                source_observation_id=str(row.observation_id),
                source_ordinal=row.source_ordinal,
                log_offset=row.log_offset,
                role=row.role or "",
                occurred_at=row.occurred_at,
                quote=row.quote,
                byte_start=row.byte_start,
                byte_end=row.byte_end,
                extractor_version=row.extractor_version or "",
                context=window.text,
                context_byte_start=window.start,
                context_byte_end=window.end,
                context_complete=window.complete,
            )
        )
    return Citation(
        generation=_link(fact.generation),
        reinterpreted_by=_link(fact.reinterpreted_by),
        version=str(fact.version),
        retraction=retraction_answer(retraction) if retraction else None,
        id=str(fact.id),
        superseded_by=None if fact.superseded_by is None else str(fact.superseded_by),
        supersession_source_observation_id=(
            None
            if fact.supersession_source_observation_id is None
            else str(fact.supersession_source_observation_id)
        ),
        scope=fact.scope,
        subject_entity_id=None if fact.subject_entity_id is None else str(fact.subject_entity_id),
        object_entity_id=None if fact.object_entity_id is None else str(fact.object_entity_id),
        predicate=fact.predicate,
        statement=fact.statement,
        confidence=fact.confidence,
        source_role=fact.source_role,
        recorded_at=fact.recorded_at,
        valid=interval(fact.valid_from, fact.valid_until),
        known=interval(fact.known_from, fact.known_until),
        status=fact.status,
        evidence=evidence,
        next=(
            EvidenceNext(
                source_observation_id=str(last.observation_id),
                source_ordinal=last.source_ordinal,
                byte_start=last.byte_start,
            )
            if last is not None
            else None
        ),
    )
