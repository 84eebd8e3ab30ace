"""Feedback: reports that a record is wrong, and acting on them.

Recording changes nothing else. Promotion runs the correction (a proposed object) or the
retraction (none) a caller could have sent, credited to the promoter, in one transaction with the
report's promotion mark, so a report is promoted once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from satchel.memory.domain import MAX_EVIDENCE, Conflict, Feedback, NotFound, TooLarge
from satchel.memory.store import facts
from satchel.memory.store import feedback as store
from satchel.memory.store.database import Conn
from satchel.memory.store.supersession import RecordConflict


@dataclass(frozen=True, slots=True)
class Promoted:
    """What a promotion did: the report, the record's replacement (None: it was retracted), the
    version the change left and when."""

    report: Feedback
    replacement_record_id: uuid.UUID | None
    version: uuid.UUID
    at: datetime


def _record_missing() -> NotFound:
    return NotFound("record not found")


async def record(
    pool: AsyncConnectionPool,
    project_id: int,
    recorded_by: uuid.UUID,
    fact_id: uuid.UUID,
    note: str,
    proposed_object: str | None,
) -> Feedback:
    """Write a report about the project's record `fact_id`, changing nothing else."""
    async with pool.connection() as conn, conn.transaction():
        written = await store.record(
            conn, project_id, recorded_by, fact_id, note, proposed_object, datetime.now(UTC)
        )
    if written is None:
        raise _record_missing()
    return written


async def page(
    pool: AsyncConnectionPool,
    project_id: int,
    fact_id: uuid.UUID | None,
    open_only: bool,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[Feedback]:
    """Up to `limit` reports of the project (or of one record), newest first, after `after`."""
    async with pool.connection() as conn:
        return await store.page(conn, project_id, fact_id, open_only, after, limit)


async def _target(
    conn: Conn, project_id: int, fact_id: uuid.UUID, version: uuid.UUID, *, correct: bool
) -> facts.Target:
    """The report's record, locked: at the expected version and still known (a correction also
    needs it still valid), else 409; with bounded evidence, else 413."""
    target = (await facts.lock_targets(conn, project_id, [fact_id])).get(fact_id)
    if target is None:
        raise _record_missing()
    if (
        target.version != version
        or target.known_until is not None
        or (correct and target.valid_until is not None)
    ):
        raise Conflict("the record changed or is closed; read it again", "record_conflict")
    if target.evidence > MAX_EVIDENCE:
        raise TooLarge(
            f"a record with more than {MAX_EVIDENCE} pieces of evidence cannot be changed here",
            "record_mutation_limit",
        )
    return target


async def promote(
    pool: AsyncConnectionPool,
    project_id: int,
    promoter: uuid.UUID,
    feedback_id: uuid.UUID,
    version: uuid.UUID,
) -> Promoted:
    """Correct (the report proposes an object) or retract the report's record at `version`,
    credited to `promoter`, and mark the report promoted, in one transaction."""
    at = datetime.now(UTC)
    async with pool.connection() as conn, conn.transaction():
        # The log lock first, as corrections and erasures take it; then the report, so racing
        # promotions queue on it and the later one finds it promoted.
        await facts.lock_log(conn, project_id)
        report = await store.lock(conn, project_id, feedback_id)
        if report is None:
            raise NotFound("feedback not found")
        if report.promoted_at is not None:
            raise Conflict(
                "this feedback was already promoted; stop here", "feedback_already_promoted"
            )
        correct = report.proposed_object is not None
        target = await _target(conn, project_id, report.fact_id, version, correct=correct)
        replacement: facts.Written | None = None
        if report.proposed_object is not None:
            admitted = await facts.cardinalities(conn, [target.predicate])
            claim = facts.Claim(
                target.data_subject_id,
                target.subject,
                target.predicate,
                report.proposed_object,
                report.note,
                at,
            )
            replacement = facts.Written(uuid.uuid4(), uuid.uuid4())
            await facts.retract(conn, target, promoter, at, replacement)
            try:
                await facts.assert_claim(
                    conn,
                    project_id,
                    promoter,
                    claim,
                    admitted.get(target.predicate, "many"),
                    at,
                    replacement,
                )
            except RecordConflict:
                raise Conflict(
                    "the proposed object conflicts with a single-valued record believed over the"
                    " same time; correct that record instead",
                    "record_conflict",
                ) from None
            new_version = (await facts.versions(conn, [replacement.id]))[replacement.id]
        else:
            new_version = (await facts.retract(conn, target, promoter, at)).version
        replacement_id = replacement.id if replacement else None
        await store.mark_promoted(conn, report.id, promoter, at, replacement_id)
    return Promoted(report, replacement_id, new_version, at)
