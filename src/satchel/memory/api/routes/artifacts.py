"""`POST /v1/artifacts/{put,get,list,delete}`: opaque, versioned objects owned by one subject."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from satchel.memory.api.bodies import BODY, Answer, Base64, Body, Refusal, Text, Uuid
from satchel.memory.api.errors import ApiError, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store import artifacts
from satchel.memory.store.artifacts import (
    MAX_ARTIFACT_BYTES,
    Allowance,
    ArtifactConflict,
    ArtifactMissing,
    ArtifactWrite,
    Metadata,
    StorageCapacity,
)

router = APIRouter(route_class=StrictRoute)

MAX_SUBJECT_BYTES = 1024
MAX_NAME_BYTES = 256
DEFAULT_PAGE = 20
MAX_PAGE = 100

Kind = Literal["state", "file"]
Identity = Annotated[str, Uuid()]
Owner = Annotated[str, Text(MAX_SUBJECT_BYTES)]
Filter = Annotated[str, Text(blank="any")] | None


class ArtifactPutRequest(Body):
    refusal: ClassVar[str] = "invalid_artifact"

    id: Identity = Field(description="the artifact's UUID, chosen by the caller")
    expected_version: Annotated[str, Uuid(empty=True)] | None = Field(
        default=None, description="the version it replaces; absent or empty: a new artifact"
    )
    data_subject_id: Owner = Field(description="the person who owns it")
    kind: Kind
    name: Annotated[str, Text(MAX_NAME_BYTES, blank="empty")] | None = None
    content: Annotated[bytes, Base64(MAX_ARTIFACT_BYTES), Refusal(null=BODY)]


class ArtifactGetRequest(Body):
    refusal: ClassVar[str] = "invalid_artifact"

    id: Identity
    data_subject_id: Filter = Field(default=None, description="require this owner")


class ArtifactListRequest(Body):
    refusal: ClassVar[str] = "invalid_artifact"

    kind: Literal["", "state", "file"] | None = None
    name_prefix: Annotated[str, Text(MAX_NAME_BYTES, blank="empty")] | None = None
    data_subject_id: Annotated[str, Text(MAX_SUBJECT_BYTES, blank="empty")] | None = None
    after: Annotated[str, Uuid(empty=True)] | None = Field(
        default=None, description="the previous page's `next.id`"
    )
    limit: Annotated[int, Field(ge=0, le=MAX_PAGE)] | None = Field(
        default=None, description=f"0 or absent: {DEFAULT_PAGE}"
    )


class ArtifactDeleteRequest(Body):
    refusal: ClassVar[str] = "invalid_artifact"

    id: Identity
    expected_version: Identity
    data_subject_id: Filter = Field(default=None, description="require this owner")


class ArtifactMetadata(Answer):
    id: str
    version: str
    data_subject_id: str
    kind: str
    name: str
    source_observation_id: str
    bytes: int
    authored_by: str
    created_at: datetime
    updated_at: datetime
    expires_at: datetime


class ArtifactWritten(ArtifactMetadata):
    replayed: bool


class Artifact(ArtifactMetadata):
    content: str


class ArtifactCursor(Answer):
    id: str


class ArtifactPage(Answer):
    artifacts: list[ArtifactMetadata]
    next: ArtifactCursor | None = None


class ArtifactDeleted(Answer):
    deleted: bool


def conflict() -> ApiError:
    return ApiError(
        409,
        "artifact_conflict",
        "artifact identity or version conflicts; inspect the current object",
    )


def missing() -> ApiError:
    return not_found("artifact not found")


def metadata(item: Metadata) -> dict[str, object]:
    return {
        "id": str(item.id),
        "version": str(item.version),
        "data_subject_id": item.subject,
        "kind": item.kind,
        "name": item.name,
        "source_observation_id": str(item.source_observation_id),
        "bytes": item.bytes,
        "authored_by": str(item.authored_by or ""),
        "created_at": item.created_at.astimezone(UTC),
        "updated_at": item.updated_at.astimezone(UTC),
        "expires_at": item.expires_at.astimezone(UTC),
    }


@router.post("/v1/artifacts/put", response_model=ArtifactWritten, **access("write"))
async def put_artifact(
    body: ArtifactPutRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ArtifactWritten:
    expected = uuid.UUID(body.expected_version) if body.expected_version else None
    write = ArtifactWrite(
        uuid.UUID(body.id), body.data_subject_id, body.kind, body.name or "", body.content, expected
    )
    settings = request.app.state.settings
    allowance = Allowance(
        settings.artifact_object_bytes, settings.artifact_bytes, settings.artifact_objects
    )
    try:
        async with request.app.state.pool.connection() as conn:
            stored, replayed = await artifacts.put(
                conn, grant.project_id, grant.token_id, write, allowance
            )
    except ArtifactConflict:
        raise conflict() from None
    except ArtifactMissing:
        raise missing() from None
    except StorageCapacity as full:
        # No Retry-After: waiting frees nothing; deleting artifacts or a larger allowance does.
        raise ApiError(429, "storage_capacity", f"artifact allowance is full: {full}") from None
    return ArtifactWritten.model_validate({**metadata(stored), "replayed": replayed})


@router.post("/v1/artifacts/get", response_model=Artifact, **access("read"))
async def get_artifact(
    body: ArtifactGetRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Artifact:
    identity = uuid.UUID(body.id)
    async with request.app.state.pool.connection() as conn:
        found = await artifacts.get(conn, grant.project_id, identity, body.data_subject_id or None)
    if found is None:
        raise missing()
    item, content = found
    return Artifact.model_validate(
        {**metadata(item), "content": base64.b64encode(content).decode("ascii")}
    )


@router.post(
    "/v1/artifacts/list",
    response_model=ArtifactPage,
    response_model_exclude_unset=True,
    **access("read"),
)
async def list_artifacts(
    body: ArtifactListRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ArtifactPage:
    limit = body.limit or DEFAULT_PAGE
    after = uuid.UUID(body.after) if body.after else None
    async with request.app.state.pool.connection() as conn:
        found = await artifacts.page(
            conn,
            grant.project_id,
            subject=body.data_subject_id or None,
            kind=body.kind or None,
            name_prefix=body.name_prefix or None,
            after=after,
            limit=limit,
        )
    answer = ArtifactPage(
        artifacts=[ArtifactMetadata.model_validate(metadata(item)) for item in found[:limit]]
    )
    if len(found) > limit:
        answer.next = ArtifactCursor(id=str(found[limit - 1].id))
    return answer


@router.post("/v1/artifacts/delete", response_model=ArtifactDeleted, **access("write"))
async def delete_artifact(
    body: ArtifactDeleteRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> ArtifactDeleted:
    identity = uuid.UUID(body.id)
    version = uuid.UUID(body.expected_version)
    try:
        async with request.app.state.pool.connection() as conn:
            await artifacts.delete(
                conn, grant.project_id, identity, version, body.data_subject_id or None
            )
    except ArtifactConflict:
        raise conflict() from None
    except ArtifactMissing:
        raise missing() from None
    return ArtifactDeleted(deleted=True)
