"""`POST /v1/erasures` (erase a subject or chosen turns) and `POST /v1/exports` (read them out)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from satchel.memory.api.bodies import Answer, Body, rfc3339
from satchel.memory.api.errors import ApiError
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store.derived import Scope
from satchel.memory.store.erasure import erase
from satchel.memory.store.export import ExportTooLarge, export

router = APIRouter(route_class=StrictRoute)

MAX_SOURCE_IDS = 10_000


class ErasureRequest(Body):
    data_subject_id: str | None = None
    source_observation_ids: list[str] | None = None
    reason: str | None = None


class ExportRequest(Body):
    data_subject_id: str | None = None
    source_observation_ids: list[str] | None = None


class ErasureReceipt(Answer):
    request_id: str
    scope: str
    data_subject_id: str
    source_observation_ids: list[str] | None = None
    completed_at: str
    deleted: dict[str, int]
    residual: dict[str, int]
    clean: bool


class ExportAnswer(Answer):
    scope: str
    data_subject_id: str
    source_observation_ids: list[str] | None = None
    sections: dict[str, list[Any]]
    rows: dict[str, int]


def _uuid(text: str) -> uuid.UUID | None:
    try:
        value = uuid.UUID(text)
    except ValueError:
        return None
    return value if len(text) == 36 else None


def scope_of(
    grant: Grant, subject: str | None, ids: list[str] | None, code: str, what: str
) -> Scope:
    """Exactly one of a subject or 1..10,000 observation UUIDs, else 400 (`no_subject`, `code`)."""
    subject = subject or None
    ids = ids or []
    if (subject is None or not subject.strip()) and not ids:
        raise ApiError(400, "no_subject", "a data_subject_id or source_observation_ids is required")
    if subject is not None and subject.strip() and ids:
        raise ApiError(
            400, code, f"{what} takes a data_subject_id or source_observation_ids, not both"
        )
    if subject is not None and "\x00" in subject:
        raise ApiError(400, code, "data_subject_id must not contain a NUL character")
    if len(ids) > MAX_SOURCE_IDS:
        raise ApiError(400, code, f"{what} takes at most {MAX_SOURCE_IDS} source_observation_ids")
    if ids:
        sources = [_uuid(text) for text in ids]
        if any(source is None for source in sources):
            raise ApiError(400, code, "source_observation_ids must be UUIDs")
        return Scope(grant.project_id, None, tuple(dict.fromkeys(s for s in sources if s)))
    return Scope(grant.project_id, subject)


@router.post(
    "/v1/erasures",
    response_model=ErasureReceipt,
    response_model_exclude_none=True,
    **access("write"),
)
async def erasures(
    body: ErasureRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ErasureReceipt:
    scope = scope_of(
        grant, body.data_subject_id, body.source_observation_ids, "invalid_erasure", "an erasure"
    )
    if body.reason is not None and "\x00" in body.reason:
        raise ApiError(400, "invalid_erasure", "reason must not contain a NUL character")
    async with request.app.state.pool.connection() as conn:
        erased = await erase(conn, scope, body.reason)
    completed_at = rfc3339(erased.completed_at)
    assert completed_at is not None
    return ErasureReceipt(
        request_id=str(erased.id),
        scope=grant.project,
        data_subject_id=scope.subject or "",
        source_observation_ids=body.source_observation_ids if scope.sources else None,
        completed_at=completed_at,
        deleted=erased.deleted,
        residual=erased.residual,
        clean=erased.clean,
    )


@router.post(
    "/v1/exports",
    response_model=ExportAnswer,
    response_model_exclude_none=True,
    **access("read"),
)
async def exports(
    body: ExportRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ExportAnswer:
    scope = scope_of(
        grant, body.data_subject_id, body.source_observation_ids, "invalid_export", "an export"
    )
    async with request.app.state.pool.connection() as conn:
        try:
            sections = await export(conn, scope)
        except ExportTooLarge:
            raise ApiError(
                422, "export_too_large", "the export holds more rows than one answer may carry"
            ) from None
    return ExportAnswer(
        scope=grant.project,
        data_subject_id=scope.subject or "",
        source_observation_ids=body.source_observation_ids if scope.sources else None,
        sections=sections,
        rows={name: len(rows) for name, rows in sections.items()},
    )
