"""The workers' heartbeats: each formation worker's row (host, pid, beat, totals, last failure),
written by the worker and read by readiness, metrics and the health report."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from psycopg.rows import class_row

from satchel.memory.store.database import Conn


@dataclass(slots=True)
class WorkerTotals:
    """What one worker process has done since it started, and what failed last."""

    formed: int = 0
    failed: int = 0
    embedded: int = 0
    last_failure: str | None = None
    last_failure_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A worker as its row says: who, when it last reported in, and its totals."""

    id: uuid.UUID
    host: str
    pid: int
    started_at: datetime
    beat_at: datetime
    stopped_at: datetime | None
    beat_age: float  # seconds since `beat_at`, by the database's clock
    formed: int
    failed: int
    embedded: int
    last_failure: str | None
    last_failure_at: datetime | None


async def beat(conn: Conn, worker_id: uuid.UUID, host: str, pid: int, totals: WorkerTotals) -> None:
    """Report in: the worker's row is made or brought up to date, `beat_at` now."""
    await conn.execute(
        "INSERT INTO workers (id, host, pid, formed, failed, embedded, last_failure,"
        " last_failure_at) VALUES (%(id)s, %(host)s, %(pid)s, %(formed)s, %(failed)s,"
        " %(embedded)s, %(failure)s, %(failure_at)s)"
        " ON CONFLICT (id) DO UPDATE SET beat_at = now(), stopped_at = NULL,"
        " formed = excluded.formed, failed = excluded.failed, embedded = excluded.embedded,"
        " last_failure = excluded.last_failure, last_failure_at = excluded.last_failure_at",
        {
            "id": worker_id,
            "host": host,
            "pid": pid,
            "formed": totals.formed,
            "failed": totals.failed,
            "embedded": totals.embedded,
            "failure": totals.last_failure,
            "failure_at": totals.last_failure_at,
        },
    )


async def stopped(conn: Conn, worker_id: uuid.UUID) -> None:
    """The worker stopped of its own accord: it no longer counts as running."""
    await conn.execute(
        "UPDATE workers SET stopped_at = now() WHERE id = %s AND stopped_at IS NULL", (worker_id,)
    )


async def freshest_beat_age(conn: Conn) -> float | None:
    """Seconds since the running workers' latest beat; None when no worker runs."""
    cursor = await conn.execute(
        "SELECT extract(epoch FROM now() - max(beat_at))::float8 FROM workers"
        " WHERE stopped_at IS NULL"
    )
    row = await cursor.fetchone()
    return None if row is None or row[0] is None else float(row[0])


async def recent_workers(conn: Conn, within: float) -> list[WorkerRow]:
    """The workers that reported in during the last `within` seconds, freshest first."""
    async with conn.cursor(row_factory=class_row(WorkerRow)) as cursor:
        await cursor.execute(
            "SELECT id, host, pid, started_at, beat_at, stopped_at,"
            " extract(epoch FROM now() - beat_at)::float8 AS beat_age, formed, failed, embedded,"
            " last_failure, last_failure_at FROM workers"
            " WHERE beat_at > now() - make_interval(secs => %s) ORDER BY beat_at DESC",
            (within,),
        )
        return await cursor.fetchall()
