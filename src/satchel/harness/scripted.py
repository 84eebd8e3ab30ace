"""A scripted, loopback, OpenAI-compatible Chat Completions server for tests and demos.

It stands in for a real model: `POST /v1/chat/completions` answers from a script, `GET
/v1/models` lists one model, anything else is a 404 in OpenAI's error shape. A script maps a key
to a queue of replies; each request is served the next reply of the first queue whose key occurs
in the text of the request's messages (in the script's order), else of the `"*"` queue. An
exhausted queue answers HTTP 410, so a run ends instead of looping.

The answers use the wire shapes the official `openai` SDK parses: a `chat.completion` object, or
server-sent `chat.completion.chunk` events (role chunk, reasoning deltas, content deltas, a finish
chunk, a `choices: []` usage chunk when `stream_options.include_usage`, then `[DONE]`). Request
bodies are recorded for tests (`ScriptedModelServer.requests`); nothing is logged, since an
`Authorization` header may hold a key. Scripts and their files are `satchel.harness.script`.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from satchel.harness.loopback import Served, stop_signals
from satchel.harness.script import FALLBACK, Reply, Script, ScriptLike, parse_script

# The field the Chat Completions adapters read first (`providers.chat.wire.REASONING_FIELDS`),
# spelled out so the server loads no provider SDK.
REASONING_FIELD = "reasoning_content"
DEFAULT_MODEL = "scripted-model"
_CREATED = 1_780_000_000
_PIECES = 3  # content and reasoning are streamed in about this many deltas
_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
_RETRY_AFTER_ZERO = frozenset({429, 503})


# ---------------------------------------------------------------------------------------------
# Wire shapes


def _error_body(message: str, error_type: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _request_text(body: Mapping[str, Any]) -> str:
    """The text of the request's messages: string contents and text parts, one per line."""
    parts: list[str] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                part["text"]
                for part in content
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
    return "\n".join(parts)


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _usage(reply: Reply, body: Mapping[str, Any]) -> dict[str, Any]:
    reasoning = reply.reasoning or ""
    if reply.usage is not None:
        prompt, completion = reply.usage.prompt_tokens, reply.usage.completion_tokens
    else:
        messages = body.get("messages")
        count = len(messages) if isinstance(messages, list) else 0
        prompt = _tokens(len(_request_text(body))) + 3 * count
        completion = max(1, _tokens(len(reply.text) + len(reasoning) + len(reply.refusal or "")))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": min(completion, _tokens(len(reasoning)))},
    }


def _completion(reply: Reply, body: Mapping[str, Any], rid: str, model: str) -> dict[str, Any]:
    content = None if reply.refusal is not None and not reply.text else reply.text
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": reply.refusal}
    if reply.reasoning is not None:
        message[REASONING_FIELD] = reply.reasoning
    return {
        "id": rid,
        "object": "chat.completion",
        "created": _CREATED,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": _usage(reply, body),
    }


def _pieces(text: str) -> list[str]:
    if not text:
        return []
    size = max(1, math.ceil(len(text) / _PIECES))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(reply: Reply, body: Mapping[str, Any], rid: str, model: str) -> Iterator[bytes]:
    """The stream's events, in order; a cut stream ends after the first content chunk."""
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and options.get("include_usage") is True

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        event: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if include_usage:
            event["usage"] = None
        return _event(event)

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(reply.reasoning or ""):
        yield chunk({REASONING_FIELD: piece})
    if reply.refusal:
        yield chunk({"refusal": reply.refusal})
    for piece in _pieces(reply.text) or [""]:
        yield chunk({"content": piece})
        if reply.cut_stream:
            return
    yield chunk({}, reply.finish_reason)
    if include_usage:
        yield _event(
            {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": _CREATED,
                "model": model,
                "choices": [],
                "usage": _usage(reply, body),
            }
        )
    yield b"data: [DONE]\n\n"


def _event(data: Mapping[str, Any]) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# ---------------------------------------------------------------------------------------------
# The server


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.0: every response closes its connection, so a stream ends where the server stops."""

    server: _HTTPServer
    server_version = "satchel-scripted"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: no request line, header or body is ever written anywhere."""

    def do_GET(self) -> None:
        if self._path() == "/v1/models":
            model = self.server.owner.model
            entry = {"id": model, "object": "model", "created": _CREATED, "owned_by": "satchel"}
            self._json(200, {"object": "list", "data": [entry]})
        else:
            self._not_found()

    def do_POST(self) -> None:
        if self._path() != "/v1/chat/completions":
            self._discard_body()
            self._not_found()
            return
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._error(400, "the body must be a JSON object with a messages list", None)
            return
        owner = self.server.owner
        reply, key = owner._take(body)
        if reply is None:
            message = (
                f"the script is exhausted: no reply left for key {key!r}"
                if key is not None
                else "the script is exhausted: no key matches the request and there is no '*'"
            )
            self._error(410, message, "script_exhausted", "invalid_request_error")
            return
        if reply.delay_s:
            time.sleep(reply.delay_s)
        rid = owner._next_id()
        requested = body.get("model")
        model = requested if isinstance(requested, str) and requested else owner.model
        if reply.status is not None:
            default_type = _DEFAULT_ERROR_TYPES.get(reply.status, "server_error")
            message = reply.error_message or f"scripted error (HTTP {reply.status})"
            headers = {"x-request-id": f"req_{rid}"}
            if reply.status in _RETRY_AFTER_ZERO:
                headers["Retry-After"] = "0"
            self._error(
                reply.status, message, reply.error_code, reply.error_type or default_type, headers
            )
        elif body.get("stream") is True:
            self._stream(_sse(reply, body, rid, model), rid)
        else:
            self._json(200, _completion(reply, body, rid, model), {"x-request-id": f"req_{rid}"})

    def do_PUT(self) -> None:
        self._discard_body()
        self._not_found()

    do_DELETE = do_PUT
    do_PATCH = do_PUT

    def do_HEAD(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def _discard_body(self) -> None:
        self._read_body()

    def _not_found(self) -> None:
        self._error(404, f"no such route: {self.command} {self._path()}", "not_found")

    def _error(
        self,
        status: int,
        message: str,
        code: str | None,
        error_type: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._json(status, _error_body(message, error_type, code), headers)

    def _json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        payload = json.dumps(data, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, events: Iterator[bytes], rid: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("x-request-id", f"req_{rid}")
        self.end_headers()
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()
        self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stopping never waits for an answer in flight (a `delay_s`)
    owner: ScriptedModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer is not an error worth a traceback."""
        if isinstance(sys.exception(), ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedModelServer:
    """Serves a script over loopback HTTP; a context manager, or `start()` / `stop()`.

    `requests` holds every chat completion body received (parsed JSON), in arrival order.
    """

    def __init__(
        self,
        script: Script | ScriptLike,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model: str = DEFAULT_MODEL,
    ) -> None:
        self.script: Script = parse_script(script)
        self.host = host
        self.port = port
        self.model = model
        self._queues = {key: deque(replies) for key, replies in self.script.items()}
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._served: Served | None = None
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """`http://<host>:<port>/v1`, once started."""
        if self._served is None:
            raise RuntimeError("the scripted server is not running")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of the chat completion request bodies received so far, in order."""
        with self._lock:
            return list(self._requests)

    def remaining(self) -> dict[str, int]:
        """How many replies each queue has left."""
        with self._lock:
            return {key: len(queue) for key, queue in self._queues.items()}

    def start(self) -> ScriptedModelServer:
        if self._served is not None:
            raise RuntimeError("the scripted server is already running")
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.owner = self
        self._served = Served(httpd, "scripted-model-server")
        self.port = self._served.port
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()
            self._served = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _take(self, body: dict[str, Any]) -> tuple[Reply | None, str | None]:
        """Record `body`; the next reply of its queue (None when exhausted) and the queue key."""
        text = _request_text(body)
        with self._lock:
            self._requests.append(body)
            key = next((k for k in self._queues if k != FALLBACK and k in text), None)
            if key is None and FALLBACK in self._queues:
                key = FALLBACK
            queue = self._queues.get(key) if key is not None else None
            return (queue.popleft() if queue else None), key

    def _next_id(self) -> str:
        with self._lock:
            return f"chatcmpl-scripted-{next(self._ids)}"


def serve_forever(
    script: Script | ScriptLike,
    host: str = "127.0.0.1",
    port: int = 0,
    announce: Callable[[str], object] = print,
) -> str:
    """Serve `script` until SIGINT or SIGTERM, announcing the base URL once listening (from the
    main thread: the signals are its own while it serves); the name of the signal that stopped
    it."""
    with stop_signals() as stopped, ScriptedModelServer(script, host, port) as server:
        announce(server.base_url)
        return stopped()
