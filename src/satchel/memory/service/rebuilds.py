"""Rebuild use cases: publish one source's re-formed claims in one transaction (its believed
facts retired, the new ones admitted, human edits still winning), and the project jobs' steps."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

from satchel.memory.domain import Candidate, Extractor, RejectedClaim
from satchel.memory.store import formation, rebuilds, receipts
from satchel.memory.store.database import Conn
from satchel.memory.store.entities import normalize
from satchel.memory.store.erasure import lock_erasures
from satchel.memory.store.facts import lock_log
from satchel.memory.store.rebuilds import Blocked, Generation, Job, Source
from satchel.memory.store.supersession import reinterpret, settle


class RebuildRefused(Exception):
    """A rebuild that may not run as asked; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Published:
    """What rebuilding one source did: its generation (None when the source was skipped), and
    whether it was already published under the same key (no model was asked)."""

    generation: Generation | None
    replayed: bool = False


def _blocks(blocked: list[Blocked], claim: Candidate) -> str | None:
    """The human edit that still blocks `claim`: `corrected`, `retracted`, or None."""
    subject, obj = normalize(claim.subject), normalize(claim.object)
    for edit in blocked:
        if edit.subject == subject and edit.predicate == claim.predicate:
            if edit.object is None:
                return "corrected"
            if edit.object == obj:
                return "retracted"
    return None


async def publish(
    conn: Conn,
    project_id: int,
    key: uuid.UUID,
    source: Source,
    outcome: list[Candidate | RejectedClaim],
    extractor: Extractor,
) -> Published:
    """In one transaction: retire the source's believed formed facts, admit its re-formed claims
    (those a correction or retraction blocks are refused with that reason), record the generation.
    A source erased or no longer formed meanwhile is skipped, leaving everything as it was."""
    async with conn.transaction():
        await lock_log(conn, project_id)
        await lock_erasures(conn, project_id, shared=True)
        present = await rebuilds.source(conn, project_id, source.id)
        if present is None or not present.formed or present.kind != "turn":
            return Published(None)
        done = await rebuilds.generation(conn, project_id, key, source.id)
        if done is not None:
            return Published(done, replayed=True)
        cursor = await conn.execute("SELECT now()")
        row = await cursor.fetchone()
        assert row is not None
        at = row[0]
        generation_id = await rebuilds.add_generation(
            conn, project_id, key, source.id, extractor.version(), at
        )
        for fact_id in await rebuilds.believed_facts(conn, source.id):
            await reinterpret(conn, fact_id, generation_id, at)
        blocked = await rebuilds.blocked_claims(conn, source.id)
        await rebuilds.forget_rejections(conn, source.id)
        turn = formation.DueTurn(source.id, source.log_offset, source.data_subject_id, "turn", 0)
        admitted: list[uuid.UUID] = []
        for item in outcome:
            if isinstance(item, Candidate):
                edit = _blocks(blocked, item)
                new_id = None
                if edit is None:
                    new_id = await _admit(conn, project_id, turn, item, extractor, at)
                if new_id is not None:
                    admitted.append(new_id)
                    continue
                fields = formation.candidate_fields(item)
                item = RejectedClaim(edit or "duplicate", fields)
            await formation.reject_claim(conn, project_id, turn, item, extractor)
        await rebuilds.mark_reformed(
            conn, source.id, extractor.model, extractor.prompt, extractor.code
        )
        generation = await rebuilds.count_generation(conn, generation_id, source.id)
        await receipts.write(
            conn, project_id, source.id, source.data_subject_id, extractor, at, admitted
        )
        return Published(generation)


async def _admit(
    conn: Conn,
    project_id: int,
    turn: formation.DueTurn,
    claim: Candidate,
    extractor: Extractor,
    at: datetime,
) -> uuid.UUID | None:
    """Admit one re-formed claim: its fact's id, or None when it duplicates a believed fact.
    Written as many-valued, then a single-valued one is settled: later sources' facts may
    already hold."""
    fact_id = await formation.write_fact(
        conn, project_id, turn, replace(claim, cardinality="many"), extractor, at
    )
    if fact_id is not None and claim.cardinality == "one":
        await settle(conn, project_id, fact_id, turn.id, at)
    return fact_id


async def begin(conn: Conn, project_id: int, key: uuid.UUID, version: str) -> Job:
    """The job `key` of the project, recorded now when new; refused when another job is active
    or the job was begun under another extraction setup."""
    async with conn.transaction():
        found = await rebuilds.job(conn, project_id, key)
        if found is None and not await rebuilds.start_job(conn, project_id, key, version):
            other = await rebuilds.active_job(conn, project_id)
            held = f" (key {other.rebuild_key})" if other else ""
            raise RebuildRefused(
                f"the project already has an active rebuild{held}: run it to completion with"
                " that key, or cancel it, before starting another"
            )
        found = found or await rebuilds.job(conn, project_id, key)
    assert found is not None
    if found.status == "active" and found.extractor_version != version:
        raise RebuildRefused(
            f"rebuild {key} began under extraction setup {found.extractor_version!r}, not the"
            f" current {version!r}: run it under that setup, or cancel it and start a new key"
        )
    return found
