"""The memory deployment's shared vocabulary: the refusals a use case raises (each carrying the
contract's error code), the limits and words several layers apply, and the value types formation
passes between its steps. Every layer (api, service, store, formation) may import this module; it
imports nothing of satchel."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_EVIDENCE = 128  # pieces of evidence a change of records may touch
VERBATIM = 8  # the newest formed turns, always context candidates as they were said
MAX_LEVEL = 6  # segments sit at levels 1..6

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


def render_time(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


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


class TooLarge(Refused):
    """The request would touch more than the contract lets one request touch (413)."""

    default_code = "too_large"


class Busy(Refused):
    """Not now: the caller should retry after a second, with the same idempotency key (429)."""

    default_code = "rate_limited"


class Unavailable(Refused):
    """The deployment cannot serve this now or at all (503)."""

    default_code = "unavailable"


class Failed(Refused):
    """Something stored could not be read or written as it should (500)."""

    default_code = "internal"


class TooLargeToAnswer(Refused):
    """What the request asks for is more than one answer may carry (422)."""

    default_code = "too_large"


class AllowanceFull(Refused):
    """The project's allowance has no room for this write; waiting frees none (429)."""

    default_code = "storage_capacity"


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One stored message of the turn being formed."""

    id: Any
    ordinal: int
    role: str
    content: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class Span:
    """Where a quote is: the message, the exact text found and its UTF-8 byte range."""

    message: StoredMessage
    quote: str
    byte_start: int
    byte_end: int


@dataclass(frozen=True, slots=True)
class Candidate:
    """A claim that passed every check the turn alone can decide."""

    subject: str
    predicate: str
    object: str
    statement: str
    confidence: float
    valid_from: datetime
    span: Span
    cardinality: str


@dataclass(frozen=True, slots=True)
class RejectedClaim:
    """A claim not admitted, with the reason and what the model gave (bounded)."""

    reason: str
    claim: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Extractor:
    """The extractor that formed a turn: model (None without one), prompt and code versions."""

    model: str | None
    prompt: str | None
    code: str

    def version(self) -> str:
        return f"{self.model or '-'}|{self.prompt or '-'}|{self.code}"


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
