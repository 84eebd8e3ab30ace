"""Entities: pages of a project's entities, one by id, candidates a question may name, and the
purge of one.

A purge is for the system's own mistake (a name read as an entity that is not one, two people
merged into one), not for a person's data: the observations and messages stay, so the evidence of
the mistake stays. The preview is the purge itself, run in full and rolled back, so what a caller
approves is exactly what a confirmed call does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import Invalid, NotFound
from satchel.memory.service.questions import QuestionRefused, terms
from satchel.memory.spelling import MIN_LETTERS, Similar, ranked
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import (
    Stored,
    entities_spelled_like,
    entity_count,
    entity_of,
    entity_page,
)
from satchel.memory.store.entity_purge import claimants, lock_entity, withdraw
from satchel.memory.store.facts import lock_log


@dataclass(frozen=True, slots=True)
class Candidates:
    """The entities a question may name, most similar first; how many entities the project
    holds; and whether a window had more entities than were scored."""

    similar: list[Similar]
    target_count: int
    approximate: bool


@dataclass(frozen=True, slots=True)
class Purged:
    """What a purge did (or, previewed, would do): rows removed and left per kind, who it cost."""

    entity_id: uuid.UUID
    canonical_name: str
    previewed: bool
    removed: dict[str, int]
    residual: dict[str, int]
    contributing_subjects: int
    claims_from_unattributed_turns: int
    source_turns_kept: int
    completed_at: datetime


def _missing() -> NotFound:
    return NotFound("entity not found")


async def page(
    pool: AsyncConnectionPool, project_id: int, after: uuid.UUID | None, limit: int
) -> list[Stored]:
    """The project's entities after `after`, in id order, at most `limit`."""
    async with pool.connection() as conn:
        return await entity_page(conn, project_id, after, limit)


async def get(pool: AsyncConnectionPool, project_id: int, entity_id: uuid.UUID) -> Stored:
    """The project's entity `entity_id`."""
    async with pool.connection() as conn:
        found = await entity_of(conn, project_id, entity_id)
    if found is None:
        raise _missing()
    return found


async def candidates(
    pool: AsyncConnectionPool, project_id: int, question: str, limit: int, scored: int | None
) -> Candidates:
    """Up to `limit` entities whose spelling is like a window of `question`'s, scoring at most
    `scored` entities per window (None: every one sharing the window's spelling key)."""
    try:
        windows = terms(question)
    except QuestionRefused as refused:
        raise Invalid(f"question: {refused}", "invalid_entity_candidate_query") from None
    windows = [w for w in windows if sum(c.isalpha() for c in w) >= MIN_LETTERS]
    async with pool.connection() as conn:
        found = await entities_spelled_like(conn, project_id, None, windows, scored)
        target_count = await entity_count(conn, project_id)
    per_window: dict[str, int] = {}
    for window, _ in found:
        per_window[window] = per_window.get(window, 0) + 1
    return Candidates(
        ranked(found)[:limit],
        target_count,
        scored is not None and any(n >= scored for n in per_window.values()),
    )


async def _purge(
    conn: Conn, project_id: int, entity_id: uuid.UUID, *, confirm: bool
) -> Purged | None:
    async with conn.transaction(force_rollback=not confirm):
        # The project's log lock first, as erasures, corrections and appends take it, so a purge
        # waits for them (and they for it) instead of deadlocking.
        await lock_log(conn, project_id)
        name = await lock_entity(conn, project_id, entity_id)
        if name is None:
            return None
        subjects, unattributed, turns = await claimants(conn, project_id, entity_id)
        removed, residual = await withdraw(conn, project_id, entity_id)
    return Purged(
        entity_id=entity_id,
        canonical_name=name,
        previewed=not confirm,
        removed=removed,
        residual=residual,
        contributing_subjects=subjects,
        claims_from_unattributed_turns=unattributed,
        source_turns_kept=turns,
        completed_at=datetime.now(UTC),
    )


async def purge(
    pool: AsyncConnectionPool, project_id: int, entity_id: uuid.UUID, *, confirm: bool
) -> Purged:
    """Purge the project's entity `entity_id`, committed only when `confirm`ed; otherwise the
    same transaction is rolled back."""
    async with pool.connection() as conn:
        purged = await _purge(conn, project_id, entity_id, confirm=confirm)
    if purged is None:
        raise _missing()
    return purged
