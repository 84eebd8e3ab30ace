"""The client's typed errors: one class per kind of refusal, all carrying status, code and message.

Every error is a `MemoryServiceError`; catch a subclass to branch on the kind, or the base and
branch on `code`. None of them holds the request, its headers or the token.
"""

from __future__ import annotations

import email.utils
import time

import httpx


class MemoryServiceError(Exception):
    """A refusal from the deployment, or no answer at all; branch on `code`.

    `status` is the HTTP status (0 when nothing answered); `retry_after` is the wait in seconds
    the deployment asked for, when it asked.
    """

    def __init__(
        self, status: int, code: str, message: str, *, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class InvalidRequest(MemoryServiceError):
    """400: the request is malformed or breaks a field's rule; the message names the field."""


class Unauthenticated(MemoryServiceError):
    """401: the token is missing, unknown, revoked, or its project suspended."""


class Forbidden(MemoryServiceError):
    """403: the token may not do this (a read-only token on a write)."""


class NotFound(MemoryServiceError):
    """404: nothing of that id in this project (missing, erased and another's look the same)."""


class Conflict(MemoryServiceError):
    """409: a reused idempotency key with other content, or a stale `expected_version`."""


class TooLarge(MemoryServiceError):
    """413: the body, or a batch's count, is over its limit."""


class RateLimited(MemoryServiceError):
    """429: capacity is busy; nothing was done. Sent again after `retry_after` seconds."""


class Unavailable(MemoryServiceError):
    """5xx, or status 0 with code `unreachable` when the deployment did not answer at all."""


_BY_STATUS: dict[int, type[MemoryServiceError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: RateLimited,
}


def retry_after(value: str | None) -> float | None:
    """A `Retry-After` header's wait in seconds: delta-seconds or an HTTP date; None if neither."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def refusal(response: httpx.Response) -> MemoryServiceError:
    """The typed error for an answer that is not the operation's success."""
    status = response.status_code
    code, message = "unexpected_response", f"the deployment answered {status}"
    try:
        error = response.json().get("error") or {}
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
    except (ValueError, AttributeError):
        pass
    kind = _BY_STATUS.get(status, Unavailable if status >= 500 else MemoryServiceError)
    return kind(status, code, message, retry_after=retry_after(response.headers.get("retry-after")))


def unreachable(error: httpx.HTTPError) -> Unavailable:
    """No answer: the deployment could not be reached, or stopped answering mid-request."""
    return Unavailable(0, "unreachable", f"the deployment did not answer ({type(error).__name__})")
