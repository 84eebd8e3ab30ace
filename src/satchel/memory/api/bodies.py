"""Building blocks of request and response models: strict, closed bodies stating the contract.

A request model states each field's type, bounds and format, so the served OpenAPI says what the
handlers accept; `errors.refusal` turns what pydantic refuses into the contract's error codes.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from satchel.memory.domain import render_time

BODY = "invalid_body"  # the code of a body that cannot be read as its model


class Body(BaseModel):
    """A request body: unknown fields and type coercion are refused.

    `refusal` is the contract code a top-level body's field errors get (a field can override it
    with `Refusal`); type errors, unknown fields and unreadable values are `invalid_body`.
    """

    model_config = ConfigDict(extra="forbid", strict=True)
    refusal: ClassVar[str] = BODY


@dataclass(frozen=True, slots=True)
class Refusal:
    """Field metadata: the codes of this field's refusals when they are not the route's.

    `code`: any refusal of its value; `missing`: when it is left out; `null`: when it is null.
    """

    code: str | None = None
    missing: str | None = None
    null: str | None = None


REQUIRED_BODY = Refusal(missing=BODY, null=BODY)  # absent or null: the body is unreadable

NO_NUL = "^[^\\u0000]*$"
NOT_BLANK = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"
# What `\s` matches in the schema's (ECMAScript) patterns; Python's `str.isspace` differs (it
# holds U+001C..U+001F and U+0085, not U+FEFF), and the handlers must agree with the schema.
SPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)
EMPTY_OR_NOT_BLANK = f"^(?:{NOT_BLANK[1:-1]})?$"


def blank(value: str) -> bool:
    """Empty or only whitespace, as the schema's `\\s` counts it."""
    return all(char in SPACE for char in value)


@dataclass(frozen=True, slots=True)
class Text:
    """A string without NUL (PostgreSQL text cannot hold one), of at most `max_bytes` UTF-8 bytes.

    `blank`: "never" (it must hold a non-space character), "empty" (empty, or not blank) or
    "any". `shown`: the pattern the schema states when it is narrower than what is accepted
    (where an empty or blank value counts as left out). The schema states the byte limit as
    `maxLength` (exact for ASCII; a string of that many characters may still be too long in
    bytes) and as `x-max-utf8-bytes`.
    """

    max_bytes: int | None = None
    blank: str = "never"
    shown: str | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        found["pattern"] = self.shown or {"never": NOT_BLANK, "empty": EMPTY_OR_NOT_BLANK}.get(
            self.blank, NO_NUL
        )
        if found["pattern"] == NOT_BLANK:
            found["minLength"] = 1
        if self.max_bytes is not None:
            found["maxLength"] = self.max_bytes
            found["x-max-utf8-bytes"] = self.max_bytes
        return found

    def check(self, value: str) -> str:
        if "\x00" in value:
            raise PydanticCustomError("text", "must not contain a NUL character (U+0000)")
        if self.blank == "never" and blank(value):
            raise PydanticCustomError("text", "must not be empty or blank")
        if self.blank == "empty" and value and blank(value):
            raise PydanticCustomError("text", "must be empty or hold a non-space character")
        if self.max_bytes is not None and len(value.encode("utf-8")) > self.max_bytes:
            raise PydanticCustomError(
                "text", "must be at most {limit} UTF-8 bytes", {"limit": self.max_bytes}
            )
        return value


UUID_PATTERN = "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
NIL_UUID = "00000000-0000-0000-0000-000000000000"
_UUID = re.compile(UUID_PATTERN)


@dataclass(frozen=True, slots=True)
class Uuid:
    """A UUID in its 36-character hyphenated form (any case), kept as the string given.

    `nil`: whether the all-zero UUID is allowed; `empty`: whether "" is accepted as no value
    (the schema does not show that form).
    """

    nil: bool = True
    empty: bool = False

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        found.update(format="uuid", pattern=UUID_PATTERN)
        if not self.nil:
            found["not"] = {"const": NIL_UUID}
        return found

    def check(self, value: str) -> str:
        if self.empty and not value:
            return value
        if not _UUID.fullmatch(value):
            raise PydanticCustomError("uuid", "must be a UUID (36 characters, with hyphens)")
        if not self.nil and value == NIL_UUID:
            raise PydanticCustomError("uuid", "must not be the nil UUID")
        return value


LOWEST = datetime.min.replace(tzinfo=UTC)
HIGHEST = datetime.max.replace(tzinfo=UTC)
RANGE = (
    f"{LOWEST.isoformat().replace('+00:00', 'Z')} to {HIGHEST.isoformat().replace('+00:00', 'Z')}"
)
# Years 0001 and 9999 hold instants some offsets carry out of range: the schema leaves out their
# first and last day, which are always safe to refuse for a generator and rare for a person.
TIMESTAMP_PATTERN = "^(?!0001-01-01|9999-12-31)"


def _instant(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise PydanticCustomError(
            "timestamp", "must be an RFC 3339 timestamp, such as 2026-01-31T09:30:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise PydanticCustomError(
            "timestamp", "must carry an offset or Z (an RFC 3339 timestamp has a zone)"
        )
    try:
        return parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        raise PydanticCustomError(
            "timestamp_range", "must lie in the range {range} (in UTC)", {"range": RANGE}
        ) from None


class _Timestamp:
    """An RFC 3339 timestamp with an offset, read as an instant in UTC."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_instant, core_schema.str_schema())

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "format": "date-time",
            "pattern": TIMESTAMP_PATTERN,
            "description": f"RFC 3339 with an offset; the instant lies in {RANGE} (UTC)",
        }


Timestamp = Annotated[datetime, _Timestamp]

INT64 = 1 << 63
# The largest double below 2**63: a schema's bounds are read as doubles, and 2**63 - 1 is not one.
DOUBLE_BELOW_INT64 = INT64 - 1024
Int64 = Annotated[
    int,
    Field(
        ge=-INT64,
        le=INT64 - 1,
        json_schema_extra={"format": "int64", "maximum": DOUBLE_BELOW_INT64},
    ),
]


def _distinct(values: list[Any]) -> list[Any]:
    if len(set(values)) != len(values):
        raise PydanticCustomError("distinct", "must not repeat a value")
    return values


@dataclass(frozen=True, slots=True)
class Distinct:
    """A list whose items are all different (`uniqueItems`)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(_distinct, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(schema)
        found["uniqueItems"] = True
        return found


CANONICAL_BASE64 = (
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
)


@dataclass(frozen=True, slots=True)
class Base64:
    """Canonical standard base64 of at most `max_bytes` bytes, read as those bytes.

    Anything that is not canonical base64 is unreadable (`invalid_body`); too many bytes is the
    route's refusal.
    """

    max_bytes: int

    @property
    def max_length(self) -> int:
        return 4 * -(-self.max_bytes // 3)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.decode, core_schema.str_schema())

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "contentEncoding": "base64",
            "pattern": CANONICAL_BASE64,
            "maxLength": self.max_length,
            "description": f"canonical standard base64 of at most {self.max_bytes} bytes",
        }

    def decode(self, value: str) -> bytes:
        if len(value) > self.max_length:
            raise PydanticCustomError(
                "base64", "must encode at most {limit} bytes", {"limit": self.max_bytes}
            )
        try:
            decoded = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            decoded = None
        if decoded is None or base64.b64encode(decoded).decode("ascii") != value:
            raise PydanticCustomError("base64", "must be canonical standard base64")
        if len(decoded) > self.max_bytes:
            raise PydanticCustomError(
                "too_large", "must encode at most {limit} bytes", {"limit": self.max_bytes}
            )
        return decoded


def exactly_one(*fields: str) -> dict[str, Any]:
    """Model JSON schema extra: exactly one of `fields` is given (and not null)."""
    return {
        "oneOf": [
            {"required": [name], "properties": {name: {"not": {"type": "null"}}}} for name in fields
        ]
    }


class Answer(BaseModel):
    """A response body."""

    model_config = ConfigDict(extra="forbid")


def rfc3339(value: datetime | None) -> str | None:
    """Render a timestamp as RFC 3339 in UTC with a `Z`."""
    if value is None:
        return None
    return render_time(value)


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


MAX_CANDIDATE_LIMIT = 32  # results a candidate search answers at most
MAX_CANDIDATES = 1000  # candidates it may rank them from
CANDIDATES_RULE = (
    f"0 (the default) or at least `limit`, at most {MAX_CANDIDATES}; the schema admits 0 and"
    f" {MAX_CANDIDATE_LIMIT}..{MAX_CANDIDATES}, which fit every limit"
)
# A search's `candidates`: 0 or at least its `limit` (checked with the limit, beside the body).
CandidateCount = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_CANDIDATES,
        json_schema_extra={"anyOf": [{"const": 0}, {"minimum": MAX_CANDIDATE_LIMIT}]},
    ),
]
