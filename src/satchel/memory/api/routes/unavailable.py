"""v1 routes this deployment has no backing for yet: they answer as a taisce deployment without it.

The four notification routes answer 501 `notifications_unavailable`, as a deployment whose
operator named no destination does. Never 404, which a taisce client reads as "gone".
Authentication, admission and access come first, then the body is read strictly (unknown fields,
wrong types: 400 `invalid_body`). Request and answer models are the contract's, so clients
generated from `/openapi.json` know every field.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Int64, Text, omitted
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import Access, ErrorAnswer, StrictRoute, access

router = APIRouter(route_class=StrictRoute)

NO_NOTIFICATIONS = (
    "this deployment sends no notifications: no destination is configured; poll GET"
    " /v1/freshness instead"
)


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
