"""Recovery: put back the facts formation admitted that are gone, from the newest receipt of each
source, with no model call; never a fact that was retracted, corrected or withdrawn, nor one
erased or expired with its source (its receipt went with it)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

import psycopg

from satchel.memory.service.retention import UnknownProject
from satchel.memory.store import receipts, recovery
from satchel.memory.store import retention as projects
from satchel.memory.store.database import Conn
from satchel.memory.store.facts import cardinalities, lock_log
from satchel.memory.store.supersession import RecordConflict


class NoReceipt(LookupError):
    """A source with no formation receipt in the project."""

    def __init__(self, project: str, source: uuid.UUID) -> None:
        super().__init__(
            f"no formation receipt for source {source} in project {project!r}: give the id of a"
            " turn a model formed, or leave --source out"
        )


@dataclass(slots=True)
class Recovered:
    """What a recovery found: sources read, facts put back, facts still there, facts withdrawn
    (never put back), and sources whose facts now conflict with others (left as they are)."""

    sources: int = 0
    restored: int = 0
    present: int = 0
    withdrawn: int = 0
    refused: list[uuid.UUID] = field(default_factory=list)


async def _source(conn: Conn, project_id: int, receipt: receipts.Receipt, found: Recovered) -> None:
    """Put back the receipt's missing facts in admission order, in a savepoint: a conflict with
    the facts now there undoes this source only."""
    ids = [uuid.UUID(fact["id"]) for fact in receipt.facts]
    there = await recovery.present(conn, ids)
    withdrawn = set(receipt.withdrawn)
    missing = [
        fact
        for fact, fact_id in zip(receipt.facts, ids, strict=True)
        if fact_id not in there and fact_id not in withdrawn
    ]
    found.present += len(there)
    found.withdrawn += len(withdrawn - there)
    if not missing:
        return
    admitted = await cardinalities(conn, [fact["predicate"] for fact in missing])
    try:
        async with conn.transaction():
            for fact in missing:
                await recovery.restore(
                    conn, project_id, receipt.data_subject_id, receipt.observation_id, fact
                )
                if admitted.get(fact["predicate"]) == "one":
                    await recovery.close(
                        conn,
                        project_id,
                        uuid.UUID(fact["id"]),
                        receipt.observation_id,
                        receipt.formed_at,
                    )
    except RecordConflict:
        found.refused.append(receipt.observation_id)
        return
    found.restored += len(missing)


async def recover(
    conn: Conn, project: str, source: uuid.UUID | None, *, dry_run: bool = False
) -> Recovered:
    """Put back the project's lost facts (of `source` alone, when given) in one transaction,
    holding the project's log lock; with `dry_run`, count what would come back and change
    nothing."""
    found = Recovered()
    async with conn.transaction(force_rollback=dry_run):
        project_id = await projects.project_id(conn, project)
        if project_id is None:
            raise UnknownProject(project)
        await lock_log(conn, project_id)
        newest = await receipts.newest(conn, project_id, source)
        if source is not None and not newest:
            raise NoReceipt(project, source)
        for receipt in newest:
            found.sources += 1
            await _source(conn, project_id, receipt, found)
    return found


def recover_facts(
    url: str, project: str, source: uuid.UUID | None, *, dry_run: bool = False
) -> Recovered:
    """`recover` on a connection of its own to the database at `url`, for the manage command."""

    async def run() -> Recovered:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            return await recover(conn, project, source, dry_run=dry_run)

    return asyncio.run(run())


__all__ = ["NoReceipt", "Recovered", "UnknownProject", "recover", "recover_facts"]
