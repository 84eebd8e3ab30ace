"""Building blocks of request and response models: strict, closed, RFC 3339 timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict


def _rfc3339(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("expected an RFC 3339 timestamp string")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError("an RFC 3339 timestamp needs an offset")
    return parsed


Timestamp = Annotated[datetime, BeforeValidator(_rfc3339)]


class Body(BaseModel):
    """A request body: unknown fields and type coercion are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Answer(BaseModel):
    """A response body."""

    model_config = ConfigDict(extra="forbid")


def rfc3339(value: datetime | None) -> str | None:
    """Render a timestamp as RFC 3339 in UTC with a `Z`."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
