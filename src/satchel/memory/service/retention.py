"""Retention: projects' policies, and the sweep that deletes what is past its deadline.

A turn expires `keep_days` after it was stored. A sweep deletes each project's expired turns
with everything derived from them, as an erasure by source does, a batch a transaction; then its
expired artifacts; counts again what is left past its deadline (the residual), lists the subjects
idle past the policy, and writes a receipt. `now` is a parameter: the database's clock unless
given.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import errors
from psycopg_pool import AsyncConnectionPool

from satchel.memory.store import artifacts, erasure
from satchel.memory.store import retention as store
from satchel.memory.store.database import Conn, autocommitting
from satchel.memory.store.derived import Scope
from satchel.memory.store.retention import Policy, Sweep

BATCH = 500  # expired turns deleted in one transaction
ATTEMPTS = 3
RECEIPTS = 20  # receipts listed unless asked for more


class UnknownProject(ValueError):
    """A project name no token was ever created for."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no project {name!r}: create it with `satchel tokens create --project {name}`"
        )


def _days(value: int | None, option: str) -> None:
    if value is not None and value < 1:
        raise ValueError(f"{option} must be a whole number of days from 1, not {value}")


async def _project_id(conn: Conn, name: str) -> int:
    found = await store.project_id(conn, name)
    if found is None:
        raise UnknownProject(name)
    return found


async def database_now(conn: Conn) -> datetime:
    cursor = await conn.execute("SELECT clock_timestamp()")
    row = await cursor.fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


async def _remove_batch(
    conn: Conn, project_id: int, deadline: datetime
) -> tuple[int, Counter[str], Counter[str]]:
    """Delete up to `BATCH` expired turns in one transaction: (turns found, deleted, residual).
    A deadlock with a writer that locked a fact first aborts one side; the batch starts over."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            async with conn.transaction():
                await store.lock_sweeps(conn, project_id)
                ids = await store.expired_turns(conn, project_id, deadline, BATCH)
                if not ids:
                    return 0, Counter(), Counter()
                deleted, residual = await erasure.remove(conn, Scope(project_id, None, tuple(ids)))
                return len(ids), Counter(deleted), Counter(residual)
        except errors.DeadlockDetected:
            if attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def sweep_project(
    conn: Conn, project_id: int, now: datetime, policy: Policy | None
) -> Sweep | None:
    """Sweep one project at `now` (on an autocommitting connection). The receipt is written when
    the project has a policy or anything was deleted; None otherwise."""
    deadline = policy.deadline(now) if policy else None
    deleted: Counter[str] = Counter()
    residual: Counter[str] = Counter()
    if deadline is not None:
        while True:
            found, gone, left = await _remove_batch(conn, project_id, deadline)
            deleted.update(gone)
            residual.update(left)
            if found < BATCH:
                break
    async with conn.transaction():
        await store.lock_sweeps(conn, project_id)
        deleted["agent_artifact"] += await artifacts.remove_expired(conn, project_id, now)
        residual.update(await store.count_expired(conn, project_id, deadline, now))
        inactive: list[dict[str, Any]] = []
        if policy is not None and policy.inactive_after_days is not None:
            idle_since = now - timedelta(days=policy.inactive_after_days)
            inactive = await store.inactive_subjects(conn, project_id, idle_since)
        if policy is None and not any(deleted.values()):
            return None
        return await store.write_receipt(
            conn, project_id, now, deadline, dict(deleted), dict(residual), inactive
        )


async def sweep(conn: Conn, now: datetime | None = None, project: str | None = None) -> list[Sweep]:
    """Sweep every project (or the one named) at `now` (default: the database's clock); the
    receipts written."""
    if project is not None:
        ids = [await _project_id(conn, project)]
    else:
        ids = await store.project_ids(conn)
    moment = now or await database_now(conn)
    policies = {policy.project_id: policy for policy in await store.policies(conn)}
    written = []
    for project_id in ids:
        receipt = await sweep_project(conn, project_id, moment, policies.get(project_id))
        if receipt is not None:
            written.append(receipt)
    return written


async def sweep_if_due(pool: AsyncConnectionPool, project_id: int) -> Sweep | None:
    """Before a read: sweep the project at the database's clock if it holds a turn past its
    policy's deadline (one probe of the stored-time index when it holds none)."""
    async with autocommitting(pool) as conn:
        if not await store.anything_expired(conn, project_id):
            return None
        found = await store.policies(conn, project_id)
        if not found:
            return None
        return await sweep_project(conn, project_id, await database_now(conn), found[0])


type _Job[T] = Callable[[Conn], Awaitable[T]]


def _run[T](url: str, job: _Job[T]) -> T:
    """`job` on a connection of its own to the database at `url`, for a manage command."""

    async def run() -> T:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            return await job(conn)

    return asyncio.run(run())


def set_policy(url: str, project: str, keep_days: int, inactive_after_days: int | None) -> None:
    """Keep the project's turns `keep_days` after they were stored; report subjects idle for
    `inactive_after_days` (None: never)."""
    _days(keep_days, "--days")
    _days(inactive_after_days, "--inactive-after")

    async def job(conn: Conn) -> None:
        project_id = await _project_id(conn, project)
        await store.set_policy(conn, project_id, keep_days, inactive_after_days)

    _run(url, job)


def clear_policy(url: str, project: str) -> bool:
    """Keep the project's turns indefinitely again; whether it had a policy."""

    async def job(conn: Conn) -> bool:
        return await store.clear_policy(conn, await _project_id(conn, project))

    return _run(url, job)


def show_policies(url: str, project: str | None) -> list[Policy]:
    """Every project's policy, or the named project's (none when it keeps its turns)."""

    async def job(conn: Conn) -> list[Policy]:
        project_id = None if project is None else await _project_id(conn, project)
        return await store.policies(conn, project_id)

    return _run(url, job)


def sweep_now(url: str, project: str | None, now: datetime | None) -> list[Sweep]:
    """One sweep, of every project or the named one, at `now` (default: the database's clock)."""

    async def job(conn: Conn) -> list[Sweep]:
        return await sweep(conn, now, project)

    return _run(url, job)


def list_receipts(url: str, project: str | None, limit: int = RECEIPTS) -> list[Sweep]:
    """The latest sweep receipts, newest first."""

    async def job(conn: Conn) -> list[Sweep]:
        project_id = None if project is None else await _project_id(conn, project)
        return await store.receipts(conn, project_id, limit)

    return _run(url, job)
