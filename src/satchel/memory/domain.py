"""The memory deployment's shared vocabulary: the refusals a use case raises, each carrying the
contract's error code. Every layer (api, service, store, formation) may import this module; it
imports nothing of satchel."""

from __future__ import annotations


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
