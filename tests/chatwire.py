"""A scripted OpenAI-compatible Chat Completions server on `httpx.MockTransport`.

It answers with the documented wire shapes (a `chat.completion` object, or server-sent
`chat.completion.chunk` events ending in a usage chunk and `[DONE]`) and records every request.
`DeepSeekServer` also serves `Called` answers: DeepSeek thinking-mode replies that answer through
tool calls.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from satchel.providers.chat.deepseek_state import ANSWER_TOOL_NAME

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


@dataclass
class Raw:
    """An HTTP error answer with a server's own body, exactly as given."""

    status: int
    body: Any


Reply = Answer | Failure | Raw


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
        if isinstance(reply, Raw):
            return httpx.Response(reply.status, json=reply.body)
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


# -- DeepSeek thinking mode: answers as tool calls ----------------------------------------------

DEEPSEEK_MODEL = "deepseek-chat"
DEEPSEEK_USAGE: dict[str, Any] = {
    "prompt_tokens": 100,
    "completion_tokens": 20,
    "total_tokens": 120,
    "prompt_tokens_details": {"cached_tokens": 64},
    "prompt_cache_hit_tokens": 64,
    "prompt_cache_miss_tokens": 36,
    "completion_tokens_details": {"reasoning_tokens": 12},
}


@dataclass
class Call:
    """One tool call; `later_id` is the id repeated on the argument deltas of a stream."""

    id: str | None = "call_00_1"
    name: str = ANSWER_TOOL_NAME
    arguments: str = '{"answer": "ACTION1"}'
    later_id: str | None = None


@dataclass
class Called:
    """A thinking-mode answer: reasoning, optional content, then tool calls.

    `message_extra` adds fields to the message (and to the first streamed delta);
    `interrupt_after` drops a streamed connection after that many chunks.
    """

    calls: tuple[Call, ...] = (Call(),)
    reasoning: str | None = "thinking"
    content: str | None = ""
    finish_reason: str | None = "tool_calls"
    usage: dict[str, Any] | None = field(default_factory=lambda: dict(DEEPSEEK_USAGE))
    message_extra: dict[str, Any] = field(default_factory=dict)
    interrupt_after: int | None = None


def answer(text: str, reasoning: str | None = "thinking", call_id: str = "call_00_1") -> Called:
    """A good answer: one call to the answer tool with `text`."""
    return Called((Call(call_id, arguments=json.dumps({"answer": text})),), reasoning)


def deepseek_usage(
    prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    """A DeepSeek usage object whose cache hits are reported both ways."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "prompt_cache_hit_tokens": cached,
        "prompt_cache_miss_tokens": prompt - cached,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


class DeepSeekServer(ChatServer):
    """`ChatServer` that also serves `Called` answers in DeepSeek's wire shapes."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        if not self.script or not isinstance(self.script[0], Called):
            return super().handle(request)
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(request.headers)
        reply = self.script.popleft()
        assert isinstance(reply, Called)
        rid = f"chatcmpl-ds-{len(self.requests)}"
        headers = {"x-request-id": f"req_{rid}"}
        if body.get("stream"):
            include = (body.get("stream_options") or {}).get("include_usage", False)
            headers["content-type"] = "text/event-stream"
            events = _deepseek_events(reply, rid, include)
            if reply.interrupt_after is not None:
                return httpx.Response(200, stream=_Stream(events), headers=headers)
            return httpx.Response(200, content=b"".join(events), headers=headers)
        return httpx.Response(200, json=deepseek_completion(reply, rid), headers=headers)


def deepseek_message(reply: Called) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.calls:
        message["tool_calls"] = [_native(call) for call in reply.calls]
    message.update(reply.message_extra)
    return message


def deepseek_completion(reply: Called, rid: str) -> dict[str, Any]:
    completion: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion",
        "created": 1_780_000_000,
        "model": DEEPSEEK_MODEL,
        "choices": [
            {"index": 0, "message": deepseek_message(reply), "finish_reason": reply.finish_reason}
        ],
    }
    if reply.usage is not None:
        completion["usage"] = reply.usage
    return completion


def _native(call: Call) -> dict[str, Any]:
    native: dict[str, Any] = {"id": call.id} if call.id is not None else {}
    native.update(type="function", function={"name": call.name, "arguments": call.arguments})
    return native


def _ds_pieces(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def deepseek_chunks(reply: Called, rid: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    """The `chat.completion.chunk` objects DeepSeek streams for `reply`."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": 1_780_000_000,
            "model": DEEPSEEK_MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    first: dict[str, Any] = {"role": "assistant", "content": None}
    if reply.reasoning is not None:
        first["reasoning_content"] = ""
    first.update(reply.message_extra)
    yield chunk(first)
    for piece in _ds_pieces(reply.reasoning or ""):
        if reply.reasoning is not None:
            yield chunk({"content": None, "reasoning_content": piece})
    for piece in _ds_pieces(reply.content or ""):
        if piece:
            yield chunk({"content": piece})
    for index, call in enumerate(reply.calls):
        opening: dict[str, Any] = {"index": index, "type": "function"}
        if call.id is not None:
            opening["id"] = call.id
        opening["function"] = {"name": call.name, "arguments": ""}
        yield chunk({"tool_calls": [opening]})
        for piece in _ds_pieces(call.arguments, 4):
            delta: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if call.later_id is not None:
                delta["id"] = call.later_id
            yield chunk({"tool_calls": [delta]})
    last = chunk({"content": "", "reasoning_content": None}, reply.finish_reason)
    if include_usage and reply.usage is not None:
        last["usage"] = reply.usage
    yield last


def _deepseek_events(reply: Called, rid: str, include_usage: bool) -> Iterator[bytes]:
    for index, chunk in enumerate(deepseek_chunks(reply, rid, include_usage)):
        if reply.interrupt_after is not None and index >= reply.interrupt_after:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete body")
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    if reply.interrupt_after is None:
        yield b"data: [DONE]\n\n"
