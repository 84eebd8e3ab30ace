"""A loopback OpenAI-compatible model server for tests: scripted chat replies, failure on demand.

    with ModelServer() as model:
        model.reply({"claims": [...]})        # queued replies, answered in order
        model.fail(3, status=500)             # the next 3 chat calls answer HTTP 500
        model.respond = lambda body: "text"   # or decide from the request (after the queue)

A reply is a string (the message content), a dict or list (sent as its JSON), a `Failure`, or a
`Slow` reply (sent after a wait). Content of more words than the request's `max_tokens` is cut
there with `finish_reason` "length", as a server does when the output limit is reached.
With nothing queued and no `respond`, chat answers `{"claims": []}`. Every chat request body is
kept in `requests`. `/v1/embeddings` answers deterministic unit vectors of `dimensions` floats.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from memory_kit import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class Failure:
    """An HTTP error answer."""

    status: int = 500


@dataclass(frozen=True)
class Slow:
    """A reply sent `seconds` after the request came."""

    seconds: float
    reply: str | dict[str, Any] | list[Any] = "{}"


Reply = str | dict[str, Any] | list[Any] | Failure | Slow


def text_of(body: dict[str, Any]) -> str:
    """All message contents of a chat request, joined (to decide a reply from)."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def vector(text: str, dimensions: int) -> list[float]:
    values = []
    for index in range(dimensions):
        digest = hashlib.sha256(f"{index}:{text}".encode()).digest()
        values.append(int.from_bytes(digest[:4], "big") / 2**32 - 0.5)
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class ModelServer:
    """The server, on 127.0.0.1 in a background thread."""

    def __init__(self, dimensions: int = 384) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.dimensions = dimensions
        self.queue: deque[Reply] = deque()
        self.respond: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def reply(self, *replies: Reply) -> None:
        with self.lock:
            self.queue.extend(replies)

    def fail(self, times: int = 1, status: int = 500) -> None:
        self.reply(*[Failure(status)] * times)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.requests.append(body)
            if self.queue:
                return self.queue.popleft()
        if self.respond is not None:
            return self.respond(body)
        return {"claims": []}

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        reply = self._next(body)
        if isinstance(reply, Slow):
            await asyncio.sleep(reply.seconds)
            reply = reply.reply
        if isinstance(reply, Failure):
            return JSONResponse({"error": {"message": "scripted failure"}}, reply.status)
        content = reply if isinstance(reply, str) else json.dumps(reply)
        finish = "stop"
        limit = body.get("max_tokens")
        if isinstance(limit, int) and len(content.split()) > limit:
            content, finish = " ".join(content.split()[:limit]), "length"
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": finish,
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    async def _embeddings(self, request: Request) -> Response:
        body = await request.json()
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        return JSONResponse(
            {
                "object": "list",
                "model": body.get("model", ""),
                "data": [
                    {"object": "embedding", "index": i, "embedding": vector(t, self.dimensions)}
                    for i, t in enumerate(texts)
                ],
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            }
        )

    def __enter__(self) -> ModelServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the model server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
