"""Strict request bodies and the per-route auth, admission and access checks.

A body is one JSON object of at most 1 MiB (more is 413 `invalid_body`, here and on `/mcp`),
valid UTF-8 (no lone surrogates), nested at most 128 deep, with no duplicate keys (also after
case folding), no NaN or Infinity, and integers that fit in 64 bits (an integral number such as
8.0 or 1e2 is an integer, as JSON Schema counts it). Anything else is 400 `invalid_body`, saying
what was wrong. Field names match in any case, as for
the reference server's decoder. The body then goes through the route's request model, whose
refusals name the field (see `errors.refusal`).
Authentication, admission and the read-only check run before the body is read; a body that has
not arrived within the `body_timeout` setting is 408 `invalid_body`, and its slot is released.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Coroutine
from decimal import Decimal
from typing import Any, Literal

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from satchel.memory.api.errors import ApiError, failed, invalid_body, refusal
from satchel.memory.domain import Refused

MAX_BODY_BYTES = 1 << 20
MAX_DEPTH = 128
TOO_LARGE = "the request body is over 1 MiB (1,048,576 bytes)"
TOO_DEEP = f"the request body nests deeper than {MAX_DEPTH} levels"

Access = Literal["read", "write"]


def too_large() -> ApiError:
    """A body over `MAX_BODY_BYTES`: 413 with the contract's code for an unreadable body (why:
    decision 0056 in docs/decisions/)."""
    return ApiError(413, "invalid_body", TOO_LARGE)


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are case-folded: duplicates clash, field names match in any case."""
    folded: dict[str, Any] = {}
    for key, value in pairs:
        name = key.casefold()
        if name in folded:
            raise _Duplicate(key)
        folded[name] = value
    return folded


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _int64(text: str) -> int:
    value = int(text)
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"the integer {text[:24]} does not fit in 64 bits")
    return value


def _number(text: str) -> int | float:
    """A number with a fraction or exponent; an integral one (8.0, 1e2) is an integer, as JSON
    Schema counts it."""
    try:
        exact = Decimal(text)
        integral = exact.is_finite() and exact == exact.to_integral_value()
    except ArithmeticError:
        raise ValueError(f"the number {text[:24]} is out of range") from None
    if integral and abs(exact.adjusted()) <= 19:
        return _int64(str(int(exact)))
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:24]} is out of range")
    return value


def _too_deep(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend(
                (child, depth + 1) for child in item.values() if isinstance(child, dict | list)
            )
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item if isinstance(child, dict | list))
    return False


def decode_body(raw: bytes) -> dict[str, Any]:
    """Parse a request body under the contract's rules, or raise `invalid_body` saying why."""
    if len(raw) > MAX_BODY_BYTES:
        raise too_large()
    if not raw.strip():
        raise invalid_body("the request body is empty; send one JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeError:
        raise invalid_body("the request body is not valid UTF-8") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_int=_int64,
            parse_float=_number,
        )
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except _Duplicate as duplicate:
        raise invalid_body(
            f"the request body repeats the key {str(duplicate)!r} (names match in any case)"
        ) from None
    except json.JSONDecodeError as broken:
        raise invalid_body(
            f"the request body is not valid JSON: {broken.msg} at line {broken.lineno}"
            f" column {broken.colno}"
        ) from None
    except UnicodeError:
        raise invalid_body("the request body holds a lone UTF-16 surrogate") from None
    except RecursionError:
        raise invalid_body(TOO_DEEP) from None
    except ValueError as wrong:
        raise invalid_body(f"the request body is not valid JSON: {wrong}") from None
    if not isinstance(value, dict):
        raise invalid_body("the request body must be one JSON object")
    if _too_deep(value):
        raise invalid_body(TOO_DEEP)
    return value


class StrictRequest(Request):
    """A request whose body is capped and timed while read and decoded strictly."""

    async def read_within(self, seconds: float) -> bytes:
        """The whole body, or 408 when it has not arrived `seconds` after reading began."""
        try:
            async with asyncio.timeout(seconds):
                return await self.body()
        except TimeoutError:
            raise ApiError(
                408,
                "invalid_body",
                f"the request body did not arrive within {seconds:g} s; send it in one go",
                {"Connection": "close"},
            ) from None

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            declared = self.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise too_large()
            chunks: list[bytes] = []
            size = 0
            async for chunk in self.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise too_large()
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = decode_body(await self.body())
        return self._json


Gate = Callable[[Request, Access], Awaitable[Callable[[], None]]]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorAnswer(BaseModel):
    """The contract's error shape, the body of every refusal."""

    error: ErrorDetail


REFUSALS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorAnswer, "description": "Refused; `error.code` says why."},
    "5XX": {"model": ErrorAnswer, "description": "Failed; `internal` or `no_database_capacity`."},
}


class StrictRoute(APIRoute):
    """A route that authenticates, admits and checks access, then decodes its body strictly.

    Its access (`read` or `write`) is declared as `x-access` in the route's OpenAPI extra, so
    the published schema says it too (see `access`); its refusals are documented in the
    contract's error shape (not FastAPI's 422 validation answer, which is never served).

    The app sets `request.app.state.deployment`, whose `gate` is an async callable that
    authenticates the request, takes an admission slot, checks access, and returns the function
    that releases the slot.
    """

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        responses: dict[int | str, dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(path, endpoint, responses={**REFUSALS, **(responses or {})}, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        access: Access | None = (self.openapi_extra or {}).get("x-access")
        annotation = self.body_field.field_info.annotation if self.body_field else None
        model = annotation if isinstance(annotation, type) else None
        assert model is None or issubclass(model, BaseModel)

        async def strict_handler(request: Request) -> Response:
            strict = StrictRequest(_as_json(request.scope), request.receive)
            try:
                if access is None:
                    return await handler(strict)
                parts = request.app.state.deployment
                release = await parts.gate(strict, access)
                try:
                    if model is not None:
                        await strict.read_within(parts.settings.body_timeout)
                        await strict.json()
                    return await handler(strict)
                finally:
                    release()
            except RequestValidationError as invalid:
                raise refusal(model, invalid.errors()) from None
            except (ApiError, Refused, HTTPException):
                raise
            except Exception as exc:  # answered here: past this point the connection is dropped
                return failed(exc)

        return strict_handler


def require(condition: bool, code: str, message: str, status: int = 400) -> None:
    """Raise the contract error `code` unless `condition` holds."""
    if not condition:
        raise ApiError(status, code, message)


def access(level: Access) -> dict[str, Any]:
    """Route keyword arguments declaring the access a route needs."""
    return {"openapi_extra": {"x-access": level}}


def _as_json(scope: Any) -> Any:
    """Every body is JSON, whatever content type the client declared."""
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
