"""`POST /v1/observations` (durable, idempotent turns) and `GET /v1/freshness`."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from satchel.memory.api.bodies import Answer, Body, Timestamp
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store.log import claim_offset, freshness, recompute_formed

router = APIRouter(route_class=StrictRoute)

ROLES = ("user", "assistant", "system", "tool")
MAX_MESSAGES = 64
MAX_MESSAGE_BYTES = 65_536
MAX_TURN_BYTES = 262_144


class ObservedMessage(Body):
    role: str
    content: str
    group_ordinal: int | None = None
    occurred_at: Timestamp | None = None


class Observation(Body):
    idempotency_key: str | None = None
    data_subject_id: str | None = None
    occurred_at: Timestamp | None = None
    messages: list[ObservedMessage]


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
    """Validate a turn under the contract's limits; return each message's group ordinal."""
    if not messages:
        raise _invalid("turn has no messages")
    if len(messages) > MAX_MESSAGES:
        raise _invalid(f"turn has more than {MAX_MESSAGES} messages")
    explicit = messages[0].group_ordinal is not None
    if any((m.group_ordinal is not None) != explicit for m in messages):
        raise _invalid("group_ordinal must be supplied for every message or omitted for all")
    if not explicit and any(m.role == "tool" for m in messages):
        raise _invalid("turns containing tool messages require explicit group ordinals")
    total = 0
    groups: list[int] = []
    for index, message in enumerate(messages):
        size = len(message.content.encode("utf-8"))
        if size > MAX_MESSAGE_BYTES:
            raise _invalid(f"message exceeds {MAX_MESSAGE_BYTES} UTF-8 bytes")
        total += size
        if total > MAX_TURN_BYTES:
            raise _invalid(f"observation content exceeds {MAX_TURN_BYTES} UTF-8 bytes")
        if message.role not in ROLES:
            raise _invalid(
                f"message {index} has role {message.role!r}, which is not one of "
                "user, assistant, system, tool"
            )
        if not message.content.strip():
            raise _invalid(f"message {index} ({message.role}) has no content")
        group = message.group_ordinal if explicit else index
        assert group is not None
        previous = groups[-1] if groups else None
        if (
            group < 0
            or (previous is None and group != 0)
            or (previous is not None and group not in (previous, previous + 1))
        ):
            raise _invalid(f"message {index} has a noncontiguous group ordinal {group}")
        groups.append(group)
    return groups


def idempotency_key(text: str | None) -> uuid.UUID | None:
    if not text:
        return None
    try:
        key = uuid.UUID(text)
    except ValueError:
        key = None
    if key is None or len(text) != 36:
        raise _invalid("idempotency_key must be a UUID")
    return key


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
    key = idempotency_key(body.idempotency_key)
    subject = body.data_subject_id or None
    turn_time = (body.occurred_at or datetime.now(UTC)).astimezone(UTC)
    digest = key_digest("observe/v1:", key) if key else None
    print_ = fingerprint(grant.project, subject, body.messages, groups)
    formed_now = request.app.state.settings.form_on_store
    async with request.app.state.pool.connection() as conn, conn.transaction():
        if digest is not None:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (grant.project_id, str(key))
            )
            cursor = await conn.execute(
                "SELECT r.fingerprint, o.id, o.log_offset FROM retry_keys r "
                "LEFT JOIN observations o ON o.id = r.observation_id "
                "WHERE r.project_id = %s AND r.key_digest = %s",
                (grant.project_id, digest),
            )
            seen = await cursor.fetchone()
            if seen is not None:
                if seen[1] is None or bytes(seen[0]) != print_:
                    raise ApiError(
                        409,
                        "idempotency_conflict",
                        "idempotency key was already used for a different or erased observation",
                    )
                return Receipt(id=str(seen[1]), scope=grant.project, log_offset=seen[2])
        offset = await claim_offset(conn, grant.project_id)
        observation_id = uuid.uuid4()
        await conn.execute(
            "INSERT INTO observations (id, project_id, log_offset, data_subject_id, occurred_at,"
            " formed_at) VALUES (%s, %s, %s, %s, %s, CASE WHEN %s THEN now() END)",
            (observation_id, grant.project_id, offset, subject, turn_time, formed_now),
        )
        async with conn.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO messages (id, observation_id, project_id, data_subject_id, ordinal,"
                " role, content, group_ordinal, occurred_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        uuid.uuid4(),
                        observation_id,
                        grant.project_id,
                        subject,
                        index,
                        message.role,
                        message.content,
                        group,
                        (message.occurred_at or turn_time).astimezone(UTC),
                    )
                    for index, (message, group) in enumerate(
                        zip(body.messages, groups, strict=True)
                    )
                ],
            )
        if digest is not None:
            await conn.execute(
                "INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
                " VALUES (%s, %s, %s, %s)",
                (grant.project_id, digest, print_, observation_id),
            )
        await recompute_formed(conn, grant.project_id)
    return Receipt(id=str(observation_id), scope=grant.project, log_offset=offset)


@router.get("/v1/freshness", response_model=Freshness, **access("read"))
async def get_freshness(
    request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Freshness:
    async with request.app.state.pool.connection() as conn:
        return Freshness(**await freshness(conn, grant.project_id))
