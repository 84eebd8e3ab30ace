"""An Anthropic Messages server of precomputed bytes for `benchmarks/turns.py`.

The `anthropic` SDK sends through `httpx2`, so the server answers on `httpx2.MockTransport`. Turn
k of every conversation gets the same bytes: the documented `message` object, or the server-sent
events that stream it (`message_start`, `ping`, each block's `content_block_start`, deltas and
`content_block_stop`, then `message_delta` with the stop reason and the cumulative usage, and
`message_stop`), one chunk per event.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

SIGNATURE_BYTES = 384  # each turn's thinking signature, before base64
MESSAGES_USAGE = {
    "input_tokens": 12_000,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 120,
    "output_tokens_details": {"thinking_tokens": 100},
}


def message_object(model: str, turn: int, *, thinking: str, answer: str) -> dict[str, Any]:
    """Turn `turn`'s `message`: a thinking block with a signature of its own, then the answer."""
    rng = random.Random(f"message {turn}")
    signature = base64.b64encode(rng.randbytes(SIGNATURE_BYTES)).decode()
    return {
        "id": f"msg_{rng.randbytes(12).hex()}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {"type": "thinking", "thinking": thinking, "signature": signature},
            {"type": "text", "text": answer},
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "stop_details": None,
        "usage": MESSAGES_USAGE,
    }


def message_events(message: dict[str, Any], pieces: Callable[[str], list[str]]) -> list[bytes]:
    """`message` as the server-sent events that stream it, one chunk per event: thinking and
    text in `pieces`, the signature in one `signature_delta`."""
    usage = message["usage"]
    opening = {**usage, "output_tokens": 1}
    opening.pop("output_tokens_details")
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
        deltas: list[dict[str, Any]]
        if block["type"] == "thinking":
            start = {**block, "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            start = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta = {
        "stop_reason": message["stop_reason"],
        "stop_sequence": message["stop_sequence"],
        "stop_details": message["stop_details"],
    }
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


class _Replay(httpx2.SyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


class MessagesServer:
    """Answers turn k of every conversation with the same precomputed Messages bytes.

    Each loop talks to its own `MessagesLane` (a client and the turn its conversation is at);
    `rewind` sets every lane back to turn 0. While `digests` is a list, each request body's
    digest is appended to it (the warm-up round compares the loops with it).
    """

    def __init__(
        self,
        *,
        model: str,
        turns: int,
        stream: bool,
        thinking: str,
        answer: str,
        pieces: Callable[[str], list[str]],
    ) -> None:
        self.stream = stream
        self.digests: list[bytes] | None = None
        self.lanes: list[MessagesLane] = []
        self.json_headers = [("content-type", "application/json"), ("request-id", "req_bench")]
        self.sse_headers = [("content-type", "text/event-stream"), ("request-id", "req_bench")]
        messages = [
            message_object(model, turn, thinking=thinking, answer=answer) for turn in range(turns)
        ]
        self.bodies = [] if stream else [json.dumps(message).encode() for message in messages]
        self.streams = [message_events(m, pieces) for m in messages] if stream else []

    def lane(self) -> MessagesLane:
        lane = MessagesLane(self)
        self.lanes.append(lane)
        return lane

    def rewind(self) -> None:
        for lane in self.lanes:
            lane.turn = 0

    def answer(self, request: httpx2.Request, turn: int) -> httpx2.Response:
        if self.digests is not None:
            self.digests.append(hashlib.blake2b(request.content, digest_size=16).digest())
        if self.stream:
            stream = _Replay(self.streams[turn])
            return httpx2.Response(200, headers=self.sse_headers, stream=stream)
        return httpx2.Response(200, headers=self.json_headers, content=self.bodies[turn])


@dataclass(slots=True)
class MessagesLane:
    """One loop's way to a `MessagesServer`: its own client, and its conversation's turn."""

    server: MessagesServer
    turn: int = 0
    http: httpx2.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx2.Client(transport=httpx2.MockTransport(self.handle))

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        turn, self.turn = self.turn, self.turn + 1
        return self.server.answer(request, turn)
