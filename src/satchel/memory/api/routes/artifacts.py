"""`POST /v1/artifacts/{put,get,list,delete}`: opaque, versioned objects owned by one subject."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal

from fastapi import APIRouter, Depends
from pydantic import Field

from satchel.memory.api.bodies import BODY, Answer, Base64, Body, Refusal, Text, Uuid
from satchel.memory.api.deps import Parts
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.domain import StoredArtifact
from satchel.memory.service import artifacts
from satchel.memory.service.pages import keyset_page

router = APIRouter(route_class=StrictRoute)

MAX_ARTIFACT_BYTES = 512 * 1024
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


def metadata(item: StoredArtifact) -> dict[str, object]:
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
    body: ArtifactPutRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ArtifactWritten:
    stored, replayed = await artifacts.put(
        parts.pool,
        parts.settings,
        grant.project_id,
        grant.token_id,
        uuid.UUID(body.id),
        subject=body.data_subject_id,
        kind=body.kind,
        name=body.name or "",
        content=body.content,
        expected_version=uuid.UUID(body.expected_version) if body.expected_version else None,
    )
    return ArtifactWritten.model_validate({**metadata(stored), "replayed": replayed})


@router.post("/v1/artifacts/get", response_model=Artifact, **access("read"))
async def get_artifact(
    body: ArtifactGetRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> Artifact:
    item, content = await artifacts.get(
        parts.pool, grant.project_id, uuid.UUID(body.id), body.data_subject_id or None
    )
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
    body: ArtifactListRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ArtifactPage:
    limit = body.limit or DEFAULT_PAGE
    found = await artifacts.page(
        parts.pool,
        grant.project_id,
        subject=body.data_subject_id or None,
        kind=body.kind or None,
        name_prefix=body.name_prefix or None,
        after=uuid.UUID(body.after) if body.after else None,
        limit=limit,
    )
    page, last = keyset_page(found, limit)
    answer = ArtifactPage(
        artifacts=[ArtifactMetadata.model_validate(metadata(item)) for item in page]
    )
    if last:
        answer.next = ArtifactCursor(id=str(last.id))
    return answer


@router.post("/v1/artifacts/delete", response_model=ArtifactDeleted, **access("write"))
async def delete_artifact(
    body: ArtifactDeleteRequest, parts: Parts, grant: Annotated[Grant, Depends(current_grant)]
) -> ArtifactDeleted:
    await artifacts.delete(
        parts.pool,
        grant.project_id,
        uuid.UUID(body.id),
        uuid.UUID(body.expected_version),
        body.data_subject_id or None,
    )
    return ArtifactDeleted(deleted=True)
