"""v1 routes this deployment has no backing for yet: they answer as a taisce deployment without it.

`POST /v1/reports/candidates` answers 503 `report_candidates_unavailable`, as one with no report
embeddings. Never 404, which a taisce client reads as "gone". Authentication, admission and
access come first, then the body is read strictly (unknown fields, wrong types: 400
`invalid_body`); report candidates also check the question and its controls (400
`invalid_report_candidate_query`) before refusing. Request and answer models are the contract's,
so clients generated from `/openapi.json` know every field.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Text
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import Access, ErrorAnswer, StrictRoute, access

router = APIRouter(route_class=StrictRoute)

DEFAULT_CANDIDATE_LIMIT = 10
MAX_CANDIDATE_LIMIT = 32
MAX_CANDIDATES = 1000
MAX_QUESTION_BYTES = 8192
NO_REPORT_CANDIDATES = "report candidates are unavailable: this deployment has no report embeddings"


def _unavailable(level: Access, status: int, code: str) -> dict[str, Any]:
    """Route keyword arguments: the access it needs and the refusal it always answers."""
    return {
        **access(level),
        "responses": {
            status: {"model": ErrorAnswer, "description": f"Always, here: `{code}`."},
        },
        "description": f"Not provided by this deployment: answers {status} `{code}` once the"
        " request is authenticated, allowed and readable.",
    }


class ReportCandidateBody(Body):
    refusal: ClassVar[str] = "invalid_report_candidate_query"

    question: Annotated[str, Text(MAX_QUESTION_BYTES)]
    limit: Annotated[int, Field(ge=1, le=MAX_CANDIDATE_LIMIT)] | None = Field(
        default=None, description=f"reports to answer; default {DEFAULT_CANDIDATE_LIMIT}"
    )
    candidates: Annotated[int, Field(ge=0, le=MAX_CANDIDATES)] | None = Field(
        default=None, description="0 (exact search, the default) or at least `limit`"
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
    **_unavailable("read", 503, "report_candidates_unavailable"),
)
async def report_candidates(
    body: ReportCandidateBody, grant: Annotated[Grant, Depends(current_grant)]
) -> ReportCandidatePage:
    limit = DEFAULT_CANDIDATE_LIMIT if body.limit is None else body.limit
    candidates = body.candidates or 0
    if 0 < candidates < limit:
        raise ApiError(
            400,
            "invalid_report_candidate_query",
            f"candidates: is {candidates}, must be 0 or at least limit ({limit})",
        )
    raise ApiError(503, "report_candidates_unavailable", NO_REPORT_CANDIDATES)
