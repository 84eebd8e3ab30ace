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
from satchel.memory.store.log import freshness

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


# One round trip: claim the next offset (moving `formed` with it when this turn is formed at
# once and none before it waits), then write the turn, its messages and its retry key.
APPEND = (
    "WITH claimed AS (UPDATE projects SET stored = COALESCE(stored, -1) + 1,"
    " formed = CASE WHEN %(formed)s AND NOT EXISTS (SELECT 1 FROM observations u"
    "  WHERE u.project_id = %(p)s AND u.formed_at IS NULL AND u.parked_at IS NULL)"
    "  THEN COALESCE(stored, -1) + 1 ELSE formed END"
    " WHERE id = %(p)s RETURNING stored),"
    " turn AS (INSERT INTO observations (id, project_id, log_offset, data_subject_id,"
    "  occurred_at, formed_at) SELECT %(o)s, %(p)s, stored, %(s)s, %(t)s,"
    "  CASE WHEN %(formed)s THEN now() END FROM claimed RETURNING id, log_offset),"
    " said AS (INSERT INTO messages (id, observation_id, project_id, data_subject_id, ordinal,"
    "  role, content, group_ordinal, occurred_at)"
    "  SELECT m.id, turn.id, %(p)s, %(s)s, m.n - 1, m.role, m.content, m.g, m.at FROM turn,"
    "  unnest(%(ids)s::uuid[], %(roles)s::text[], %(contents)s::text[], %(groups)s::int[],"
    "  %(times)s::timestamptz[]) WITH ORDINALITY AS m(id, role, content, g, at, n)),"
    " keyed AS (INSERT INTO retry_keys (project_id, key_digest, fingerprint, observation_id)"
    "  SELECT %(p)s, %(d)s, %(f)s, turn.id FROM turn WHERE %(d)s::bytea IS NOT NULL)"
    " SELECT log_offset FROM turn"
)


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
        if "\x00" in message.content:
            raise _invalid(f"message {index} ({message.role}) contains a NUL character")
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
    if subject is not None and "\x00" in subject:
        raise _invalid("data_subject_id must not contain a NUL character")
    turn_time = (body.occurred_at or datetime.now(UTC)).astimezone(UTC)
    digest = key_digest("observe/v1:", key) if key else None
    print_ = fingerprint(grant.project, subject, body.messages, groups)
    formed_now = request.app.state.settings.form_on_store
    async with request.app.state.pool.connection() as conn, conn.transaction():
        if digest is not None:
            await conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (grant.project_id, str(key)),
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
        observation_id = uuid.uuid4()
        cursor = await conn.execute(
            APPEND,
            {
                "p": grant.project_id,
                "o": observation_id,
                "s": subject,
                "t": turn_time,
                "formed": formed_now,
                "d": digest,
                "f": print_,
                "ids": [uuid.uuid4() for _ in body.messages],
                "roles": [m.role for m in body.messages],
                "contents": [m.content for m in body.messages],
                "groups": groups,
                "times": [(m.occurred_at or turn_time).astimezone(UTC) for m in body.messages],
            },
        )
        row = await cursor.fetchone()
        assert row is not None
        offset: int = row[0]
    return Receipt(id=str(observation_id), scope=grant.project, log_offset=offset)


@router.get("/v1/freshness", response_model=Freshness, **access("read"))
async def get_freshness(
    request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Freshness:
    async with request.app.state.pool.connection() as conn:
        return Freshness(**await freshness(conn, grant.project_id))
