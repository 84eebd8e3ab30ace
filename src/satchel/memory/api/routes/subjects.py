"""`POST /v1/subjects/{register,get,list,update}`: the optional subject registry."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar

from fastapi import APIRouter, Depends
from pydantic import ConfigDict, Field

from satchel.memory.api.bodies import NOT_BLANK, Answer, Body, Text, Uuid, exactly_one
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.domain import Invalid, RegisteredSubject
from satchel.memory.service import subjects
from satchel.memory.service.pages import keyset_page

router = APIRouter(route_class=StrictRoute)

MAX_REFERENCE_BYTES = 1024
MAX_LABEL_BYTES = 256
DEFAULT_PAGE = 20
MAX_PAGE = 100

Reference = Annotated[str, Text(MAX_REFERENCE_BYTES, blank="empty")] | None
Label = Annotated[str, Text(MAX_LABEL_BYTES, blank="empty")] | None
Identity = Annotated[str, Uuid()]


class SubjectRegisterRequest(Body):
    refusal: ClassVar[str] = "invalid_subject"

    idempotency_key: Identity = Field(description="one UUID per registration")
    external_reference: Reference = Field(default=None, description="your own id; unique")
    label: Label = None


class SubjectGetRequest(Body):
    """Exactly one of an id or an external reference ("" counts as left out)."""

    model_config = ConfigDict(json_schema_extra=exactly_one("id", "external_reference"))
    refusal: ClassVar[str] = "invalid_subject"

    id: Annotated[str, Uuid(empty=True)] | None = None
    external_reference: (
        Annotated[str, Text(MAX_REFERENCE_BYTES, blank="empty", shown=NOT_BLANK)] | None
    ) = None


class SubjectListRequest(Body):
    refusal: ClassVar[str] = "invalid_subject"

    after: Annotated[str, Uuid(empty=True)] | None = Field(
        default=None, description="the previous page's `next.id`"
    )
    limit: Annotated[int, Field(ge=0, le=MAX_PAGE)] | None = Field(
        default=None, description=f"0 or absent: {DEFAULT_PAGE}"
    )


class SubjectUpdateRequest(Body):
    refusal: ClassVar[str] = "invalid_subject"

    id: Identity
    expected_version: Identity
    external_reference: Reference = None
    label: Label = None


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


def managed(subject: RegisteredSubject) -> dict[str, object]:
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
    body: SubjectRegisterRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> SubjectWrite:
    subject, replayed = await subjects.register(
        parts.pool,
        grant.project_id,
        grant.token_id,
        uuid.UUID(body.idempotency_key),
        external_reference=body.external_reference or "",
        label=body.label or "",
    )
    return SubjectWrite.model_validate({**managed(subject), "replayed": replayed})


@router.post(
    "/v1/subjects/get",
    response_model=ManagedSubject,
    response_model_exclude_unset=True,
    **access("read"),
)
async def get_subject(
    body: SubjectGetRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ManagedSubject:
    identity = body.id or ""
    reference = body.external_reference or ""
    if bool(identity) == bool(reference):
        raise Invalid("id or external_reference: give exactly one of them", "invalid_subject")
    found = await subjects.get(
        parts.pool, grant.project_id, uuid.UUID(identity) if identity else None, reference
    )
    return ManagedSubject.model_validate(managed(found))


@router.post(
    "/v1/subjects/list",
    response_model=SubjectPage,
    response_model_exclude_unset=True,
    **access("read"),
)
async def list_subjects(
    body: SubjectListRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> SubjectPage:
    limit = body.limit or DEFAULT_PAGE
    after = uuid.UUID(body.after) if body.after else None
    found = await subjects.page(parts.pool, grant.project_id, after, limit)
    page, last = keyset_page(found, limit)
    answer = SubjectPage(subjects=[ManagedSubject.model_validate(managed(item)) for item in page])
    if last:
        answer.next = SubjectCursor(id=str(last.id))
    return answer


@router.post(
    "/v1/subjects/update",
    response_model=SubjectWrite,
    response_model_exclude_unset=True,
    **access("write"),
)
async def update_subject(
    body: SubjectUpdateRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> SubjectWrite:
    subject, replayed = await subjects.update(
        parts.pool,
        grant.project_id,
        grant.token_id,
        uuid.UUID(body.id),
        uuid.UUID(body.expected_version),
        external_reference=body.external_reference or "",
        label=body.label or "",
    )
    return SubjectWrite.model_validate({**managed(subject), "replayed": replayed})
