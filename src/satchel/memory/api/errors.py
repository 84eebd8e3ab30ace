"""The contract's error shape: `{"error": {"code": ..., "message": ...}}` everywhere, and the
refusal a request model's validation errors amount to."""

from __future__ import annotations

import logging
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from starlette.exceptions import HTTPException

from satchel.memory.api.bodies import BODY, Refusal
from satchel.memory.domain import (
    AllowanceFull,
    Busy,
    Conflict,
    Failed,
    Forbidden,
    Invalid,
    NotFound,
    Refused,
    TooLarge,
    TooLargeToAnswer,
    Unavailable,
)

log = logging.getLogger("satchel.memory")

BODY_UNREADABLE = "the request body could not be read"
# admin_shutdown, crash_shutdown, cannot_connect_now: a restart of the server under way
SERVER_GOING_OR_COMING = frozenset({"57P01", "57P02", "57P03"})


class ApiError(Exception):
    """An answer other than success, with the contract's code."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


# The HTTP status of each kind of domain refusal.
REFUSAL_STATUS: dict[type[Refused], int] = {
    Invalid: 400,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Busy: 429,
    TooLargeToAnswer: 422,
    AllowanceFull: 429,
    Failed: 500,
    Unavailable: 503,
}


def refused_status(exc: Refused) -> int:
    """The status a domain refusal is answered with (its nearest listed kind)."""
    return next((status for kind, status in REFUSAL_STATUS.items() if isinstance(exc, kind)), 500)


def invalid_body(reason: str = BODY_UNREADABLE) -> ApiError:
    return ApiError(400, BODY, reason)


def not_found(what: str = "not found") -> ApiError:
    return ApiError(404, "not_found", what)


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def unreachable(exc: Exception) -> bool:
    """Whether `exc` says the database cannot be reached now: the connection failed or was cut
    (no SQLSTATE, or class 08), or the server is shutting down, restarting or starting up."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in SERVER_GOING_OR_COMING


def failed(exc: Exception) -> JSONResponse:
    """An unexpected failure: 503 `no_database_capacity` when PostgreSQL has no room for another
    connection (or the pool none to lend), 503 `database_unavailable` while it cannot be reached,
    else 500 `internal`; none reveals anything."""
    if isinstance(exc, PoolTimeout) or getattr(exc, "sqlstate", None) == "53300":
        return error_response(
            503,
            "no_database_capacity",
            "the database has no capacity for this request; retry with backoff",
            {"Retry-After": "1"},
        )
    if unreachable(exc):
        log.warning("the database could not be reached (%s)", type(exc).__name__)
        return error_response(
            503,
            "database_unavailable",
            "the database cannot be reached now; retry with backoff and the same idempotency key",
            {"Retry-After": "1"},
        )
    log.error("unexpected %s while serving a request", type(exc).__name__)
    return error_response(500, "internal", "the request could not be served")


def install_error_handlers(app: FastAPI) -> None:
    """Map every failure, framework ones included, onto the error shape."""

    async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def on_refused(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Refused)
        headers = {"Retry-After": "1"} if isinstance(exc, Busy) else None
        return error_response(refused_status(exc), exc.code, exc.message, headers)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        refused = refusal(None, exc.errors())
        return error_response(refused.status, refused.code, refused.message)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error_response(404, "not_found", "no such route")
        if exc.status_code == 405:
            return error_response(
                405, "method_not_allowed", "this route does not answer that method", exc.headers
            )
        if exc.status_code == 400:
            return error_response(400, "invalid_body", BODY_UNREADABLE)
        return error_response(exc.status_code, "internal", "the request could not be served")

    async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
        return failed(exc)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(Refused, on_refused)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)


# Errors saying a JSON value has the wrong type; null given for a field means "left out".
TYPE_ERRORS = frozenset(
    {
        "string_type",
        "int_type",
        "bool_type",
        "float_type",
        "list_type",
        "dict_type",
        "model_type",
        "model_attributes_type",
        "literal_error",
    }
)
UNREADABLE = frozenset({"extra_forbidden", "timestamp", "base64", "json_invalid"})
KINDS = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "float_type": "must be a number",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


def _unwrap(annotation: Any) -> Any:
    """The type under `Annotated[...]` and `X | None`."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        else:
            return annotation


def _field(model: type[BaseModel] | None, path: Sequence[Any]) -> FieldInfo | None:
    """The request field an error location ends in (the list's field for an item)."""
    current: Any = model
    found: FieldInfo | None = None
    for part in path:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if typing.get_origin(current) is list and args else None
            continue
        fields = (
            current.model_fields
            if isinstance(current, type) and issubclass(current, BaseModel)
            else {}
        )
        if part not in fields:
            return None
        found = fields[part]
        current = found.annotation
    return found


def _place(path: Sequence[Any]) -> str:
    """`messages[2].role` for the location ("messages", 2, "role")."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the body"


def _one_of(expected: str) -> str:
    names = [name.strip().strip("'") for name in expected.replace(" or ", ", ").split(",")]
    return "must be one of " + ", ".join(name for name in names if name)


def _judge(model: type[BaseModel] | None, error: Mapping[str, Any]) -> tuple[str, str]:
    """The code and the message of one validation error."""
    kind, value = error["type"], error.get("input")
    loc = tuple(error.get("loc", ()))
    path = loc[1:] if loc[:1] == ("body",) else loc
    route = getattr(model, "refusal", BODY)
    field = _field(model, path)
    marks = next(
        (m for m in (field.metadata if field else []) if isinstance(m, Refusal)), Refusal()
    )
    ctx = error.get("ctx") or {}
    if not path:
        return BODY, "the request body must be one JSON object"
    if kind == "missing":
        return marks.missing or marks.code or route, "is required"
    if kind in TYPE_ERRORS and value is None:
        if isinstance(path[-1], int):
            return BODY, "must not be null"
        return marks.null or marks.code or route, "is required and must not be null"
    if kind == "literal_error":
        if not isinstance(value, str):
            return BODY, "must be a string"
        return marks.code or route, _one_of(str(ctx.get("expected", "")))
    if kind in KINDS:
        return BODY, KINDS[kind]
    if kind == "extra_forbidden":
        return BODY, "is not a field of this request (field names are listed in /openapi.json)"
    message = {
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
        "greater_than": f"must be more than {ctx.get('gt')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "too_short": f"must hold at least {ctx.get('min_length')} item(s)",
        "too_long": f"must hold at most {ctx.get('max_length')} items",
        "string_pattern_mismatch": f"must match the pattern {ctx.get('pattern')}",
    }.get(kind, str(error.get("msg", "is not valid")).removeprefix("Value error, "))
    return (BODY if kind in UNREADABLE else marks.code or route), message


def refusal(model: type[BaseModel] | None, errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """The refusal of a body whose model found `errors`: an unreadable part (unknown field, wrong
    type, unreadable value) makes it `invalid_body`; else the first error's field decides the
    code (the route's, unless the field says otherwise). The message names the field."""
    judged = []
    for error in errors:
        code, message = _judge(model, error)
        loc = tuple(error.get("loc", ()))
        place = _place(loc[1:] if loc[:1] == ("body",) else loc)
        judged.append((code, message if place == "the body" else f"{place}: {message}"))
    if not judged:
        return invalid_body()
    code, message = next((item for item in judged if item[0] == BODY), judged[0])
    if len(judged) > 1:
        message += f" (and {len(judged) - 1} more)"
    return ApiError(400, code, message)
