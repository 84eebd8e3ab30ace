"""`POST /v1/recalls`: what memory holds about the entities a question names, under a budget."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, get_args

from fastapi import APIRouter, Depends, Response
from pydantic import Field

from satchel.memory.api.bodies import (
    Answer,
    Body,
    Distinct,
    Instant,
    Int64,
    Refusal,
    Text,
    Timestamp,
    omitted,
)
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.config import MemorySettings
from satchel.memory.service import recall
from satchel.memory.service.questions import MAX_QUESTION_BYTES
from satchel.memory.service.recall import SURFACES
from satchel.memory.store.messages import ROLES

router = APIRouter(route_class=StrictRoute)

BUDGET = MemorySettings().recall_budget
Role = Literal["user", "assistant", "system", "tool"]
Surface = Literal["facts", "reports", "passages"]
assert get_args(Role) == ROLES and get_args(Surface) == SURFACES


class RecallBody(Body):
    refusal: ClassVar[str] = "invalid_recall_controls"

    question: Annotated[str, Text(MAX_QUESTION_BYTES), Refusal(code="invalid_question")]
    data_subject_id: Annotated[str, Text(blank="any")] | None = None
    as_of: Timestamp | None = Field(default=None, description="what was true then; default now")
    as_known_at: Timestamp | None = Field(
        default=None, description="what memory knew then; default now"
    )
    max_characters: Annotated[int, Field(ge=1, json_schema_extra={"maximum": BUDGET})] | None = (
        Field(default=None, description=f"at most the server's budget ({BUDGET:,} by default)")
    )
    source_roles: (
        Annotated[list[Role], Field(min_length=1, max_length=len(ROLES)), Distinct()] | None
    ) = Field(default=None, description='whose words may supply facts; default ["user"]')
    hops: Int64 | None = Field(default=None, description="1 or 2; other values are clamped")
    surfaces: (
        Annotated[list[Surface], Field(min_length=1, max_length=len(SURFACES)), Distinct()] | None
    ) = Field(default=None, description="which parts answer; default all three")
    themes: bool | None = None


class ControlsAnswer(Answer):
    max_characters: int
    max_rows: int
    source_roles: list[str]
    hops: int
    surfaces: list[str]
    themes: bool


class AnchorAnswer(Answer):
    entity_id: str
    name: str
    type: str
    matched: str


class EvidenceAnswer(Answer):
    observation_id: str
    source_ordinal: int
    quote: str
    byte_start: int
    byte_end: int
    context: str
    context_start: int
    context_complete: bool


class FactAnswer(Answer):
    fact_id: str
    subject: str
    predicate: str
    object: str
    statement: str
    confidence: float
    valid_from: Instant
    valid_until: Instant | None
    anchored_on: str
    source_role: str
    hops: int
    path: list[str]
    via: list[str]
    co_derived_with: list[str]
    evidence: EvidenceAnswer


class ReportAnswer(Answer):
    community_id: str
    report_id: str
    title: str
    summary: str
    importance: float
    similarity: float
    level: int
    parent: str | None = omitted()
    sources: list[str]


class PassageAnswer(Answer):
    chunk_id: str
    source_id: str
    ordinal: int
    role: str
    quote: str
    similarity: float
    occurred_at: Instant
    complete: bool


class ReachAnswer(Answer):
    terms: int
    anchored: int
    named_nothing_known: bool
    facts_per_anchor: dict[str, int]


class RecallAnswer(Answer):
    controls: ControlsAnswer
    anchors: list[AnchorAnswer]
    facts: list[FactAnswer]
    reports: list[ReportAnswer] = Field(default_factory=list)
    passages: list[PassageAnswer] = Field(default_factory=list)
    truncated: bool
    characters: int
    degraded: list[str]
    reach: ReachAnswer


@router.post("/v1/recalls", response_model=RecallAnswer, **access("read"))
async def recalls(
    body: RecallBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> Response:
    settings = parts.settings
    controls = recall.controls_of(
        body.max_characters,
        body.source_roles,
        body.hops,
        body.surfaces,
        body.themes,
        budget=settings.recall_budget,
        max_rows=settings.max_rows,
    )
    ask = recall.ask_of(
        body.question,
        body.data_subject_id,
        body.as_of,
        body.as_known_at,
        controls,
        surfaces_named=body.surfaces is not None,
    )
    bundle = await recall.answer(parts.pool, grant.project_id, ask, parts.search_caches)
    # Validated once from the bundle's own objects and written once: a model returned would be
    # dumped, validated and serialized again.
    answer = RecallAnswer.model_validate(bundle, from_attributes=True)
    return Response(answer.model_dump_json(), media_type="application/json")
