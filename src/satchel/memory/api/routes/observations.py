"""`POST /v1/observations` (durable, idempotent turns) and `GET /v1/freshness`."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar, Literal

from fastapi import APIRouter, Depends
from pydantic import ConfigDict, Field

from satchel.memory.api.bodies import REQUIRED_BODY, Answer, Body, Text, Timestamp, Uuid, omitted
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.service import observations
from satchel.memory.service.observations import MAX_MESSAGES

router = APIRouter(route_class=StrictRoute)

MAX_MESSAGE_BYTES = 65_536

Role = Literal["user", "assistant", "system", "tool"]


class ObservedMessage(Body):
    role: Annotated[Role, REQUIRED_BODY]
    content: Annotated[str, Text(MAX_MESSAGE_BYTES), REQUIRED_BODY]
    group_ordinal: Annotated[int, Field(ge=0, le=MAX_MESSAGES - 1)] | None = Field(
        default=None,
        description="on every message or none (required with a tool message): 0 first,"
        " then the same or one more",
    )
    occurred_at: Timestamp | None = Field(default=None, description="defaults to the turn's")


# Group ordinals on every message, or on none and then no tool message. That they start at 0 and
# rise by 0 or 1 is beyond what a JSON Schema can say; the field's description says it.
GROUPED: dict[str, Any] = {
    "anyOf": [
        {
            "properties": {
                "messages": {
                    "items": {
                        "required": ["group_ordinal"],
                        "properties": {"group_ordinal": {"type": "integer"}},
                    }
                }
            }
        },
        {
            "properties": {
                "messages": {
                    "items": {
                        "properties": {"group_ordinal": {"type": "null"}},
                        "not": {"required": ["role"], "properties": {"role": {"const": "tool"}}},
                    }
                }
            }
        },
    ]
}


class Observation(Body):
    """One turn: its messages in order, with group ordinals on all of them or on none."""

    model_config = ConfigDict(json_schema_extra=GROUPED)
    refusal: ClassVar[str] = "invalid_turn"

    idempotency_key: Annotated[str, Uuid(empty=True)] | None = Field(
        default=None, description="one UUID per turn, repeated on every retry; empty: none"
    )
    data_subject_id: Annotated[str, Text(blank="any")] | None = None
    occurred_at: Timestamp | None = Field(default=None, description="defaults to when stored")
    messages: Annotated[
        list[ObservedMessage],
        Field(min_length=1, max_length=MAX_MESSAGES, description="at most 262,144 UTF-8 bytes"),
        REQUIRED_BODY,
    ]


class Receipt(Answer):
    id: str
    scope: str
    log_offset: int


class Rebuilding(Answer):
    """A project rebuild in progress: every source below `reinterpreted_through` has the new
    interpretation, the job stops at `reinterpreting_through`; counts of sources done so far."""

    reinterpreted_through: int
    reinterpreting_through: int | None
    sources_acknowledged: int
    sources_skipped: int


class Freshness(Answer):
    scope: str
    stored: int | None
    formed: int | None
    parked: int
    rebuilding: Rebuilding | None = omitted()


@router.post(
    "/v1/observations",
    status_code=201,
    response_model=Receipt,
    **access("write"),
)
async def observe(
    body: Observation, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> Receipt:
    stored = await observations.observe(
        parts.appender,
        grant.project_id,
        grant.project,
        uuid.UUID(body.idempotency_key) if body.idempotency_key else None,
        body.data_subject_id or None,
        body.occurred_at,
        body.messages,
    )
    return Receipt(id=str(stored.observation_id), scope=grant.project, log_offset=stored.log_offset)


@router.get("/v1/freshness", response_model=Freshness, **access("read"))
async def get_freshness(parts: Parts, grant: Annotated[Grant, Depends(current_grant)]) -> Freshness:
    return Freshness(**await observations.freshness_of(parts.pool, grant.project_id))
