"""`POST /v1/erasures` (erase a subject or chosen turns) and `POST /v1/exports` (read them out)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from fastapi import APIRouter, Depends
from pydantic import ConfigDict, Field

from satchel.memory.api.bodies import NOT_BLANK, Answer, Body, Text, Uuid, exactly_one, rfc3339
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.service import erasure

router = APIRouter(route_class=StrictRoute)

MAX_SOURCE_IDS = 10_000


# A blank subject and an empty list count as left out.
Subject = Annotated[str, Text(blank="any", shown=NOT_BLANK)] | None
Sources = Annotated[
    list[Annotated[str, Uuid()]],
    Field(max_length=MAX_SOURCE_IDS, json_schema_extra={"minItems": 1}),
]
SCOPE = exactly_one("data_subject_id", "source_observation_ids")


class ErasureRequest(Body):
    """Exactly one of a person or their turns."""

    model_config = ConfigDict(json_schema_extra=SCOPE)
    refusal: ClassVar[str] = "invalid_erasure"

    data_subject_id: Subject = Field(default=None, description="the person to erase")
    source_observation_ids: Sources | None = Field(
        default=None, description="or: the turns to erase (observation ids)"
    )
    reason: Annotated[str, Text(blank="any")] | None = Field(
        default=None, description="kept with the receipt"
    )


class ExportRequest(Body):
    """Exactly one of a person or their turns."""

    model_config = ConfigDict(json_schema_extra=SCOPE)
    refusal: ClassVar[str] = "invalid_export"

    data_subject_id: Subject = Field(default=None, description="the person to export")
    source_observation_ids: Sources | None = Field(
        default=None, description="or: the turns to export (observation ids)"
    )


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


@router.post(
    "/v1/erasures",
    response_model=ErasureReceipt,
    response_model_exclude_none=True,
    **access("write"),
)
async def erasures(
    body: ErasureRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ErasureReceipt:
    scope, erased = await erasure.erase(
        parts.pool,
        grant.project_id,
        body.data_subject_id,
        body.source_observation_ids,
        body.reason,
    )
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
    body: ExportRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ExportAnswer:
    scope, sections = await erasure.export_rows(
        parts.pool, grant.project_id, body.data_subject_id, body.source_observation_ids
    )
    return ExportAnswer(
        scope=grant.project,
        data_subject_id=scope.subject or "",
        source_observation_ids=body.source_observation_ids if scope.sources else None,
        sections=sections,
        rows={name: len(rows) for name, rows in sections.items()},
    )
