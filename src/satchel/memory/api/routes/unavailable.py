"""v1 routes this deployment has no backing for yet: they answer as a taisce deployment without it.

The four notification routes answer 501 `notifications_unavailable`, as a deployment whose
operator named no destination does; `POST /v1/reports/candidates` answers 503
`report_candidates_unavailable`, as one with no report embeddings. Never 404, which a taisce
client reads as "gone". Authentication, admission and access come first, then the body is read
strictly (unknown fields, wrong types: 400 `invalid_body`); report candidates also check the
question and its controls (400 `invalid_report_candidate_query`) before refusing. Request and
answer models are the contract's, so clients generated from `/openapi.json` know every field.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Int64, Text, omitted
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import Access, ErrorAnswer, StrictRoute, access

router = APIRouter(route_class=StrictRoute)

DEFAULT_CANDIDATE_LIMIT = 10
MAX_CANDIDATE_LIMIT = 32
MAX_CANDIDATES = 1000
MAX_QUESTION_BYTES = 8192
NO_NOTIFICATIONS = (
    "this deployment sends no notifications: no destination is configured; poll GET"
    " /v1/freshness instead"
)
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


AnyText = Annotated[str, Text(blank="any")]


class EndpointRegisterBody(Body):
    url: AnyText | None = Field(default=None, description="an HTTPS URL the operator allows")


class EndpointListBody(Body):
    """No fields: the token names the project."""


class EndpointDisableBody(Body):
    id: AnyText | None = Field(default=None, description="the endpoint's id")


class DeliveryListBody(Body):
    limit: Int64 | None = Field(default=None, description="1..200; other values: 50")


class Endpoint(Answer):
    id: str
    url: str
    created_at: Instant
    disabled_at: Instant | None = omitted()


class RegisteredEndpoint(Endpoint):
    secret: str = Field(description="signs every delivery; shown once")


class EndpointList(Answer):
    endpoints: list[Endpoint]


class EndpointDisabled(Answer):
    disabled: bool


class Delivery(Answer):
    id: str
    endpoint_id: str
    url: str
    formed_through: int
    stored_through: int
    attempts: int
    delivered_at: Instant | None = omitted()
    parked_at: Instant | None = omitted()
    last_status: int | None = omitted()
    last_error: str | None = omitted()
    created_at: Instant


class DeliveryList(Answer):
    deliveries: list[Delivery]


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


def _no_notifications() -> ApiError:
    return ApiError(501, "notifications_unavailable", NO_NOTIFICATIONS)


NOTIFICATIONS_WRITE = _unavailable("write", 501, "notifications_unavailable")
NOTIFICATIONS_READ = _unavailable("read", 501, "notifications_unavailable")


@router.post(
    "/v1/notifications/endpoints/register",
    response_model=RegisteredEndpoint,
    **NOTIFICATIONS_WRITE,
)
async def register_endpoint(
    body: EndpointRegisterBody, grant: Annotated[Grant, Depends(current_grant)]
) -> RegisteredEndpoint:
    raise _no_notifications()


@router.post("/v1/notifications/endpoints/list", response_model=EndpointList, **NOTIFICATIONS_READ)
async def list_endpoints(
    body: EndpointListBody, grant: Annotated[Grant, Depends(current_grant)]
) -> EndpointList:
    raise _no_notifications()


@router.post(
    "/v1/notifications/endpoints/disable",
    response_model=EndpointDisabled,
    **NOTIFICATIONS_WRITE,
)
async def disable_endpoint(
    body: EndpointDisableBody, grant: Annotated[Grant, Depends(current_grant)]
) -> EndpointDisabled:
    raise _no_notifications()


@router.post("/v1/notifications/deliveries/list", response_model=DeliveryList, **NOTIFICATIONS_READ)
async def list_deliveries(
    body: DeliveryListBody, grant: Annotated[Grant, Depends(current_grant)]
) -> DeliveryList:
    raise _no_notifications()


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
