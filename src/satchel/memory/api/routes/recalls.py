"""`POST /v1/recalls`: what memory holds about the entities a question names, under a budget."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Timestamp, omitted
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.config import MemorySettings
from satchel.memory.passages import query_embedder
from satchel.memory.recall import (
    MAX_QUESTION_BYTES,
    ROLES,
    SURFACES,
    Ask,
    Controls,
    QuestionRefused,
    recall,
)

router = APIRouter(route_class=StrictRoute)


class RecallBody(Body):
    question: str | None = None
    data_subject_id: str | None = None
    as_of: Timestamp | None = None
    as_known_at: Timestamp | None = None
    max_characters: int | None = None
    source_roles: list[str] | None = None
    hops: int | None = None
    surfaces: list[str] | None = None
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


def _refused() -> ApiError:
    return ApiError(
        400,
        "invalid_recall_controls",
        "recall controls must fit the server limits and allowed source roles",
    )


def _names(given: list[str] | None, allowed: tuple[str, ...], default: list[str]) -> list[str]:
    """A list of distinct allowed names, 1..len(allowed) of them; null means the default."""
    if given is None:
        return default
    if not 1 <= len(given) <= len(allowed) or len(set(given)) != len(given):
        raise _refused()
    if any(name not in allowed for name in given):
        raise _refused()
    return list(given)


def _instant(value: datetime | None) -> datetime | None:
    try:
        return None if value is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise _refused() from None


def controls_of(body: RecallBody, settings: MemorySettings) -> Controls:
    """The effective controls: defaults filled in, limits checked, hops clamped to 1..2."""
    budget = settings.recall_budget
    if body.max_characters is not None and not 1 <= body.max_characters <= budget:
        raise _refused()
    return Controls(
        max_characters=budget if body.max_characters is None else body.max_characters,
        max_rows=settings.max_rows,
        source_roles=_names(body.source_roles, ROLES, ["user"]),
        hops=min(2, max(1, body.hops or 1)),
        surfaces=_names(body.surfaces, SURFACES, list(SURFACES)),
        themes=bool(body.themes),
    )


@router.post("/v1/recalls", response_model=RecallAnswer, **access("read"))
async def recalls(
    body: RecallBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> RecallAnswer:
    question = body.question or ""
    if not question.strip():
        raise ApiError(400, "invalid_question", "a question is required")
    if len(question.encode()) > MAX_QUESTION_BYTES:
        raise ApiError(
            400, "invalid_question", f"question exceeds {MAX_QUESTION_BYTES} UTF-8 bytes"
        )
    controls = controls_of(body, request.app.state.settings)
    ask = Ask(
        question=question,
        data_subject_id=body.data_subject_id or None,
        as_of=_instant(body.as_of) or datetime.now(UTC),
        as_known_at=_instant(body.as_known_at),
        controls=controls,
        surfaces_named=body.surfaces is not None,
    )
    embedder = await query_embedder() if "passages" in controls.surfaces else None
    try:
        async with request.app.state.pool.connection() as conn:
            bundle = await recall(conn, grant.project_id, ask, embedder)
    except QuestionRefused as refused:
        raise ApiError(400, "invalid_question", str(refused)) from None
    return RecallAnswer.model_validate(dataclasses.asdict(bundle))
