"""A scripted OpenAI-compatible Chat Completions server on `httpx.MockTransport`.

It answers with the documented wire shapes (a `chat.completion` object, or server-sent
`chat.completion.chunk` events ending in a usage chunk and `[DONE]`) and records every request.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

_ids = itertools.count(1)


@dataclass
class Answer:
    """One model answer, served as JSON or as a stream depending on the request."""

    text: str = "ok"
    reasoning: str | None = None
    reasoning_fields: tuple[str, ...] = ("reasoning_content",)
    finish_reason: str | None = "stop"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    usage: bool = True
    tool_call: bool = False
    refusal: str | None = None
    message_extra: dict[str, Any] = field(default_factory=dict)
    model: str = "test-model"
    interrupt_after: int | None = None  # streamed chunks before the connection drops

    def usage_body(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }


@dataclass
class Failure:
    """An HTTP error answer in the OpenAI error shape."""

    status: int
    message: str = "error"
    type: str | None = "invalid_request_error"
    code: str | None = None
    request_id: str = "req_failure"


Reply = Answer | Failure


class ChatServer:
    """Serves scripted replies in order; `requests` holds every request body received."""

    def __init__(self, *replies: Reply) -> None:
        self.script: deque[Reply] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(request.headers)
        if not self.script:
            raise AssertionError("the scripted server has no reply left")
        reply = self.script.popleft()
        if isinstance(reply, Failure):
            error = {"message": reply.message, "type": reply.type, "code": reply.code}
            return httpx.Response(
                reply.status, json={"error": error}, headers={"x-request-id": reply.request_id}
            )
        rid = f"chatcmpl-{next(_ids)}"
        headers = {"x-request-id": f"req_{rid}"}
        if body.get("stream"):
            include_usage = (body.get("stream_options") or {}).get("include_usage", False)
            stream = _sse(reply, rid, include_usage)
            return httpx.Response(
                200,
                stream=_Stream(stream),
                headers={**headers, "content-type": "text/event-stream"},
            )
        return httpx.Response(200, json=_completion(reply, rid), headers=headers)


def _message(reply: Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": reply.refusal}
    if reply.reasoning is not None:
        for name in reply.reasoning_fields:
            message[name] = reply.reasoning
    if reply.tool_call:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "act", "arguments": '{"x": 1}'},
            }
        ]
    message.update(reply.message_extra)
    return message


def _completion(reply: Answer, rid: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion",
        "created": 1_780_000_000,
        "model": reply.model,
        "choices": [{"index": 0, "message": _message(reply), "finish_reason": reply.finish_reason}],
    }
    if reply.usage:
        body["usage"] = reply.usage_body()
    return body


def _chunk(reply: Answer, rid: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": 1_780_000_000,
        "model": reply.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(reply: Answer, rid: str, include_usage: bool) -> Iterator[bytes]:
    chunks: list[dict[str, Any]] = [_chunk(reply, rid, {"role": "assistant", "content": ""}, None)]
    if reply.reasoning is not None:
        for piece in _pieces(reply.reasoning):
            delta = dict.fromkeys(reply.reasoning_fields, piece)
            chunks.append(_chunk(reply, rid, delta, None))
    if reply.refusal:
        chunks.append(_chunk(reply, rid, {"refusal": reply.refusal}, None))
    for piece in _pieces(reply.text):
        chunks.append(_chunk(reply, rid, {"content": piece, **reply.message_extra}, None))
    if reply.tool_call:
        call = {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "act", "arguments": '{"x": 1}'},
        }
        chunks.append(_chunk(reply, rid, {"tool_calls": [call]}, None))
    chunks.append(_chunk(reply, rid, {}, reply.finish_reason))
    if reply.usage and include_usage:
        usage_chunk = _chunk(reply, rid, {}, None)
        usage_chunk["choices"] = []
        usage_chunk["usage"] = reply.usage_body()
        chunks.append(usage_chunk)
    for index, chunk in enumerate(chunks):
        if reply.interrupt_after is not None and index >= reply.interrupt_after:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete body")
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    if reply.interrupt_after is None:
        yield b"data: [DONE]\n\n"


class _Stream(httpx.SyncByteStream):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
