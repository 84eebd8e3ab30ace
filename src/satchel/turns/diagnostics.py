"""Allowlisted diagnostics of a failed request: never a provider message or a raw body."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

_ERROR_TYPE = re.compile(r"[a-z][a-z0-9_]{0,79}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


@dataclass(frozen=True, slots=True)
class Diagnostics:
    """What a record may say about a failed request."""

    exception_class: str
    provider_error_type: str | None = None
    http_status: int | None = None
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for a log: `HTTP 503 server_error (InternalServerError, request req_1)`."""
        status = f"HTTP {self.http_status}" if self.http_status else ""
        head = " ".join(part for part in (status, self.provider_error_type or "") if part)
        detail = [self.exception_class] if head else []
        if self.request_id:
            detail.append(f"request {self.request_id}")
        name = head or self.exception_class
        return f"{name} ({', '.join(detail)})" if detail else name

    @classmethod
    def build(
        cls,
        exception_class: str,
        provider_error_type: object = None,
        http_status: object = None,
        request_id: object = None,
    ) -> Diagnostics:
        """Keep each value only when it matches its allowlist pattern."""
        return cls(
            exception_class=_match(_CLASS_NAME, exception_class) or "Exception",
            provider_error_type=_match(_ERROR_TYPE, provider_error_type),
            http_status=http_status
            if isinstance(http_status, int) and 100 <= http_status <= 599
            else None,
            request_id=_match(_REQUEST_ID, request_id),
        )


def _match(pattern: re.Pattern[str], value: object) -> str | None:
    if isinstance(value, str) and pattern.fullmatch(value):
        return value
    return None
