"""What a metrics scrape reads from the database, in one statement: the backlog, parked turns and
the oldest pending turn (through the partial indexes of unformed and parked turns), the turns
stored, and the workers' totals and freshest heartbeat."""

from __future__ import annotations

from dataclasses import dataclass

from satchel.memory.store.database import Conn
from satchel.memory.store.notifications import waiting_counts

FIGURES = """
WITH pending AS (
    SELECT o.project_id,
        count(*) FILTER (WHERE o.parked_at IS NULL) AS backlog,
        count(*) FILTER (WHERE o.parked_at IS NOT NULL) AS parked,
        min(o.stored_at) FILTER (WHERE o.parked_at IS NULL) AS oldest
    FROM observations o
    WHERE (o.formed_at IS NULL AND o.parked_at IS NULL) OR o.parked_at IS NOT NULL
    GROUP BY o.project_id
), w AS (
    SELECT coalesce(sum(formed), 0)::bigint AS formed,
        coalesce(sum(failed), 0)::bigint AS failed,
        coalesce(sum(embedded), 0)::bigint AS embedded,
        count(*) FILTER (WHERE stopped_at IS NULL
            AND beat_at > now() - make_interval(secs => %(within)s)) AS live,
        extract(epoch FROM now() - max(beat_at) FILTER (WHERE stopped_at IS NULL))::float8
            AS beat_age
    FROM workers
), per AS (
    SELECT CASE WHEN %(by_project)s THEN p.name END AS project,
        sum(coalesce(p.stored + 1, 0))::bigint AS stored,
        coalesce(sum(q.backlog), 0)::bigint AS backlog,
        coalesce(sum(q.parked), 0)::bigint AS parked,
        coalesce(extract(epoch FROM now() - min(q.oldest)), 0)::float8 AS oldest_age
    FROM projects p LEFT JOIN pending q ON q.project_id = p.id
    GROUP BY 1
)
SELECT w.formed, w.failed, w.embedded, w.live, w.beat_age,
    per.project, per.stored, per.backlog, per.parked, per.oldest_age
FROM w LEFT JOIN per ON true
"""


@dataclass(frozen=True, slots=True)
class LogFigures:
    """A project's log (`project` None: all projects together): turns stored since it began,
    turns waiting to be formed, turns parked, and the age in seconds of the oldest waiting."""

    project: str | None
    stored: int
    backlog: int
    parked: int
    oldest_age: float


@dataclass(frozen=True, slots=True)
class Figures:
    """The workers' totals (rows of stopped workers included), how many reported in recently,
    the seconds since the freshest running worker's beat (None: none runs), the logs, and the
    notification deliveries waiting to be sent and parked."""

    formed: int
    failed: int
    embedded: int
    live_workers: int
    beat_age: float | None
    logs: list[LogFigures]
    deliveries_pending: int = 0
    deliveries_parked: int = 0


async def figures(conn: Conn, *, by_project: bool, live_within: float) -> Figures:
    """The figures now; the logs one a project when `by_project`, else summed into one."""
    cursor = await conn.execute(FIGURES, {"by_project": by_project, "within": live_within})
    rows = await cursor.fetchall()
    formed, failed, embedded, live, beat_age = rows[0][:5]
    logs = [
        LogFigures(project, stored or 0, backlog or 0, parked or 0, oldest or 0.0)
        for *_, project, stored, backlog, parked, oldest in rows
        if stored is not None
    ]
    if not by_project and not logs:
        logs = [LogFigures(None, 0, 0, 0, 0.0)]
    pending, parked = await waiting_counts(conn)
    return Figures(formed, failed, embedded, live, beat_age, logs, pending, parked)
