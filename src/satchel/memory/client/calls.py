"""One request of the v1 contract as data, and the retry policy that decides whether to resend it.

A `Call` is built once, idempotency keys included, before the first attempt; every retry sends
the very same body. The transports (`clients.py`) only send calls and sleep between attempts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from satchel.memory.client.errors import MemoryServiceError, refusal


@dataclass(frozen=True, slots=True)
class Call:
    """Method, path, JSON body, success status, and whether sending it twice is harmless.

    `repeatable` is False only for writes that make something new on every call with nothing to
    recognise a repeat by (a feedback report, a notification endpoint).
    """

    method: str
    path: str
    body: dict[str, Any] | None
    success: int
    repeatable: bool = True


def fields(**given: Any) -> dict[str, Any]:
    """A request body of the fields given, leaving out those left as None."""
    return {name: value for name, value in given.items() if value is not None}


def new_key() -> str:
    """An idempotency key for a caller who gave none: made once, reused by every retry."""
    return str(uuid.uuid4())


def keyed(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The batch's records, each with its own idempotency key (a new one where it had none)."""
    return [
        dict(record) if record.get("idempotency_key") else {**record, "idempotency_key": new_key()}
        for record in records
    ]


@dataclass(frozen=True, slots=True)
class Retries:
    """When to send a refused call again.

    `attempts` counts every try, the first included (1 turns retrying off); `longest_wait` caps
    one `Retry-After`; `deadline` bounds all attempts and waits together, in seconds. A wait that
    would pass the deadline is not waited: the refusal is raised instead.
    """

    attempts: int = 3
    longest_wait: float = 5.0
    deadline: float = 20.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("retries: attempts must be at least 1")
        if self.longest_wait < 0 or self.deadline < 0:
            raise ValueError("retries: longest_wait and deadline must not be negative")

    def wait(
        self, call: Call, error: MemoryServiceError, attempt: int, spent: float
    ) -> float | None:
        """Seconds to wait before attempt `attempt + 1` of `call`, or None to raise `error`.

        429 is retried for every call: the deployment refused it before doing anything. A 503
        that names a `Retry-After` is retried only for a repeatable call, since a gateway may
        answer it after the request went through. Nothing else is retried.
        """
        if attempt >= self.attempts:
            return None
        if error.status == 429:
            asked = 1.0 if error.retry_after is None else error.retry_after
        elif error.status == 503 and error.retry_after is not None and call.repeatable:
            asked = error.retry_after
        else:
            return None
        pause = min(asked, self.longest_wait)
        return pause if spent + pause <= self.deadline else None


def answer(response: httpx.Response, call: Call) -> dict[str, Any]:
    """The success answer's JSON object, or the typed error for any other answer."""
    if response.status_code != call.success:
        raise refusal(response)
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise MemoryServiceError(
            response.status_code, "unexpected_response", "the answer is not a JSON object"
        )
    return data
