"""The memory deployment's shared vocabulary: the refusals a use case raises, each carrying the
contract's error code, and the values the layers hand each other. Every layer (api, service,
store, formation) may import this module; it imports nothing of satchel."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime


class Refused(Exception):
    """A request the deployment will not carry out, with the contract's `code` and a message that
    names what was wrong. The API layer turns each kind into its HTTP status."""

    default_code = "internal"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message


class Invalid(Refused):
    """The request is well formed but asks for something the contract does not allow (400)."""

    default_code = "invalid_body"


class Forbidden(Refused):
    """The credential may not do this (403)."""

    default_code = "forbidden"


class NotFound(Refused):
    """What the request names does not exist in the caller's project (404)."""

    default_code = "not_found"


class Conflict(Refused):
    """The request contradicts what is stored, e.g. a reused idempotency key (409)."""

    default_code = "conflict"


class Unavailable(Refused):
    """The deployment cannot serve this now or at all (503)."""

    default_code = "unavailable"


class Failed(Refused):
    """Something stored could not be read or written as it should (500)."""

    default_code = "internal"


class TooLarge(Refused):
    """What the request would change is more than one request may change here (413)."""

    default_code = "too_large"


class TooLargeToAnswer(Refused):
    """What the request asks for is more than one answer may carry (422)."""

    default_code = "too_large"


class AllowanceFull(Refused):
    """The project's allowance has no room for this write; waiting frees none (429)."""

    default_code = "storage_capacity"


MAX_RECORD_EVIDENCE = 128
"""The most evidence a record may hold and still be corrected or retracted through the API."""


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """An artifact without its bytes."""

    id: uuid.UUID
    version: uuid.UUID
    subject: str
    kind: str
    name: str
    source_observation_id: uuid.UUID
    bytes: int
    authored_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class RegisteredSubject:
    """A subject of the registry: its id, version, external reference ("" for none) and label."""

    id: uuid.UUID
    version: uuid.UUID
    external_reference: str
    label: str
    updated_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Feedback:
    """A report that a record is wrong: what was said about which record, by whom, and its
    promotion once made."""

    id: uuid.UUID
    fact_id: uuid.UUID
    note: str
    proposed_object: str | None
    recorded_by: uuid.UUID
    recorded_at: datetime
    promoted_by: uuid.UUID | None
    promoted_at: datetime | None
    replacement_record_id: uuid.UUID | None
