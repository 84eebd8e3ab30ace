"""The operator's reports: the health report (turns stored, formed, waiting and parked, the oldest
waiting, the workers' heartbeats and last failure, the server's connections, per project) and the
parked turns' metadata. Both only read; neither holds a subject or content."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from satchel.memory.service.formation import failure_category
from satchel.memory.store import formation as store
from satchel.memory.store.counts import ProjectCounts, database_now, project_counts
from satchel.memory.store.database import Conn, ConnectionSlots
from satchel.memory.store.workers import WorkerRow, recent_workers

WORKERS_SHOWN_WITHIN = 86_400.0  # seconds: the report lists the workers that beat in this time


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the deployment is not healthy: a stable code, and what to do in one line."""

    code: str
    message: str


@dataclass(slots=True)
class HealthReport:
    """The health report; `problems` empty means healthy."""

    stored: int
    formed: int
    pending: int
    parked: int
    oldest_pending_at: datetime | None
    oldest_pending_age_seconds: float | None
    live_workers: int
    workers: list[WorkerRow]
    last_failure: str | None
    last_failure_at: datetime | None
    connections: ConnectionSlots
    projects: list[ProjectCounts]
    problems: list[Problem] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems


async def health_report(conn: Conn, slots: ConnectionSlots, stale_after: float) -> HealthReport:
    """The report now. A worker is live when it runs and reported in within `stale_after`
    seconds; the problems are turns waiting with no live worker, turns waiting longer than
    that, and parked turns."""
    now = await database_now(conn)
    projects = await project_counts(conn)
    workers = await recent_workers(conn, WORKERS_SHOWN_WITHIN)
    live = [w for w in workers if w.stopped_at is None and w.beat_age <= stale_after]
    failed = [w for w in workers if w.last_failure_at is not None]
    last = max(failed, key=lambda w: w.last_failure_at or now, default=None)
    oldest = min((p.oldest_pending_at for p in projects if p.oldest_pending_at), default=None)
    report = HealthReport(
        stored=sum(p.stored for p in projects),
        formed=sum(p.formed for p in projects),
        pending=sum(p.pending for p in projects),
        parked=sum(p.parked for p in projects),
        oldest_pending_at=oldest,
        oldest_pending_age_seconds=None if oldest is None else (now - oldest).total_seconds(),
        live_workers=len(live),
        workers=workers,
        last_failure=None if last is None else last.last_failure,
        last_failure_at=None if last is None else last.last_failure_at,
        connections=slots,
        projects=projects,
    )
    report.problems = _problems(report, stale_after)
    return report


def _problems(report: HealthReport, stale_after: float) -> list[Problem]:
    problems = []
    if report.pending and not report.live_workers:
        problems.append(
            Problem(
                "no_worker",
                f"{report.pending} turn(s) wait and no worker reported in within"
                f" {stale_after:g} s: start `satchel worker` (or `satchel serve`)",
            )
        )
    waited = report.oldest_pending_age_seconds
    if waited is not None and waited > stale_after and report.live_workers:
        problems.append(
            Problem(
                "stalled",
                f"the oldest waiting turn has waited {waited:.0f} s (more than"
                f" {stale_after:g} s): see the workers' last failure and their logs",
            )
        )
    if report.parked:
        problems.append(
            Problem(
                "parked",
                f"{report.parked} turn(s) are parked: list them with `satchel formation"
                " parked`, fix the cause, then `satchel formation unpark`",
            )
        )
    return problems


@dataclass(frozen=True, slots=True)
class ParkedListing:
    """One parked turn as the operator sees it: metadata and the kind of its last failure."""

    id: uuid.UUID
    project: str
    kind: str
    log_offset: int
    attempts: int
    stored_at: datetime
    parked_at: datetime
    failure: str | None


async def parked(conn: Conn, project: str | None, limit: int) -> list[ParkedListing]:
    """Up to `limit` parked turns (of one project by name, or all), longest parked first."""
    return [
        ParkedListing(
            turn.id,
            turn.project,
            turn.kind,
            turn.log_offset,
            turn.attempts,
            turn.stored_at,
            turn.parked_at,
            failure_category(turn.last_error),
        )
        for turn in await store.parked_turns(conn, project, limit)
    ]
