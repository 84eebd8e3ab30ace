"""`GET /inspect` and its script and style: static files that hold no data and need no token,
each sent with a Content-Security-Policy that allows only the page's own resources.

A route of its own kind (not an API route): it is not part of the v1 schema, and it answers every
path under `/inspect`, unknown ones and other methods with the contract's error shape.
"""

from __future__ import annotations

from importlib import resources

from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import Receive, Scope, Send

from satchel.memory.api.errors import error_response

PREFIX = "/inspect"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
FILES = {
    "": ("inspect.html", "text/html; charset=utf-8"),
    "/": ("inspect.html", "text/html; charset=utf-8"),
    "/inspect.js": ("inspect.js", "text/javascript; charset=utf-8"),
    "/inspect.css": ("inspect.css", "text/css; charset=utf-8"),
}


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


class InspectorPages(BaseRoute):
    """Serves the inspector's files under `/inspect` (GET and HEAD) with the security headers."""

    path = PREFIX

    def __init__(self) -> None:
        self.files = {path: (_static(name), kind) for path, (name, kind) in FILES.items()}

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == PREFIX or path.startswith(PREFIX + "/"):
            return Match.FULL, {"route": self}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.files.get(scope["path"].removeprefix(PREFIX))
        response: Response
        if scope["method"] not in ("GET", "HEAD"):
            response = error_response(
                405,
                "method_not_allowed",
                f"the inspector's pages answer GET, not {scope['method'][:16]}",
                {"Allow": "GET, HEAD"},
            )
        elif found is None:
            response = error_response(
                404, "not_found", "no such inspector file: open /inspect for the page"
            )
        else:
            content, kind = found
            response = Response(content, media_type=kind)
        response.headers.update(SECURITY_HEADERS)
        await response(scope, receive, send)
