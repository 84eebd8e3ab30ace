"""A scripted Anthropic Messages server (`POST /v1/messages`) on `httpx2.MockTransport`.

The official `anthropic` SDK sends through `httpx2` and refuses `httpx` objects, so the server
speaks `httpx2`. An action request answers a `message` object, or server-sent events
(`message_start`, `ping`, each block's `content_block_start` / deltas / `content_block_stop`,
then `message_delta` and `message_stop`; or an `error` event). A request whose body has a
`compaction` field is a compaction request and answers a `Summary`. Every request is recorded.
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from chatwire import Failure

_ids = itertools.count(1)


@dataclass
class Answer:
    """One answer of an action request (POST /v1/messages without a `compaction` field)."""

    text: str = "ok"  # a text block, unless ""
    thinking: str | None = "thinking"  # a thinking block first, unless None
    signature: str | None = ""  # "" picks a unique "sig-<n>"; None leaves the key out
    empty_thinking: bool = False  # a second thinking block with no text and its own signature
    redacted: str | None = None  # a redacted_thinking block with this data
    compaction: str | None = None  # an inline compaction block with this content, first
    block_extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, first thinking
    stop_reason: str | None = "end_turn"
    stop_sequence: str | None = None
    refusal: str | None = None  # stop_details names this refusal category
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read: int = 0
    cache_write: int = 0
    thinking_tokens: int | None = None  # usage.output_tokens_details, when given
    iterations: list[dict[str, Any]] | None = None  # usage.iterations as given, when given
    usage: bool = True  # False: no usage in JSON; a stream reports STREAM_NO_USAGE
    model: str = "claude-test"
    interrupt_after: int | None = None  # streamed events before the connection drops
    error_event: str | None = None  # the stream ends in an `error` event with this type
    drop_final: bool = False  # the stream ends cleanly without message_delta / message_stop


@dataclass
class Summary:
    """One answer of a compaction request (a POST /v1/messages whose body has `compaction`)."""

    content: str | None = "summary"  # each compaction block's content, sent as given
    signature: str | None = ""  # "" picks a unique "csig-<n>"; None leaves the key out
    encrypted_content: str | None = None
    thinking: bool = False  # a thinking block before the compaction blocks
    blocks: int = 1  # how many compaction blocks
    stop_reason: str | None = "compaction"
    refusal: str | None = None
    input_tokens: int = 40
    output_tokens: int = 8
    interrupt_after: int | None = None
    error_event: str | None = None
    usage: bool = True  # as for Answer


Reply = Answer | Summary | Failure

# What a stream carries for `usage=False`: the SDK's stream helper needs usage objects in
# `message_start` and `message_delta`, so a usage-less stream reports zeros instead.
STREAM_NO_USAGE: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0}


class MessagesServer:
    """Serves scripted replies in order; `requests` holds every body, `headers` every request's
    headers (lower-case names)."""

    def __init__(self, *replies: Reply) -> None:
        self.script: deque[Reply] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.served: list[list[dict[str, Any]]] = []  # each answer's content blocks, as sent
        self.outputs: list[list[dict[str, Any]] | None] = []  # per request; None: a Failure
        self.usages: list[dict[str, Any] | None] = []  # per request, as finally reported

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))

    def actions(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if "compaction" not in body]

    def compactions(self) -> list[dict[str, Any]]:
        return [body for body in self.requests if "compaction" in body]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages", f"unexpected path {request.url.path}"
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(dict(request.headers.items()))
        if not self.script:
            raise AssertionError("the scripted server has no reply left")
        reply = self.script.popleft()
        if isinstance(reply, Failure):
            self.outputs.append(None)
            self.usages.append(None)
            error = {"type": reply.type, "message": reply.message}
            return httpx2.Response(
                reply.status,
                json={"type": "error", "error": error},
                headers={"request-id": reply.request_id},
            )
        if "compaction" in body:
            assert isinstance(reply, Summary), "a compaction request got an action reply"
            message = _message("claude-test", _summary_blocks(reply), reply.stop_reason, None)
            drop_final = False
        else:
            assert isinstance(reply, Answer), "an action request got a compaction reply"
            blocks = _answer_blocks(reply)
            message = _message(reply.model, blocks, reply.stop_reason, reply.stop_sequence)
            drop_final = reply.drop_final
        message["stop_details"] = _stop_details(reply.refusal)
        usage = _usage(reply) if reply.usage else None
        if usage is not None:
            message["usage"] = usage
        stream = bool(body.get("stream"))
        broken = stream and (
            reply.interrupt_after is not None or reply.error_event is not None or drop_final
        )
        self.served.append(message["content"])
        self.outputs.append(message["content"])
        if stream and usage is None:
            usage = dict(STREAM_NO_USAGE)
        self.usages.append(None if broken else usage)
        headers = {"request-id": f"req_{next(_ids)}"}
        if not stream:
            return httpx2.Response(200, json=message, headers=headers)
        events = _events(
            message,
            interrupt_after=reply.interrupt_after,
            error_event=reply.error_event,
            drop_final=drop_final,
        )
        return httpx2.Response(
            200,
            stream=_Stream(events),
            headers={**headers, "content-type": "text/event-stream"},
        )


def _thinking(text: str, signature: str | None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "thinking", "thinking": text}
    if signature is not None:
        block["signature"] = signature or f"sig-{next(_ids)}"
    return block


def _compaction(
    content: str | None, signature: str | None, encrypted: str | None
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "compaction", "content": content}
    if signature is not None:
        block["signature"] = signature or f"csig-{next(_ids)}"
    block["encrypted_content"] = encrypted
    return block


def _answer_blocks(reply: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.compaction is not None:
        blocks.append(_compaction(reply.compaction, "", None))
    if reply.thinking is not None:
        blocks.append({**_thinking(reply.thinking, reply.signature), **reply.block_extra})
    if reply.empty_thinking:
        blocks.append(_thinking("", ""))
    if reply.redacted is not None:
        blocks.append({"type": "redacted_thinking", "data": reply.redacted})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    return blocks


def _summary_blocks(reply: Summary) -> list[dict[str, Any]]:
    blocks = [_thinking("thinking", "")] if reply.thinking else []
    blocks += [
        _compaction(reply.content, reply.signature, reply.encrypted_content)
        for _ in range(reply.blocks)
    ]
    return blocks


def _stop_details(refusal: str | None) -> dict[str, Any] | None:
    if refusal is None:
        return None
    return {"type": "refusal", "category": refusal, "explanation": "the model declined"}


def _usage(reply: Answer | Summary) -> dict[str, Any]:
    if isinstance(reply, Summary):
        counts = {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        # the compaction's own tokens, reported twice: top-level and as its iteration
        return {**counts, "iterations": [{"type": "compaction", **counts}]}
    usage: dict[str, Any] = {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cache_read,
        "cache_creation_input_tokens": reply.cache_write,
    }
    if reply.thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": reply.thinking_tokens}
    if reply.iterations is not None:
        usage["iterations"] = reply.iterations
    return usage


def _message(
    model: str, content: list[dict[str, Any]], stop_reason: str | None, stop_sequence: str | None
) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
    }


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = []
    if block["type"] == "thinking":
        start = {**block, "thinking": ""}
        if "signature" in block:
            start["signature"] = ""
        deltas += [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        if "signature" in block:
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif block["type"] == "text":
        start = {**block, "text": ""}
        deltas += [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
    else:  # redacted_thinking and compaction arrive whole
        start = block
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def _events(
    message: dict[str, Any],
    *,
    interrupt_after: int | None,
    error_event: str | None,
    drop_final: bool,
) -> Iterator[bytes]:
    usage: dict[str, Any] = message.get("usage", STREAM_NO_USAGE)
    opening = {
        "input_tokens": usage["input_tokens"],
        "output_tokens": min(usage["output_tokens"], 1),
    }
    opening |= {key: value for key, value in usage.items() if key.startswith("cache")}
    started = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "stop_details": None,
        "usage": opening,
    }
    events: list[dict[str, Any]] = [{"type": "message_start", "message": started}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
    if error_event is not None:
        events.append({"type": "error", "error": {"type": error_event, "message": "stopped"}})
    elif not drop_final:
        final: dict[str, Any] = {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": message["stop_sequence"],
                "stop_details": message["stop_details"],
            },
        }
        # cumulative counts, output first, as Anthropic sends them
        final["usage"] = {"output_tokens": usage["output_tokens"]} | usage
        events += [final, {"type": "message_stop"}]
    for index, event in enumerate(events):
        if interrupt_after is not None and index >= interrupt_after:
            raise httpx2.RemoteProtocolError("peer closed connection without sending complete body")
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class _Stream(httpx2.SyncByteStream):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
