"""`POST /v1/notifications/endpoints/{register,list,disable}` and `/deliveries/list`: a project's
HTTPS endpoints, told each time its formation moves forward (the rules are
`satchel.memory.service.notifications`' and `.destinations`').

With no destination configured (`SATCHEL_NOTIFY_DESTINATIONS` unset) every route answers 501
`notifications_unavailable` once the request is authenticated, allowed and readable, judging no
field, as a taisce deployment without notifications does. The secret is in the registration's
answer only.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import Answer, Body, Instant, Int64, Text, omitted
from satchel.memory.api.deps import Parts
from satchel.memory.api.errors import ApiError, invalid_body
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import Access, ErrorAnswer, StrictRoute, access
from satchel.memory.config import NotifySettings
from satchel.memory.service import notifications
from satchel.memory.store.notifications import DeliveryRow, EndpointRow

router = APIRouter(route_class=StrictRoute)

DEFAULT_DELIVERIES = 50
MAX_DELIVERIES = 200
NO_NOTIFICATIONS = (
    "this deployment sends no notifications: no destination is configured; poll GET"
    " /v1/freshness instead"
)


def _route(level: Access, extra: dict[int, str] | None = None) -> dict[str, Any]:
    """Route keyword arguments: the access it needs and its documented refusals."""
    refusals = {501: "No destination is configured: `notifications_unavailable`.", **(extra or {})}
    return {
        **access(level),
        "responses": {
            status: {"model": ErrorAnswer, "description": text} for status, text in refusals.items()
        },
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


def configured(parts: Parts) -> NotifySettings:
    """The deployment's notification settings, or 501 when no destination is configured."""
    if parts.settings.notify is None:
        raise ApiError(501, "notifications_unavailable", NO_NOTIFICATIONS)
    return parts.settings.notify


def _endpoint(row: EndpointRow) -> Endpoint:
    return Endpoint(
        id=str(row.id), url=row.url, created_at=row.created_at, disabled_at=row.disabled_at
    )


def _delivery(row: DeliveryRow) -> Delivery:
    return Delivery(
        id=str(row.id),
        endpoint_id=str(row.endpoint_id),
        url=row.url,
        formed_through=row.formed_through,
        stored_through=row.stored_through,
        attempts=row.attempts,
        delivered_at=row.delivered_at,
        parked_at=row.parked_at,
        last_status=row.last_status,
        last_error=row.last_error,
        created_at=row.created_at,
    )


@router.post(
    "/v1/notifications/endpoints/register",
    response_model=RegisteredEndpoint,
    **_route("write", {400: "A destination the policy refuses: `invalid_destination`."}),
)
async def register_endpoint(
    body: EndpointRegisterBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> RegisteredEndpoint:
    settings = configured(parts)
    registered = await notifications.register(
        parts.pool, grant.project_id, body.url or "", settings
    )
    shown = _endpoint(registered.endpoint)
    return RegisteredEndpoint(**shown.model_dump(), secret=registered.secret)


@router.post("/v1/notifications/endpoints/list", response_model=EndpointList, **_route("read"))
async def list_endpoints(
    body: EndpointListBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> EndpointList:
    configured(parts)
    rows = await notifications.endpoints(parts.pool, grant.project_id)
    return EndpointList(endpoints=[_endpoint(row) for row in rows])


@router.post(
    "/v1/notifications/endpoints/disable",
    response_model=EndpointDisabled,
    **_route("write", {404: "The project has no endpoint of that id: `not_found`."}),
)
async def disable_endpoint(
    body: EndpointDisableBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> EndpointDisabled:
    configured(parts)
    try:
        endpoint_id = uuid.UUID(body.id or "")
    except ValueError:
        raise invalid_body(f"id: {body.id!r} is not an endpoint id (a UUID)") from None
    await notifications.disable(parts.pool, grant.project_id, endpoint_id)
    return EndpointDisabled(disabled=True)


@router.post("/v1/notifications/deliveries/list", response_model=DeliveryList, **_route("read"))
async def list_deliveries(
    body: DeliveryListBody, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> DeliveryList:
    configured(parts)
    limit = body.limit if body.limit is not None and 1 <= body.limit <= MAX_DELIVERIES else None
    rows = await notifications.deliveries(parts.pool, grant.project_id, limit or DEFAULT_DELIVERIES)
    return DeliveryList(deliveries=[_delivery(row) for row in rows])
