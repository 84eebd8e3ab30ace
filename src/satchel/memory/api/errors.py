"""The contract's error shape: `{"error": {"code": ..., "message": ...}}` everywhere."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException

log = logging.getLogger("satchel.memory")

BODY_UNREADABLE = "the request body could not be read"


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


def invalid_body() -> ApiError:
    return ApiError(400, "invalid_body", BODY_UNREADABLE)


def not_found(what: str = "not found") -> ApiError:
    return ApiError(404, "not_found", what)


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def failed(exc: Exception) -> JSONResponse:
    """An unexpected failure: 503 `no_database_capacity` when PostgreSQL has no room for another
    connection (or the pool none to lend), else 500 `internal`; neither reveals anything."""
    if isinstance(exc, PoolTimeout) or getattr(exc, "sqlstate", None) == "53300":
        return error_response(
            503,
            "no_database_capacity",
            "the database has no capacity for this request; retry with backoff",
            {"Retry-After": "1"},
        )
    log.error("unexpected %s while serving a request", type(exc).__name__)
    return error_response(500, "internal", "the request could not be served")


def install_error_handlers(app: FastAPI) -> None:
    """Map every failure, framework ones included, onto the error shape."""

    async def on_api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message, exc.headers)

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        return error_response(400, "invalid_body", BODY_UNREADABLE)

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
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
