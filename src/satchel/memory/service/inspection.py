"""The inspector's read-only use cases: pages of a project's data subjects, a subject's turns and
segments, its parked turns (metadata and failure category only), and whether a worker runs.

Each page is read with one more row than asked, so the caller knows whether another follows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from satchel.memory.service.formation import failure_category
from satchel.memory.store import inspection
from satchel.memory.store.contexts import read_only_snapshot
from satchel.memory.store.formation import ParkedTurn
from satchel.memory.store.inspection import (
    DataSubject,
    MessageRow,
    SegmentRow,
    TurnRow,
)


@dataclass(frozen=True, slots=True)
class Turn:
    """A stored turn with its messages in order."""

    row: TurnRow
    messages: list[MessageRow]


@dataclass(frozen=True, slots=True)
class Parked:
    """A parked turn's metadata and the kind of its last failure."""

    row: ParkedTurn
    failure: str | None


@dataclass(frozen=True, slots=True)
class WorkerState:
    """How many formation workers run and how long ago the freshest one reported in."""

    running: int
    beat_age: float | None


async def data_subjects(
    pool: AsyncConnectionPool, project_id: int, after: str | None, limit: int
) -> list[DataSubject]:
    """Up to `limit + 1` data subjects of the project's log."""
    async with pool.connection() as conn:
        return await inspection.data_subjects(conn, project_id, after, limit + 1)


async def subject_turns(
    pool: AsyncConnectionPool, project_id: int, subject: str, after: int | None, limit: int
) -> list[Turn]:
    """Up to `limit + 1` of the subject's turns with their messages, read in one snapshot."""
    async with pool.connection() as conn, conn.transaction():
        await read_only_snapshot(conn)
        rows = await inspection.subject_turns(conn, project_id, subject, after, limit + 1)
        messages = await inspection.turn_messages(conn, project_id, [row.id for row in rows])
    by_turn: dict[uuid.UUID, list[MessageRow]] = {row.id: [] for row in rows}
    for message in messages:
        by_turn[message.observation_id].append(message)
    return [Turn(row, by_turn[row.id]) for row in rows]


async def subject_segments(
    pool: AsyncConnectionPool, project_id: int, subject: str, after: uuid.UUID | None, limit: int
) -> list[SegmentRow]:
    """Up to `limit + 1` of the subject's segments."""
    async with pool.connection() as conn:
        return await inspection.subject_segments(conn, project_id, subject, after, limit + 1)


async def parked_turns(
    pool: AsyncConnectionPool, project_id: int, after: int | None, limit: int
) -> list[Parked]:
    """Up to `limit + 1` of the project's parked turns, each with its failure's category."""
    async with pool.connection() as conn:
        rows = await inspection.parked_turns(conn, project_id, after, limit + 1)
    return [Parked(row, failure_category(row.last_error)) for row in rows]


async def worker_state(pool: AsyncConnectionPool) -> WorkerState:
    """The deployment's formation workers as their heartbeats say."""
    async with pool.connection() as conn:
        running, age = await inspection.running_workers(conn)
    return WorkerState(running, age)
