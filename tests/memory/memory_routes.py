"""The routes an app serves, routers included: (path, methods, access) per route."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import FastAPI
from starlette.routing import BaseRoute, Route

from satchel.memory.api.app import create_app


def _walk(routes: Iterable[BaseRoute], prefix: str) -> Iterator[tuple[str, set[str], Any]]:
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _walk(included.routes, prefix + route.include_context.prefix)  # type: ignore[attr-defined]
        elif isinstance(route, Route) and route.methods is not None:
            extra = getattr(route, "openapi_extra", None) or {}
            yield prefix + route.path, set(route.methods) - {"HEAD"}, extra.get("x-access")


def served(app: FastAPI) -> list[tuple[str, set[str], Any]]:
    """Every served route but the schema itself and `/mcp` (JSON-RPC, not a v1 route)."""
    return [r for r in _walk(app.routes, "") if r[0] not in (app.openapi_url, "/mcp")]


def memory_app() -> FastAPI:
    """The app, built without opening its database."""
    return create_app("postgresql://unused/none")
