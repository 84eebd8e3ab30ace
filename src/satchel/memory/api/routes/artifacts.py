"""`POST /v1/artifacts/{put,get,list,delete}`: opaque, versioned objects owned by one subject."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import PlainValidator

from satchel.memory.api.bodies import Answer, Body
from satchel.memory.api.errors import ApiError, invalid_body, not_found
from satchel.memory.api.gate import Grant, current_grant
from satchel.memory.api.strict import StrictRoute, access
from satchel.memory.store import artifacts
from satchel.memory.store.artifacts import (
    MAX_ARTIFACT_BYTES,
    ArtifactConflict,
    ArtifactMissing,
    ArtifactWrite,
    Metadata,
)

router = APIRouter(route_class=StrictRoute)

KINDS = ("state", "file")
MAX_SUBJECT_BYTES = 1024
MAX_NAME_BYTES = 256
MAX_ENCODED = 4 * -(-MAX_ARTIFACT_BYTES // 3)  # the base64 length of the largest object
DEFAULT_PAGE = 20
MAX_PAGE = 100


def canonical_base64(value: object) -> bytes:
    """Content is one JSON string of canonical standard base64; anything else is unreadable."""
    if not isinstance(value, str) or len(value) > MAX_ENCODED:
        raise ValueError("content must be a bounded base64 string")
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("content must be standard base64") from None
    if base64.b64encode(decoded).decode("ascii") != value:
        raise ValueError("content must be canonical base64")
    return decoded


Base64Content = Annotated[bytes, PlainValidator(canonical_base64, json_schema_input_type=str)]


class ArtifactPutRequest(Body):
    id: str | None = None
    expected_version: str | None = None
    data_subject_id: str | None = None
    kind: str | None = None
    name: str | None = None
    content: Base64Content | None = None


class ArtifactGetRequest(Body):
    id: str | None = None
    data_subject_id: str | None = None


class ArtifactListRequest(Body):
    kind: str | None = None
    name_prefix: str | None = None
    data_subject_id: str | None = None
    after: str | None = None
    limit: int | None = None


class ArtifactDeleteRequest(Body):
    id: str | None = None
    expected_version: str | None = None
    data_subject_id: str | None = None


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


def invalid_artifact() -> ApiError:
    return ApiError(
        400,
        "invalid_artifact",
        "a UUID identity, declared owner, state/file kind and bounded fields are required",
    )


def conflict() -> ApiError:
    return ApiError(
        409,
        "artifact_conflict",
        "artifact identity or version conflicts; inspect the current object",
    )


def missing() -> ApiError:
    return not_found("artifact not found")


def artifact_id(text: str | None) -> uuid.UUID:
    """A UUID in its 36-character form, or 400 `invalid_artifact`."""
    try:
        value = uuid.UUID(text or "")
    except ValueError:
        raise invalid_artifact() from None
    if len(text or "") != 36:
        raise invalid_artifact()
    return value


def bounded(text: str, limit: int, *, optional: bool) -> bool:
    """Empty when optional; else non-blank, at most `limit` UTF-8 bytes, no NUL."""
    if not text:
        return optional
    return bool(text.strip()) and len(text.encode("utf-8")) <= limit and "\x00" not in text


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
    if body.content is None and "content" in body.model_fields_set:
        raise invalid_body()  # as any other content that is not a base64 string
    identity = artifact_id(body.id)
    subject = body.data_subject_id or ""
    name = body.name or ""
    if (
        not bounded(subject, MAX_SUBJECT_BYTES, optional=False)
        or not bounded(name, MAX_NAME_BYTES, optional=True)
        or body.kind not in KINDS
        or body.content is None
        or len(body.content) > MAX_ARTIFACT_BYTES
    ):
        raise invalid_artifact()
    expected = artifact_id(body.expected_version) if body.expected_version else None
    write = ArtifactWrite(identity, subject, body.kind, name, body.content, expected)
    try:
        async with request.app.state.pool.connection() as conn:
            stored, replayed = await artifacts.put(conn, grant.project_id, grant.token_id, write)
    except ArtifactConflict:
        raise conflict() from None
    except ArtifactMissing:
        raise missing() from None
    return ArtifactWritten.model_validate({**metadata(stored), "replayed": replayed})


@router.post("/v1/artifacts/get", response_model=Artifact, **access("read"))
async def get_artifact(
    body: ArtifactGetRequest, request: Request, grant: Annotated[Grant, Depends(current_grant)]
) -> Artifact:
    identity = artifact_id(body.id)
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
    if (
        (body.kind or "") not in ("", *KINDS)
        or not bounded(body.name_prefix or "", MAX_NAME_BYTES, optional=True)
        or not bounded(body.data_subject_id or "", MAX_SUBJECT_BYTES, optional=True)
        or not 1 <= limit <= MAX_PAGE
    ):
        raise invalid_artifact()
    after = artifact_id(body.after) if body.after else None
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
    identity = artifact_id(body.id)
    version = artifact_id(body.expected_version)
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
