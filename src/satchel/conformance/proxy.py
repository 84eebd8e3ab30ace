"""The fault proxy: a loopback reverse proxy in front of the deployment for a suite run.

It records every request an integration sends (method, path, JSON body; never a header, so the
credential is not kept), refuses the routes a case faults with 503 `unavailable`, and answers
`POST /v1/contexts` with a case's stated context instead of forwarding it.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from satchel.conformance.cases import ContextAnswer, Faults

RECALLS = "/v1/recalls"
OBSERVATIONS = "/v1/observations"
CONTEXTS = "/v1/contexts"
FAULTED_ROUTES = {"recall": RECALLS, "observe": OBSERVATIONS, "context": CONTEXTS}

_NOT_FORWARDED = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
_NOT_RETURNED = {"content-length", "content-encoding", "transfer-encoding", "connection"}


@dataclass(frozen=True)
class Exchange:
    """One request the proxy received: its method, path and JSON body (None when not JSON)."""

    method: str
    path: str
    body: Any


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None


class FaultProxy:
    """An ASGI reverse proxy to `upstream`, configured per case by the runner."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._lock = threading.Lock()
        self._recorded: list[Exchange] = []
        self._refused: set[str] = set()
        self._context: dict[str, Any] | None = None
        self._http: httpx.AsyncClient | None = None

    def configure(self, faults: Faults, context: ContextAnswer | None) -> None:
        """Set the case's faults and stated context, and forget what was recorded."""
        refused = {FAULTED_ROUTES[name] for name, value in faults if value}
        stated = context.model_dump(mode="json", exclude_unset=True) if context else None
        with self._lock:
            self._refused = refused
            self._context = stated
            self._recorded = []

    def reset(self) -> None:
        """Forget what was recorded."""
        with self._lock:
            self._recorded = []

    @property
    def recorded(self) -> list[Exchange]:
        with self._lock:
            return list(self._recorded)

    def requests(self, method: str, path: str) -> list[Exchange]:
        """The recorded requests to one route, in the order they arrived."""
        return [e for e in self.recorded if e.method == method and e.path == path]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = await self._answer(request)
        await response(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._http = httpx.AsyncClient(timeout=60.0)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._http is not None:
                    await self._http.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _answer(self, request: Request) -> Response:
        raw = await request.body()
        path = request.url.path
        with self._lock:
            self._recorded.append(Exchange(request.method, path, _json(raw)))
            refused = request.method == "POST" and path in self._refused
            stated = self._context if request.method == "POST" and path == CONTEXTS else None
        if refused:
            message = f"the fault proxy refuses {path} for this case"
            return JSONResponse({"error": {"code": "unavailable", "message": message}}, 503)
        if stated is not None:
            return JSONResponse(stated, 200)
        return await self._forward(request, raw)

    async def _forward(self, request: Request, raw: bytes) -> Response:
        assert self._http is not None
        url = self.upstream + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        try:
            answer = await self._http.request(request.method, url, content=raw, headers=headers)
        except httpx.HTTPError as error:
            message = f"the fault proxy could not reach the deployment ({type(error).__name__})"
            return JSONResponse({"error": {"code": "unavailable", "message": message}}, 502)
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _NOT_RETURNED}
        return Response(answer.content, answer.status_code, headers=kept)


@contextmanager
def serving(upstream: str) -> Iterator[tuple[FaultProxy, str]]:
    """Run a `FaultProxy` to `upstream` on a free loopback port; yields it and its URL."""
    proxy = FaultProxy(upstream)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(proxy, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the fault proxy did not start")
            threading.Event().wait(0.02)
        yield proxy, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
