"""Observing turns: the turn's rules across its messages, its idempotency (a key's digest and the
content a retry must repeat), its append, and the project's freshness."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Busy, Conflict, Invalid
from satchel.memory.store.appends import Appender
from satchel.memory.store.log import NewMessage, NewTurn, freshness
from satchel.memory.store.rebuilds import rebuild_progress

MAX_MESSAGES = 64
MAX_TURN_BYTES = 262_144
OBSERVE_NAMESPACE = "observe/v1:"


class TurnMessage(Protocol):
    """One message of a turn as the caller gave it."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def group_ordinal(self) -> int | None: ...
    @property
    def occurred_at(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class Stored:
    """Where a turn is in the log (a retry's: where the first attempt put it)."""

    observation_id: uuid.UUID
    log_offset: int


def _invalid(message: str) -> Invalid:
    return Invalid(message, "invalid_turn")


def groups_of(messages: Sequence[TurnMessage]) -> list[int]:
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


def fingerprint(
    scope: str, subject: str | None, messages: Sequence[TurnMessage], groups: list[int]
) -> bytes:
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


async def observe(
    appender: Appender,
    project_id: int,
    project: str,
    key: uuid.UUID | None,
    subject: str | None,
    occurred_at: datetime | None,
    messages: Sequence[TurnMessage],
) -> Stored:
    """Append one turn to the project's log, once per idempotency key: a retry answers where the
    first attempt put it; a key used for other content (or an erased turn) is a conflict, and a
    backlog past its limit says to retry later."""
    groups = groups_of(messages)
    turn_time = occurred_at or datetime.now(UTC)
    digest = key_digest(OBSERVE_NAMESPACE, key) if key else None
    content = fingerprint(project, subject, messages, groups)
    new_messages = [
        NewMessage(m.role, m.content, group, m.occurred_at or turn_time)
        for m, group in zip(messages, groups, strict=True)
    ]
    observation_id = uuid.uuid4()
    outcome = await appender.append(
        project_id, NewTurn(observation_id, subject, turn_time, new_messages, digest, content)
    )
    if isinstance(outcome, int):
        return Stored(observation_id, outcome)
    if outcome is None:
        raise Busy("too many turns are waiting to form; retry later with the same idempotency key")
    if outcome.observation_id is None or outcome.fingerprint != content:
        raise Conflict(
            "idempotency key was already used for a different or erased observation",
            "idempotency_conflict",
        )
    assert outcome.log_offset is not None
    return Stored(outcome.observation_id, outcome.log_offset)


async def freshness_of(pool: AsyncConnectionPool, project_id: int) -> dict[str, Any]:
    """The project's name, highest stored and formed offsets, how many turns are parked, and
    while a rebuild is active, how far it got."""
    async with pool.connection() as conn:
        found = await freshness(conn, project_id)
        rebuilding = await rebuild_progress(conn, project_id)
    return found if rebuilding is None else {**found, "rebuilding": rebuilding}
