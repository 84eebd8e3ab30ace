"""A loopback tap between the harness and a real model server: it forwards every request as it
came, keeps each request body with the server's answer, and can spoil the first answers (their
text replaced by one no parser accepts) to make the harness retry against the real model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from satchel.harness.loopback import Served

SPOILED = "I would rather describe the colours than pick an action."
UPSTREAM_TIMEOUT_S = 900.0  # a long prompt on a busy machine


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request the tap forwarded: its JSON body, the answer's text and usage as the
    server sent them (for a stream, read from its chunks), and whether the tap spoiled it."""

    request: dict[str, Any]
    text: str
    usage: dict[str, Any]
    spoiled: bool = False


def _stream_answer(raw: bytes) -> tuple[str, dict[str, Any]]:
    text: list[str] = []
    usage: dict[str, Any] = {}
    for line in raw.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line.removeprefix("data: "))
        for choice in chunk.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
        usage = chunk.get("usage") or usage
    return "".join(text), usage


class ModelTap:
    """Serves on a free loopback port in front of `upstream` (a base URL ending in `/v1`);
    `spoil` answers (non-streamed ones) are spoiled, the first ones first."""

    def __init__(self, upstream: str, *, spoil: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.spoil = spoil
        self._lock = threading.Lock()
        self._exchanges: list[Exchange] = []
        self._served: Served | None = None

    @property
    def base_url(self) -> str:
        assert self._served is not None, "the tap is not running"
        return f"http://127.0.0.1:{self._served.port}/v1"

    @property
    def exchanges(self) -> list[Exchange]:
        with self._lock:
            return list(self._exchanges)

    def forward(self, path: str, body: bytes) -> tuple[int, str, bytes]:
        """Send one request upstream; the status, content type and body to answer with."""
        answer = httpx.post(
            f"{self.upstream}{path.removeprefix('/v1')}",
            content=body,
            headers={"content-type": "application/json"},
            timeout=UPSTREAM_TIMEOUT_S,
        )
        request = json.loads(body)
        kind = answer.headers.get("content-type", "application/json")
        if answer.status_code != 200:
            return answer.status_code, kind, answer.content
        if request.get("stream"):
            text, usage = _stream_answer(answer.content)
            self._keep(Exchange(request, text, usage))
            return 200, kind, answer.content
        data = answer.json()
        with self._lock:
            spoil = self.spoil > 0
            self.spoil -= int(spoil)
        if spoil:
            data["choices"][0]["message"]["content"] = SPOILED
        self._keep(
            Exchange(request, data["choices"][0]["message"]["content"], data["usage"], spoil)
        )
        return 200, "application/json", json.dumps(data).encode()

    def _keep(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    def __enter__(self) -> ModelTap:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.tap = self  # type: ignore[attr-defined]
        self._served = Served(httpd, "model-tap")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the exchanges instead."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        tap: ModelTap = self.server.tap  # type: ignore[attr-defined]
        status, kind, content = tap.forward(self.path, body)
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


def requests_after(exchanges: list[Exchange], index: int) -> Iterator[str]:
    """The JSON text of every request sent after exchange `index`."""
    for exchange in exchanges[index + 1 :]:
        yield json.dumps(exchange.request)
