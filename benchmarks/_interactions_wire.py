"""A Gemini Interactions server of precomputed bytes for `benchmarks/turns.py`.

Every turn gets the same answer: the documented `interaction` object (a thought step with its
readable summary and an opaque signature, then the model output), or the server-sent events that
stream it (`interaction.created`, `interaction.status_update`, each step's `step.start`, deltas and
`step.stop`, then `interaction.completed` with the status and usage), one chunk per event.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import httpx

SIGNATURE_BYTES = 384  # the thought signature, before base64
INTERACTIONS_USAGE = {
    "total_input_tokens": 12_000,
    "total_cached_tokens": 11_000,
    "total_output_tokens": 20,
    "total_thought_tokens": 100,
    "total_tokens": 12_120,
}


def interaction_object(model: str, *, thought: str, answer: str) -> dict[str, Any]:
    signature = base64.b64encode(random.Random("thought").randbytes(SIGNATURE_BYTES)).decode()
    return {
        "id": "int_bench",
        "object": "interaction",
        "model": model,
        "status": "completed",
        "created": "2026-12-01T00:00:00Z",
        "steps": [
            {
                "type": "thought",
                "summary": [{"type": "text", "text": thought}],
                "signature": signature,
            },
            {"type": "model_output", "content": [{"type": "text", "text": answer}]},
        ],
        "usage": INTERACTIONS_USAGE,
    }


def interaction_events(
    interaction: dict[str, Any], pieces: Callable[[str], list[str]]
) -> list[bytes]:
    head = {k: interaction[k] for k in ("id", "object", "model", "created")}
    thought, output = interaction["steps"]
    events: list[dict[str, Any]] = [
        {"event_type": "interaction.created", "interaction": {**head, "status": "in_progress"}},
        {
            "event_type": "interaction.status_update",
            "interaction_id": head["id"],
            "status": "in_progress",
        },
        {"event_type": "step.start", "index": 0, "step": {"type": "thought"}},
    ]
    for piece in pieces(thought["summary"][0]["text"]):
        delta = {"type": "thought_summary", "content": {"type": "text", "text": piece}}
        events.append({"event_type": "step.delta", "index": 0, "delta": delta})
    signed = {"type": "thought_signature", "signature": thought["signature"]}
    events.append({"event_type": "step.delta", "index": 0, "delta": signed})
    events.append({"event_type": "step.stop", "index": 0})
    events.append({"event_type": "step.start", "index": 1, "step": {"type": "model_output"}})
    for piece in pieces(output["content"][0]["text"]):
        delta = {"type": "text", "text": piece}
        events.append({"event_type": "step.delta", "index": 1, "delta": delta})
    events.append({"event_type": "step.stop", "index": 1})
    final = {k: v for k, v in interaction.items() if k != "steps"}
    events.append({"event_type": "interaction.completed", "interaction": final})
    return [f"event: {e['event_type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


class _Replay(httpx.SyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


class InteractionsServer:
    """Answers every create request with the same precomputed bytes. While `digests` is a list,
    each request body's digest is appended to it, taken over its JSON with sorted keys: the SDK
    writes the `input` steps it is given as parameters in its own key order."""

    def __init__(
        self, *, model: str, stream: bool, thought: str, answer: str, pieces: Callable[..., Any]
    ) -> None:
        self.stream = stream
        self.digests: list[bytes] | None = None
        interaction = interaction_object(model, thought=thought, answer=answer)
        self.body = json.dumps(interaction).encode()
        self.chunks = interaction_events(interaction, pieces)
        self.http = httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.digests is not None:
            canonical = json.dumps(json.loads(request.content), sort_keys=True).encode()
            self.digests.append(hashlib.blake2b(canonical, digest_size=16).digest())
        if self.stream:
            headers = [("content-type", "text/event-stream"), ("x-request-id", "req_b")]
            return httpx.Response(200, headers=headers, stream=_Replay(self.chunks))
        headers = [("content-type", "application/json"), ("x-request-id", "req_b")]
        return httpx.Response(200, headers=headers, content=self.body)
