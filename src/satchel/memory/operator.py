"""What the operator's commands run against a deployment's database: the health report, the
parked turns, unparking one turn; each on a connection of its own that gives up after
`REPORT_TIMEOUT` seconds."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import psycopg

from satchel.memory.service.formation import unpark_one
from satchel.memory.service.operations import HealthReport, ParkedListing, health_report, parked
from satchel.memory.store.database import Conn, connection_slots

REPORT_TIMEOUT = 10.0  # seconds a report's statements may take before the command gives up


def _run[T](url: str, job: Callable[[Conn], Awaitable[T]]) -> T:
    async def run() -> T:
        options = f"-c statement_timeout={int(REPORT_TIMEOUT * 1000)}"
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, options=options, connect_timeout=int(REPORT_TIMEOUT)
        ) as conn:
            return await job(conn)

    return asyncio.run(run())


def health(url: str, stale_after: float) -> HealthReport:
    """The health report of the deployment at `url`."""
    slots = connection_slots(url)
    return _run(url, lambda conn: health_report(conn, slots, stale_after))


def parked_turns(url: str, project: str | None, limit: int) -> list[ParkedListing]:
    """The parked turns' metadata (of one project, or all), longest parked first."""
    return _run(url, lambda conn: parked(conn, project, limit))


def unpark_turn(url: str, observation_id: uuid.UUID) -> bool:
    """Put the parked turn `observation_id` back in line; false when no parked turn has it."""
    return _run(url, lambda conn: unpark_one(conn, observation_id))
