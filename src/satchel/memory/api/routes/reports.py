"""`POST /v1/reports/candidates`: the project's theme reports nearest a question, as previews."""

from __future__ import annotations

from typing import Annotated, ClassVar

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
from satchel.memory.api.strict import ErrorAnswer, StrictRoute, access
from satchel.memory.service import reports
from satchel.memory.service.reports import DEFAULT_LIMIT

router = APIRouter(route_class=StrictRoute)

MAX_LIMIT = MAX_CANDIDATE_LIMIT
MAX_QUESTION_BYTES = 8192


class ReportCandidateBody(Body):
    refusal: ClassVar[str] = "invalid_report_candidate_query"

    question: Annotated[str, Text(MAX_QUESTION_BYTES)]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] | None = Field(
        default=None, description=f"reports to answer; default {DEFAULT_LIMIT}"
    )
    candidates: CandidateCount | None = Field(
        default=None,
        description=CANDIDATES_RULE
        + "; the search compares every report either way, and `approximate` says so",
    )


class ReportCandidate(Answer):
    report_id: str
    community_id: str
    title_preview: str
    title_bytes: int
    title_truncated: bool
    summary_preview: str
    summary_bytes: int
    summary_truncated: bool
    importance: float
    similarity: float


class ReportCandidatePage(Answer):
    generation_id: str
    target_count: int
    build_state: str
    approximate: bool
    candidates: list[ReportCandidate]


@router.post(
    "/v1/reports/candidates",
    response_model=ReportCandidatePage,
    responses={
        503: {
            "model": ErrorAnswer,
            "description": "`report_candidates_unavailable`: no embedding model can read the"
            " question.",
        }
    },
    **access("read"),
)
async def report_candidates(
    body: ReportCandidateBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ReportCandidatePage:
    limit = reports.checked_limit(body.limit, body.candidates)
    page = await reports.candidates(
        parts.pool, grant.project_id, body.question, limit, parts.search_caches
    )
    return ReportCandidatePage(
        generation_id=page.generation_id,
        target_count=page.target_count,
        build_state=page.build_state,
        approximate=page.approximate,
        candidates=[
            ReportCandidate(
                report_id=str(found.report.id),
                community_id=found.report.community_id,
                title_preview=found.title.text,
                title_bytes=found.title.size,
                title_truncated=found.title.truncated,
                summary_preview=found.summary.text,
                summary_bytes=found.summary.size,
                summary_truncated=found.summary.truncated,
                importance=found.report.importance,
                similarity=found.report.similarity,
            )
            for found in page.candidates
        ],
    )
