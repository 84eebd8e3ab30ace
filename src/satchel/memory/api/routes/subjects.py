"""`POST /v1/subjects/{register,get,list,update}`: the optional subject registry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from satchel.memory.api.bodies import Answer, Body
from satchel.memory.api.errors import ApiError, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store import subjects
from satchel.memory.store.subjects import Fields, Subject, SubjectConflict, SubjectMissing

router = APIRouter(route_class=StrictRoute)

MAX_REFERENCE_BYTES = 1024
MAX_LABEL_BYTES = 256
DEFAULT_PAGE = 20
MAX_PAGE = 100


class SubjectRegisterRequest(Body):
    idempotency_key: str | None = None
    external_reference: str | None = None
    label: str | None = None


class SubjectGetRequest(Body):
    id: str | None = None
    external_reference: str | None = None


class SubjectListRequest(Body):
    after: str | None = None
    limit: int | None = None


class SubjectUpdateRequest(Body):
    id: str | None = None
    expected_version: str | None = None
    external_reference: str | None = None
    label: str | None = None


class ManagedSubject(Answer):
    id: str
    version: str
    external_reference: str | None = None
    label: str
    updated_by: str
    created_at: datetime
    updated_at: datetime
    inactive_after: datetime | None


class SubjectWrite(ManagedSubject):
    replayed: bool


class SubjectCursor(Answer):
    id: str


class SubjectPage(Answer):
    subjects: list[ManagedSubject]
    next: SubjectCursor | None = None


def invalid_subject() -> ApiError:
    return ApiError(
        400, "invalid_subject", "UUID identities and bounded subject fields are required"
    )


def conflict() -> ApiError:
    return ApiError(
        409,
        "subject_conflict",
        "subject reference, retry or version conflicts; inspect the current entry",
    )


def subject_uuid(text: str | None) -> uuid.UUID:
    """A UUID in its 36-character form, or 400 `invalid_subject`."""
    try:
        value = uuid.UUID(text or "")
    except ValueError:
        raise invalid_subject() from None
    if len(text or "") != 36:
        raise invalid_subject()
    return value


def bounded(text: str, limit: int) -> bool:
    """Empty, or non-blank, at most `limit` UTF-8 bytes and without NUL."""
    if not text:
        return True
    return bool(text.strip()) and len(text.encode("utf-8")) <= limit and "\x00" not in text


def fields_of(reference: str | None, label: str | None) -> Fields:
    fields = Fields(reference or "", label or "")
    if not bounded(fields.external_reference, MAX_REFERENCE_BYTES) or not bounded(
        fields.label, MAX_LABEL_BYTES
    ):
        raise invalid_subject()
    return fields


def managed(subject: Subject) -> dict[str, object]:
    """The answer's fields; `external_reference` only when there is one (omitted otherwise).

    Subjects never become inactive here, so `inactive_after` is always null.
    """
    shown: dict[str, object] = {
        "id": str(subject.id),
        "version": str(subject.version),
        "label": subject.label,
        "updated_by": str(subject.updated_by or ""),
        "created_at": subject.created_at.astimezone(UTC),
        "updated_at": subject.updated_at.astimezone(UTC),
        "inactive_after": None,
    }
    if subject.external_reference:
        shown["external_reference"] = subject.external_reference
    return shown


@router.post(
    "/v1/subjects/register",
    response_model=SubjectWrite,
    response_model_exclude_unset=True,
    **access("write"),
)
async def register_subject(
    body: SubjectRegisterRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> SubjectWrite:
    key = subject_uuid(body.idempotency_key)
    fields = fields_of(body.external_reference, body.label)
    try:
        async with request.app.state.pool.connection() as conn:
            subject, replayed = await subjects.register(
                conn, grant.project_id, grant.token_id, key, fields
            )
    except SubjectConflict:
        raise conflict() from None
    return SubjectWrite.model_validate({**managed(subject), "replayed": replayed})


@router.post(
    "/v1/subjects/get",
    response_model=ManagedSubject,
    response_model_exclude_unset=True,
    **access("read"),
)
async def get_subject(
    body: SubjectGetRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ManagedSubject:
    identity = body.id or ""
    reference = body.external_reference or ""
    if bool(identity) == bool(reference) or not bounded(reference, MAX_REFERENCE_BYTES):
        raise invalid_subject()
    async with request.app.state.pool.connection() as conn:
        if identity:
            found = await subjects.by_id(conn, grant.project_id, subject_uuid(identity))
        else:
            found = await subjects.by_reference(conn, grant.project_id, reference)
    if found is None:
        raise not_found("subject not found")
    return ManagedSubject.model_validate(managed(found))


@router.post(
    "/v1/subjects/list",
    response_model=SubjectPage,
    response_model_exclude_unset=True,
    **access("read"),
)
async def list_subjects(
    body: SubjectListRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> SubjectPage:
    limit = body.limit or DEFAULT_PAGE
    if not 1 <= limit <= MAX_PAGE:
        raise invalid_subject()
    after = subject_uuid(body.after) if body.after else None
    async with request.app.state.pool.connection() as conn:
        found = await subjects.page(conn, grant.project_id, after, limit)
    answer = SubjectPage(
        subjects=[ManagedSubject.model_validate(managed(item)) for item in found[:limit]]
    )
    if len(found) > limit:
        answer.next = SubjectCursor(id=str(found[limit - 1].id))
    return answer


@router.post(
    "/v1/subjects/update",
    response_model=SubjectWrite,
    response_model_exclude_unset=True,
    **access("write"),
)
async def update_subject(
    body: SubjectUpdateRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> SubjectWrite:
    identity = subject_uuid(body.id)
    version = subject_uuid(body.expected_version)
    fields = fields_of(body.external_reference, body.label)
    try:
        async with request.app.state.pool.connection() as conn:
            subject, replayed = await subjects.update(
                conn, grant.project_id, grant.token_id, identity, version, fields
            )
    except SubjectConflict:
        raise conflict() from None
    except SubjectMissing:
        raise not_found("subject not found") from None
    return SubjectWrite.model_validate({**managed(subject), "replayed": replayed})
