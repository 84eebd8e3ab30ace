"""Strict request bodies and the per-route auth, admission and access checks.

A body is one JSON object of at most 1 MiB, valid UTF-8 (no lone surrogates), nested at most 128
deep, with no duplicate keys (also after case folding). Anything else is 400 `invalid_body`.
Authentication, admission and the read-only check run before the body is read.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal

from fastapi import Request, Response
from fastapi.routing import APIRoute

from satchel.memory.api.errors import ApiError, invalid_body

MAX_BODY_BYTES = 1 << 20
MAX_DEPTH = 128

Access = Literal["read", "write"]


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        folded = key.casefold()
        if folded in seen:
            raise _Duplicate(key)
        seen.add(folded)
    return dict(pairs)


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
    """Parse a request body under the contract's rules, or raise `invalid_body`."""
    if len(raw) > MAX_BODY_BYTES:
        raise invalid_body()
    try:
        text = raw.decode("utf-8")
        value = json.loads(text, object_pairs_hook=_pairs)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (UnicodeError, ValueError, RecursionError):
        raise invalid_body() from None
    if not isinstance(value, dict) or _too_deep(value):
        raise invalid_body()
    return value


class StrictRequest(Request):
    """A request whose body is capped while read and decoded strictly."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            declared = self.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise invalid_body()
            chunks: list[bytes] = []
            size = 0
            async for chunk in self.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise invalid_body()
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = decode_body(await self.body())
        return self._json


Gate = Callable[[Request, Access], Awaitable[Callable[[], None]]]


class StrictRoute(APIRoute):
    """A route that authenticates, admits and checks access, then decodes its body strictly.

    Its access (`read` or `write`) is declared as `x-access` in the route's OpenAPI extra, so
    the published schema says it too (see `access`).

    The app sets `request.app.state.gate`: an async callable that authenticates the request,
    takes an admission slot, checks access, and returns the function that releases the slot.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        access: Access | None = (self.openapi_extra or {}).get("x-access")

        async def strict_handler(request: Request) -> Response:
            strict = StrictRequest(_as_json(request.scope), request.receive)
            if access is None:
                return await handler(strict)
            release = await request.app.state.gate(strict, access)
            try:
                return await handler(strict)
            finally:
                release()

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
