"""`POST /v1/observations` (durable, idempotent turns) and `GET /v1/freshness`."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import ConfigDict, Field

from satchel.memory.api.bodies import REQUIRED_BODY, Answer, Body, Text, Timestamp, Uuid
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store.log import NewTurn, Said, freshness

router = APIRouter(route_class=StrictRoute)

MAX_MESSAGES = 64
MAX_MESSAGE_BYTES = 65_536
MAX_TURN_BYTES = 262_144

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


class Freshness(Answer):
    scope: str
    stored: int | None
    formed: int | None
    parked: int


def _invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_turn", message)


def groups_of(messages: list[ObservedMessage]) -> list[int]:
    """The turn's rules across messages (sizes and groups); each message's group ordinal."""
    explicit = messages[0].group_ordinal is not None
    if any((m.group_ordinal is not None) != explicit for m in messages):
        raise _invalid("group_ordinal must be supplied for every message or omitted for all")
    if not explicit and any(m.role == "tool" for m in messages):
        raise _invalid("turns containing tool messages require explicit group ordinals")
    total = sum(len(m.content.encode("utf-8")) for m in messages)
    if total > MAX_TURN_BYTES:
        raise _invalid(
            f"messages: the turn's contents hold {total} UTF-8 bytes, over {MAX_TURN_BYTES}"
        )
    groups: list[int] = []
    for index, message in enumerate(messages):
        group = message.group_ordinal if explicit else index
        assert group is not None
        previous = groups[-1] if groups else None
        if (previous is None and group != 0) or (
            previous is not None and group not in (previous, previous + 1)
        ):
            expected = "0" if previous is None else f"{previous} or {previous + 1}"
            raise _invalid(
                f"messages[{index}].group_ordinal: is {group}, must be {expected}"
                " (groups start at 0 and rise by 0 or 1)"
            )
        groups.append(group)
    return groups


def fingerprint(scope: str, subject: str | None, messages: list[Any], groups: list[int]) -> bytes:
    """The content a retry must repeat: scope, subject, messages; times excluded."""
    document = {
        "version": 2,
        "scope": scope,
        "data_subject_id": subject or "",
        "messages": [
            {"ordinal": i, "role": m.role, "content": m.content, "group_ordinal": g}
            for i, (m, g) in enumerate(zip(messages, groups, strict=True))
        ],
    }
    return hashlib.sha256(json.dumps(document, ensure_ascii=False).encode()).digest()


def key_digest(namespace: str, key: uuid.UUID) -> bytes:
    return hashlib.sha256(namespace.encode() + key.bytes).digest()


@router.post(
    "/v1/observations",
    status_code=201,
    response_model=Receipt,
    **access("write"),
)
async def observe(
    body: Observation, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Receipt:
    groups = groups_of(body.messages)
    key = uuid.UUID(body.idempotency_key) if body.idempotency_key else None
    subject = body.data_subject_id or None
    turn_time = body.occurred_at or datetime.now(UTC)
    digest = key_digest("observe/v1:", key) if key else None
    print_ = fingerprint(grant.project, subject, body.messages, groups)
    said = [
        Said(m.role, m.content, group, m.occurred_at or turn_time)
        for m, group in zip(body.messages, groups, strict=True)
    ]
    observation_id = uuid.uuid4()
    outcome = await request.app.state.appender.append(
        grant.project_id,
        NewTurn(observation_id, subject, turn_time, said, digest, print_),
    )
    if isinstance(outcome, int):
        return Receipt(id=str(observation_id), scope=grant.project, log_offset=outcome)
    if outcome is None:
        raise ApiError(
            429,
            "rate_limited",
            "too many turns are waiting to form; retry later with the same idempotency key",
            headers={"Retry-After": "1"},
        )
    if outcome.observation_id is None or outcome.fingerprint != print_:
        raise ApiError(
            409,
            "idempotency_conflict",
            "idempotency key was already used for a different or erased observation",
        )
    assert outcome.log_offset is not None
    return Receipt(
        id=str(outcome.observation_id), scope=grant.project, log_offset=outcome.log_offset
    )


@router.get("/v1/freshness", response_model=Freshness, **access("read"))
async def get_freshness(
    request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Freshness:
    async with request.app.state.pool.connection() as conn:
        return Freshness(**await freshness(conn, grant.project_id))
