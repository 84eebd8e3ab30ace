"""One line per request on the `satchel.memory.access` logger, and an `X-Request-Id` on every
answer: the client's when it is well formed, else a new one.

A line holds the method, the route's template (the path, without its query string, when no route
matched), the status, the duration in milliseconds and the request id; never a header, a query
string or a body. The same values ride on the log record as attributes of those names. The id
is also `request.state.request_id`, so a request made on a request's behalf can carry it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from urllib.parse import quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from satchel.memory.logs import ACCESS_LOGGER

REQUEST_ID_HEADER = b"x-request-id"
REQUEST_ID = re.compile(rb"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PATH_SHOWN = 200  # characters of an unrouted path kept in a line

log = logging.getLogger(ACCESS_LOGGER)


def request_id(scope: Scope) -> str:
    """The client's `X-Request-Id` when well formed (1-128 of letters, digits, `.`, `_`, `:`,
    `-`, starting with a letter or digit), else a fresh one (32 hex digits)."""
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER and REQUEST_ID.fullmatch(value):
            return bytes(value).decode("ascii")
    return uuid.uuid4().hex


def route_of(scope: Scope) -> str:
    """The matched route's template, or the escaped, shortened path when none matched."""
    template = getattr(scope.get("route"), "path", None)
    if isinstance(template, str):
        return template
    return quote(scope.get("path", ""), safe="/:@!$&'()*+,;=-._~")[:PATH_SHOWN]


class AccessLog:
    """ASGI middleware, outermost: it sees every answer, the 500s of failed handlers included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id(scope)
        header = (REQUEST_ID_HEADER, rid.encode("ascii"))
        status = 0  # no answer was sent: the client went away first

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        try:
            await self.app(
                {**scope, "state": {**scope.get("state", {}), "request_id": rid}}, receive, answer
            )
        except BaseException:
            status = status or 500
            raise
        finally:
            if log.isEnabledFor(logging.INFO):
                _line(scope, status, (time.perf_counter() - started) * 1000, rid)


def _line(scope: Scope, status: int, duration_ms: float, rid: str) -> None:
    fields = {
        "method": scope["method"],
        "route": route_of(scope),
        "status": status,
        "duration_ms": round(duration_ms, 2),
        "request_id": rid,
    }
    log.info(
        "method=%s route=%s status=%d duration_ms=%.2f request_id=%s",
        *fields.values(),
        extra=fields,
    )
