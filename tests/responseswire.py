"""A scripted Responses server (OpenAI's and xAI's wire shapes) on `httpx.MockTransport`.

`POST /responses` answers a `response` object, or server-sent events (`response.created`, each
item's `response.output_item.added` / text deltas / `response.output_item.done`, then
`response.completed`, `response.incomplete` or `response.failed`; or an `error` event).
`POST /responses/compact` answers a `response.compaction` object. Every request is recorded.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from chatwire import Failure

_ids = itertools.count(1)


@dataclass
class Output:
    """One answer of `POST /responses`: a reasoning item (unless `summary` is None), an assistant
    message, and whatever the fields add."""

    text: str = "ok"
    summary: str | None = "thinking"
    encrypted: str | None = ""  # "" picks a unique blob; None leaves it out
    status: str = "completed"
    incomplete_reason: str | None = None
    error_code: str | None = None
    input_tokens: int = 10
    output_tokens: int = 5
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    usage: bool = True
    refusal: str | None = None
    tool_call: bool = False
    compaction: str | None = None  # an inline compaction item with this blob, first in the output
    reasoning_extra: dict[str, Any] = field(default_factory=dict)  # unknown provider fields
    model: str = "test-model"
    interrupt_after: int | None = None  # streamed events before the connection drops
    error_event: str | None = None  # the stream ends in an `error` event with this code
    drop_final: bool = False  # the stream ends cleanly but without its final event


@dataclass
class Compacted:
    """One answer of `POST /responses/compact`."""

    blobs: tuple[str | None, ...] = ("",)  # one compaction item per blob ("" picks a unique one)
    keep_user_messages: bool = False  # the compacted output also lists the user messages
    input_tokens: int = 40
    output_tokens: int = 8
    usage: bool = True


Reply = Output | Compacted | Failure


def usage_body(input_tokens: int, output_tokens: int, cached: int, reasoning: int) -> Any:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


class ResponsesServer:
    """Serves scripted replies in order; `requests` holds every body, `paths` every path."""

    def __init__(self, *replies: Reply) -> None:
        self.script: deque[Reply] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.served: list[dict[str, Any]] = []  # each answer's output items, as sent
        self.outputs: list[list[dict[str, Any]] | None] = []  # per request; None: no answer
        self.usages: list[dict[str, Any] | None] = []  # per request, as reported

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def actions(self) -> list[dict[str, Any]]:
        return [b for b, p in zip(self.requests, self.paths, strict=True) if p == "/responses"]

    def compactions(self) -> list[dict[str, Any]]:
        return [b for b, p in zip(self.requests, self.paths, strict=True) if p.endswith("compact")]

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        path = request.url.path.removeprefix("/v1")
        self.requests.append(body)
        self.paths.append(path)
        if not self.script:
            raise AssertionError("the scripted server has no reply left")
        reply = self.script.popleft()
        if isinstance(reply, Failure):
            self.outputs.append(None)
            self.usages.append(None)
            error = {"message": reply.message, "type": reply.type, "code": reply.code}
            return httpx.Response(
                reply.status, json={"error": error}, headers={"x-request-id": reply.request_id}
            )
        headers = {"x-request-id": f"req_{next(_ids)}"}
        if path == "/responses/compact":
            assert isinstance(reply, Compacted), "a compact request got an action reply"
            return httpx.Response(200, json=self._compacted(reply, body), headers=headers)
        assert isinstance(reply, Output), "an action request got a compaction reply"
        response = _response(reply)
        self.served.append({"output": response["output"]})
        broken = bool(body.get("stream")) and (
            reply.interrupt_after is not None or reply.drop_final or reply.error_event is not None
        )
        self.outputs.append(response["output"])
        self.usages.append(None if broken else response["usage"])
        if body.get("stream"):
            return httpx.Response(
                200,
                stream=_Stream(_events(reply, response)),
                headers={**headers, "content-type": "text/event-stream"},
            )
        return httpx.Response(200, json=response, headers=headers)

    def _compacted(self, reply: Compacted, body: dict[str, Any]) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        if reply.keep_user_messages:
            output += [
                {
                    "id": f"msg_{next(_ids)}",
                    "type": "message",
                    "role": "user",
                    "status": "completed",
                    "content": [{"type": "input_text", "text": item["content"]}],
                }
                for item in body["input"]
                if item.get("role") == "user" and isinstance(item.get("content"), str)
            ]
        for blob in reply.blobs:
            item: dict[str, Any] = {"id": f"cmp_{next(_ids)}", "type": "compaction"}
            if blob is not None:
                item["encrypted_content"] = blob or f"compacted-{next(_ids)}"
            item["created_by"] = "server"
            output.append(item)
        answer: dict[str, Any] = {
            "id": f"resp_cmp_{next(_ids)}",
            "object": "response.compaction",
            "created_at": 1_780_000_000,
            "output": output,
        }
        if reply.usage:
            answer["usage"] = usage_body(reply.input_tokens, reply.output_tokens, 0, 0)
        self.served.append({"output": output})
        self.outputs.append(output)
        self.usages.append(answer.get("usage"))
        return answer


def _items(reply: Output) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.compaction is not None:
        items.append(
            {
                "id": f"cmp_{next(_ids)}",
                "type": "compaction",
                "encrypted_content": reply.compaction,
                "created_by": "server",
            }
        )
    if reply.summary is not None:
        reasoning: dict[str, Any] = {
            "id": f"rs_{next(_ids)}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": reply.summary}] if reply.summary else [],
        }
        if reply.encrypted is not None:
            reasoning["encrypted_content"] = reply.encrypted or f"encrypted-{next(_ids)}"
        reasoning.update(reply.reasoning_extra)
        reasoning["status"] = "completed"
        items.append(reasoning)
    if reply.tool_call:
        items.append(
            {
                "id": f"fc_{next(_ids)}",
                "type": "function_call",
                "call_id": "call_1",
                "name": "act",
                "arguments": "{}",
                "status": "completed",
            }
        )
    content: list[dict[str, Any]] = []
    if reply.refusal is not None:
        content.append({"type": "refusal", "refusal": reply.refusal})
    if reply.text:
        content.append({"type": "output_text", "text": reply.text, "annotations": []})
    if content:
        items.append(
            {
                "id": f"msg_{next(_ids)}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        )
    return items


def _response(reply: Output) -> dict[str, Any]:
    incomplete = {"reason": reply.incomplete_reason} if reply.status == "incomplete" else None
    error = (
        {"code": reply.error_code or "server_error", "message": "the model failed"}
        if reply.status == "failed"
        else None
    )
    body: dict[str, Any] = {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": 1_780_000_000,
        "status": reply.status,
        "model": reply.model,
        "output": _items(reply),
        "error": error,
        "incomplete_details": incomplete,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": usage_body(
            reply.input_tokens, reply.output_tokens, reply.cached_tokens, reply.reasoning_tokens
        )
        if reply.usage
        else None,
    }
    return body


def _events(reply: Output, response: dict[str, Any]) -> Iterator[bytes]:
    sequence = itertools.count()
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            for part in item["content"]:
                if part["type"] != "output_text":
                    continue
                text = part["text"]
                for start in range(0, len(text), 7):
                    events.append(
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": text[start : start + 7],
                            "logprobs": [],
                        }
                    )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    if reply.drop_final:
        pass
    elif reply.error_event is not None:
        events.append(
            {"type": "error", "code": reply.error_event, "message": "stopped", "param": None}
        )
    else:
        final = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "failed": "response.failed",
        }[reply.status]
        events.append({"type": final, "response": response})
    for index, event in enumerate(events):
        if reply.interrupt_after is not None and index >= reply.interrupt_after:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete body")
        event["sequence_number"] = next(sequence)
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class _Stream(httpx.SyncByteStream):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
