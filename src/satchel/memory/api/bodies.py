"""Building blocks of request and response models: strict, closed, RFC 3339 timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer


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
    return render_time(value)


def render_time(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


Instant = Annotated[datetime, PlainSerializer(render_time, return_type=str)]


def _absent(value: Any) -> bool:
    return value is None


def omitted() -> Any:
    """A field left out of the answer when it has no value (not rendered as null)."""
    return Field(default=None, exclude_if=_absent)


class Interval(Answer):
    """A time range, `[from, until)`; an open end is null."""

    from_: Instant | None = Field(alias="from")
    until: Instant | None
    from_inclusive: bool
    until_inclusive: bool


def interval(low: datetime | None, high: datetime | None) -> Interval:
    return Interval.model_validate(
        {"from": low, "until": high, "from_inclusive": low is not None, "until_inclusive": False}
    )
