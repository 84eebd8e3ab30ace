"""Formation's use cases: form one claimed turn (or a batch no model reads), record a failed
attempt, unpark turns (of projects, or one by id); each one transaction that first checks the
turn's state."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from satchel.memory.domain import Candidate, Extractor, RejectedClaim
from satchel.memory.store import formation as store
from satchel.memory.store import receipts
from satchel.memory.store.database import Conn
from satchel.memory.store.facts import lock_log
from satchel.memory.store.log import recompute_formed


@dataclass(frozen=True, slots=True)
class Formed:
    """What forming one turn wrote (`done` is false when the turn was gone or formed already)."""

    done: bool
    facts: int = 0
    refused: int = 0


async def record_failure(
    conn: Conn,
    project_id: int,
    turn: store.DueTurn,
    error: str,
    *,
    backoff: float,
    max_backoff: float,
    attempts: int,
) -> bool:
    """Store a failed attempt on the turn: the error, the count and the next try (doubling from
    `backoff` seconds), or park it after `attempts` failures. True when it was parked."""
    async with conn.transaction():
        if not await store.claim_turn(conn, project_id, turn):
            return False
        parked = await store.fail_attempt(
            conn, turn, error, backoff=backoff, max_backoff=max_backoff, attempts=attempts
        )
        await recompute_formed(conn, project_id)
    return parked


async def form(
    conn: Conn,
    project_id: int,
    turn: store.DueTurn,
    outcome: list[Candidate | RejectedClaim],
    extractor: Extractor,
) -> Formed:
    """In one transaction: admit the candidates (a duplicate is rejected), store every rejected
    claim, keep the receipt of what a model's formation admitted, mark the turn formed by
    `extractor`, recompute the watermark.

    Pipelined, so the log lock is held for one round trip per candidate written, not one per
    statement: the claim goes with the lock, and the turn's update and the commit go together."""
    admitted: list[uuid.UUID] = []
    refused = 0
    async with conn.pipeline(), conn.transaction():
        at = await store.claim_turn(conn, project_id, turn)
        if at is None:
            return Formed(False)
        for item in outcome:
            if isinstance(item, Candidate) and (
                fact_id := await store.write_fact(conn, project_id, turn, item, extractor, at)
            ):
                admitted.append(fact_id)
                continue
            if isinstance(item, Candidate):
                item = RejectedClaim("duplicate", store.candidate_fields(item))
            await store.reject_claim(conn, project_id, turn, item, extractor)
            refused += 1
        if extractor.model is not None:
            await receipts.write(
                conn, project_id, turn.id, turn.data_subject_id, extractor, at, admitted
            )
        await store.mark_formed(conn, turn, extractor, at)
        await recompute_formed(conn, project_id)
    return Formed(True, len(admitted), refused)


async def form_without_claims(
    conn: Conn, project_id: int, turns: list[store.DueTurn], extractor: Extractor
) -> int:
    """Form turns no model reads (they have no claims to admit) in one transaction: lock the
    log, mark each turn still unformed formed by `extractor`, recompute the watermark once; how
    many were formed. One round trip for the batch, where `form` takes one per turn."""
    if not turns:
        return 0
    async with conn.pipeline(), conn.transaction():
        await lock_log(conn, project_id)
        formed = await store.mark_all_formed(conn, project_id, [t.id for t in turns], extractor)
        await recompute_formed(conn, project_id)
    return formed


async def unpark(conn: Conn, project: str | None) -> int:
    """Put the parked turns (of one project by name, or of all) back in line; how many."""
    async with conn.transaction():
        ids = await store.lock_projects(conn, project)
        count = await store.unpark_turns(conn, ids)
        for project_id in ids:
            await recompute_formed(conn, project_id)
    return count


async def unpark_one(conn: Conn, observation_id: uuid.UUID) -> bool:
    """Put one parked turn back in line (its project's log locked first, as appends lock it);
    false when no parked turn has that id."""
    project_id = await store.project_of(conn, observation_id)
    if project_id is None:
        return False
    async with conn.transaction():
        await lock_log(conn, project_id)
        if not await store.unpark_turn(conn, observation_id):
            return False
        await recompute_formed(conn, project_id)
    return True


def failure_category(last_error: str | None) -> str | None:
    """What kind of failure a stored formation error was: `transport`, `status NNN` (the model
    server's HTTP status), `reply` (an answer that was not what was asked), or `other`."""
    if last_error is None:
        return None
    if last_error.startswith("transport"):
        return "transport"
    if last_error.startswith("status "):
        return " ".join(last_error.split()[:2])
    if "reply" in last_error:
        return "reply"
    return "other"
