"""`POST /v1/records/{assert,correct,retract,list,history}`: authored facts and their changes."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from satchel.memory.api.bodies import (
    Answer,
    Body,
    Instant,
    Interval,
    Timestamp,
    interval,
    omitted,
    render_time,
)
from satchel.memory.api.errors import ApiError, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store import facts
from satchel.memory.store.entities import normalize

router = APIRouter(route_class=StrictRoute)

MAX_BATCH = 20
MAX_EVIDENCE = 128
MAX_SUBJECT_ID_BYTES = 1_024
MAX_NAME_BYTES = 1_024
MAX_PREDICATE_BYTES = 128
MAX_STATEMENT_BYTES = 16_384
MAX_PAGE_SUBJECT_BYTES = 1 << 20
PREVIEW_CHARACTERS = 512
DEFAULT_PAGE = 20
MAX_PAGE = 100
ASSERT_NAMESPACE = "record.assert/v1:"
ZERO_TIME = "0001-01-01T00:00:00Z"
ASSERT_REFUSED = "bounded assertions, an admitted predicate and unique UUID retry keys are required"

# Names that stand for someone only in context: a subject cannot be one of these.
UNRESOLVABLE = frozenset(
    {
        "he",
        "she",
        "it",
        "they",
        "him",
        "her",
        "them",
        "his",
        "hers",
        "its",
        "their",
        "theirs",
        "this",
        "that",
        "these",
        "those",
        "we",
        "us",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "someone",
        "somebody",
        "something",
        "anyone",
        "anybody",
        "anything",
        "everyone",
        "everybody",
        "everything",
        "nobody",
        "nothing",
        "who",
        "whom",
        "what",
        "which",
        "here",
        "there",
    }
)


class AssertItem(Body):
    idempotency_key: str | None = None
    data_subject_id: str | None = None
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    statement: str | None = None
    valid_from: Timestamp | None = None


class AssertBody(Body):
    records: list[AssertItem] | None = None


class Asserted(Answer):
    id: str
    version: str
    source_observation_id: str
    replayed: bool


class AssertAnswer(Answer):
    records: list[Asserted]


class CorrectItem(Body):
    id: str | None = None
    expected_version: str | None = None
    object: str | None = None
    statement: str | None = None
    valid_from: Timestamp | None = None


class CorrectBody(Body):
    records: list[CorrectItem] | None = None


class Corrected(Answer):
    original_id: str
    id: str
    version: str
    source_observation_id: str


class CorrectAnswer(Answer):
    records: list[Corrected]


class RetractItem(Body):
    id: str | None = None
    expected_version: str | None = None


class RetractBody(Body):
    records: list[RetractItem] | None = None


class Retracted(Answer):
    id: str
    version: str
    operation_id: str
    principal_id: str | None
    retracted_at: Instant
    replacement_source_observation_id: str | None = omitted()
    replacement_record_id: str | None = omitted()


class RetractAnswer(Answer):
    records: list[Retracted]


class RecordAfter(Body):
    id: str | None = None


class ListBody(Body):
    data_subject_id: str | None = None
    after: RecordAfter | None = None
    limit: int | None = None


class Record(Answer):
    version: str
    id: str
    subject_entity_id: str | None
    object_entity_id: str | None
    predicate: str
    statement_preview: str
    statement_bytes: int
    preview_truncated: bool
    source_role: str
    recorded_at: Instant
    status: str


class RecordCursor(Answer):
    id: str


class ListAnswer(Answer):
    records: list[Record]
    next: RecordCursor | None = omitted()


class HistoryBefore(Body):
    known_until: Timestamp | None = None
    history_id: str | None = None


class HistoryBody(Body):
    id: str | None = None
    before: HistoryBefore | None = None
    limit: int | None = None


class RecordTimes(Answer):
    valid: Interval
    known: Interval


class RecordVersion(Answer):
    history_id: str
    valid: Interval
    known: Interval
    ended_by_observation_id: str | None


class HistoryCursor(Answer):
    known_until: Instant
    history_id: str


class HistoryAnswer(Answer):
    version: str
    retraction: Retracted | None = omitted()
    id: str
    current: RecordTimes
    previous: list[RecordVersion]
    next: HistoryCursor | None = omitted()


def _strid(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def parse_uuid(text: str | None, *, nil: bool = False) -> uuid.UUID | None:
    """A UUID in its 36-character form, or None."""
    if text is None or len(text) != 36:
        return None
    try:
        value = uuid.UUID(text)
    except ValueError:
        return None
    return value if nil or value.int else None


def _text(value: str | None, limit: int) -> bool:
    if value is None or not value.strip() or "\x00" in value:
        return False
    return len(value.encode()) <= limit


def _utc(value: datetime | None) -> datetime | None:
    try:
        return None if value is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None


def _subject_id(value: str | None, limit: int) -> tuple[bool, str | None]:
    """Whether a `data_subject_id` is acceptable, and its stored form (empty = none)."""
    if not value:
        return True, None
    return _text(value, limit), value


def retraction_answer(retraction: facts.Retraction) -> Retracted:
    return Retracted(
        id=str(retraction.id),
        version=str(retraction.version),
        operation_id=str(retraction.operation_id),
        principal_id=_strid(retraction.principal_id),
        retracted_at=retraction.retracted_at,
        replacement_source_observation_id=_strid(retraction.replacement_source_observation_id),
        replacement_record_id=_strid(retraction.replacement_record_id),
    )


def _fingerprint(claim: facts.Claim) -> bytes:
    valid_from = render_time(claim.valid_from) if claim.valid_from else ZERO_TIME
    document = [
        "record.assert/v1",
        claim.data_subject_id or "",
        claim.subject,
        claim.predicate,
        claim.object,
        claim.statement,
        valid_from,
    ]
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()


def _mutation(message: str) -> ApiError:
    return ApiError(400, "invalid_record_mutation", message)


def _claims(items: list[AssertItem]) -> list[tuple[uuid.UUID, facts.Claim]]:
    refused = _mutation(ASSERT_REFUSED)
    if not 1 <= len(items) <= MAX_BATCH:
        raise refused
    found: list[tuple[uuid.UUID, facts.Claim]] = []
    for item in items:
        key = parse_uuid(item.idempotency_key, nil=True)
        fits, subject_id = _subject_id(item.data_subject_id, MAX_SUBJECT_ID_BYTES)
        valid_from = _utc(item.valid_from)
        if (
            key is None
            or not fits
            or not _text(item.subject, MAX_NAME_BYTES)
            or not _text(item.predicate, MAX_PREDICATE_BYTES)
            or not _text(item.object, MAX_NAME_BYTES)
            or not _text(item.statement, MAX_STATEMENT_BYTES)
            or (item.valid_from is not None and valid_from is None)
        ):
            raise refused
        assert item.subject and item.predicate and item.object and item.statement
        if normalize(item.subject) in UNRESOLVABLE:
            raise _mutation("the subject must name someone or something, not stand in for it")
        claim = facts.Claim(
            subject_id, item.subject, item.predicate, item.object, item.statement, valid_from
        )
        found.append((key, claim))
    if len({key for key, _ in found}) != len(found):
        raise refused
    return found


def _targets(items: list[Any], what: str) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The (id, expected_version) pairs of a correct or retract batch, validated."""
    refused = _mutation(f"bounded {what} with unique record ids and versions are required")
    if not 1 <= len(items) <= MAX_BATCH:
        raise refused
    pairs: list[tuple[uuid.UUID, uuid.UUID]] = []
    for item in items:
        fact_id = parse_uuid(item.id)
        version = parse_uuid(item.expected_version)
        if fact_id is None or version is None:
            raise refused
        pairs.append((fact_id, version))
    if len({fact_id for fact_id, _ in pairs}) != len(pairs):
        raise refused
    return pairs


async def _lock(
    conn: facts.Conn,
    project_id: int,
    pairs: list[tuple[uuid.UUID, uuid.UUID]],
    *,
    open_validity: bool,
) -> dict[uuid.UUID, facts.Target]:
    """Lock the batch's facts: all must be the project's (404), at the expected version and
    still known (409; corrections also need them still valid), with bounded evidence (413)."""
    targets = await facts.lock_targets(conn, project_id, [fact_id for fact_id, _ in pairs])
    if len(targets) != len(pairs):
        raise not_found("record not found")
    for fact_id, version in pairs:
        target = targets[fact_id]
        if (
            target.version != version
            or target.known_until is not None
            or (open_validity and target.valid_until is not None)
        ):
            raise ApiError(409, "record_conflict", "the record changed or is closed; read it again")
    if any(target.evidence > MAX_EVIDENCE for target in targets.values()):
        raise ApiError(
            413,
            "record_mutation_limit",
            f"a record with more than {MAX_EVIDENCE} pieces of evidence cannot be changed here",
        )
    return targets


@router.post("/v1/records/assert", response_model=AssertAnswer, **access("write"))
async def assert_records(
    body: AssertBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> AssertAnswer:
    claims = _claims(body.records or [])
    at = datetime.now(UTC)
    answers: list[tuple[uuid.UUID, uuid.UUID, bool]] = []
    async with request.app.state.pool.connection() as conn, conn.transaction():
        admitted = await facts.cardinalities(conn, [claim.predicate for _, claim in claims])
        if any(claim.predicate not in admitted for _, claim in claims):
            raise _mutation(ASSERT_REFUSED)
        for key in sorted(key for key, _ in claims):
            await facts.lock_retry_key(conn, grant.project_id, key)
        for key, claim in claims:
            digest = hashlib.sha256(ASSERT_NAMESPACE.encode() + key.bytes).digest()
            printed = _fingerprint(claim)
            seen = await facts.retried(conn, grant.project_id, digest)
            if seen is not None:
                fingerprint, fact_id, source_id = seen
                if fact_id is None or source_id is None or fingerprint != printed:
                    raise ApiError(
                        409,
                        "idempotency_conflict",
                        "idempotency key was already used for a different or erased assertion",
                    )
                answers.append((fact_id, source_id, True))
                continue
            written = await facts.assert_claim(
                conn, grant.project_id, grant.token_id, claim, admitted[claim.predicate], at
            )
            await facts.remember_retry(
                conn, grant.project_id, digest, printed, written.source_observation_id
            )
            answers.append((written.id, written.source_observation_id, False))
        current = await facts.versions(conn, [fact_id for fact_id, _, _ in answers])
    return AssertAnswer(
        records=[
            Asserted(
                id=str(fact_id),
                version=str(current[fact_id]),
                source_observation_id=str(source_id),
                replayed=replayed,
            )
            for fact_id, source_id, replayed in answers
        ]
    )


@router.post("/v1/records/correct", response_model=CorrectAnswer, **access("write"))
async def correct_records(
    body: CorrectBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> CorrectAnswer:
    items = body.records or []
    pairs = _targets(items, "corrections")
    for item in items:
        if (
            not _text(item.object, MAX_NAME_BYTES)
            or not _text(item.statement, MAX_STATEMENT_BYTES)
            or (item.valid_from is not None and _utc(item.valid_from) is None)
        ):
            raise _mutation("bounded corrections with unique record ids and versions are required")
    at = datetime.now(UTC)
    written: list[tuple[uuid.UUID, facts.Written]] = []
    async with request.app.state.pool.connection() as conn, conn.transaction():
        await facts.lock_log(conn, grant.project_id)
        targets = await _lock(conn, grant.project_id, pairs, open_validity=True)
        admitted = await facts.cardinalities(conn, [t.predicate for t in targets.values()])
        for (fact_id, _), item in zip(pairs, items, strict=True):
            assert item.object and item.statement
            target = targets[fact_id]
            claim = facts.Claim(
                target.data_subject_id,
                target.subject,
                target.predicate,
                item.object,
                item.statement,
                _utc(item.valid_from) or target.valid_from,
            )
            ids = facts.Written(uuid.uuid4(), uuid.uuid4())
            await facts.retract(conn, target, grant.token_id, at, ids)
            cardinality = admitted.get(target.predicate, "many")
            replacement = await facts.assert_claim(
                conn, grant.project_id, grant.token_id, claim, cardinality, at, ids
            )
            written.append((fact_id, replacement))
        current = await facts.versions(conn, [w.id for _, w in written])
    return CorrectAnswer(
        records=[
            Corrected(
                original_id=str(original),
                id=str(w.id),
                version=str(current[w.id]),
                source_observation_id=str(w.source_observation_id),
            )
            for original, w in written
        ]
    )


@router.post("/v1/records/retract", response_model=RetractAnswer, **access("write"))
async def retract_records(
    body: RetractBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> RetractAnswer:
    pairs = _targets(body.records or [], "retractions")
    at = datetime.now(UTC)
    async with request.app.state.pool.connection() as conn, conn.transaction():
        targets = await _lock(conn, grant.project_id, pairs, open_validity=False)
        done = [
            await facts.retract(conn, targets[fact_id], grant.token_id, at) for fact_id, _ in pairs
        ]
    return RetractAnswer(records=[retraction_answer(retraction) for retraction in done])


def _page_limit(limit: int | None) -> int:
    if not limit:
        return DEFAULT_PAGE
    if not 1 <= limit <= MAX_PAGE:
        raise _page_refused()
    return limit


def _page_refused() -> ApiError:
    return ApiError(400, "invalid_record_page", "a valid record page request is required")


@router.post("/v1/records/list", response_model=ListAnswer, **access("read"))
async def list_records(
    body: ListBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ListAnswer:
    limit = _page_limit(body.limit)
    fits, subject_id = _subject_id(body.data_subject_id, MAX_PAGE_SUBJECT_BYTES)
    after = None
    if body.after is not None:
        after = parse_uuid(body.after.id, nil=True)
        if after is None:
            raise _page_refused()
    if not fits:
        raise _page_refused()
    async with request.app.state.pool.connection() as conn:
        rows = await facts.record_page(conn, grant.project_id, subject_id, after, limit + 1)
    page = rows[:limit]
    return ListAnswer(
        records=[
            Record(
                version=str(row.version),
                id=str(row.id),
                subject_entity_id=_strid(row.subject_entity_id),
                object_entity_id=_strid(row.object_entity_id),
                predicate=row.predicate,
                statement_preview=row.statement[:PREVIEW_CHARACTERS],
                statement_bytes=len(row.statement.encode()),
                preview_truncated=len(row.statement) > PREVIEW_CHARACTERS,
                source_role=row.source_role,
                recorded_at=row.recorded_at,
                status=row.status,
            )
            for row in page
        ],
        next=RecordCursor(id=str(page[-1].id)) if len(rows) > limit else None,
    )


@router.post("/v1/records/history", response_model=HistoryAnswer, **access("read"))
async def record_history(
    body: HistoryBody, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> HistoryAnswer:
    fact_id = parse_uuid(body.id)
    limit = _page_limit(body.limit)
    before = None
    if body.before is not None:
        history_id = parse_uuid(body.before.history_id, nil=True)
        known_until = _utc(body.before.known_until)
        if history_id is None or known_until is None:
            raise _page_refused()
        before = (known_until, history_id)
    if fact_id is None:
        raise _page_refused()
    async with request.app.state.pool.connection() as conn:
        current = await facts.head(conn, grant.project_id, fact_id)
        if current is None:
            raise not_found("record not found")
        rows = await facts.history_page(conn, fact_id, before, limit + 1)
        retraction = await facts.retraction_of(conn, fact_id)
    page = rows[:limit]
    last = page[-1] if len(rows) > limit else None
    return HistoryAnswer(
        version=str(current.version),
        retraction=retraction_answer(retraction) if retraction else None,
        id=str(current.id),
        current=RecordTimes(
            valid=interval(current.valid_from, current.valid_until),
            known=interval(current.known_from, current.known_until),
        ),
        previous=[
            RecordVersion(
                history_id=str(row.id),
                valid=interval(row.valid_from, row.valid_until),
                known=interval(row.known_from, row.known_until),
                ended_by_observation_id=_strid(row.ended_by_observation_id),
            )
            for row in page
        ],
        next=(
            HistoryCursor(known_until=last.known_until, history_id=str(last.id))
            if last is not None and last.known_until is not None
            else None
        ),
    )
