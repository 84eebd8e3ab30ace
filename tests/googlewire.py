"""A scripted Gemini Interactions server (`POST /{version}/interactions`) on `httpx.MockTransport`.

An answer is an `Interaction` object, or server-sent events: `interaction.created`,
`interaction.status_update`, each step's `step.start` / `step.delta` (thought summary text and the
thought signature, output text in chunks) / `step.stop`, then `interaction.completed` with the
status and usage (and the steps, when asked); or an `error` event; or a connection that drops.
An HTTP error answers the Google error shape `{"error": {code, message, status}}`. Every request
body is recorded, and every answer's steps as the JSON form carries them.
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
Step = dict[str, Any]


@dataclass
class Answer:
    """One answer to a create request."""

    text: str = "ok"  # a model_output step with this text, unless ""
    thought: str | None = "thinking"  # a thought step first with this summary, unless None
    signature: str | None = ""  # "" picks a unique "tsig-<n>"; None leaves the key out
    step_extra: dict[str, Any] = field(default_factory=dict)  # unknown fields of the thought
    extra_steps: list[Step] = field(default_factory=list)  # further steps, sent as given
    status: str = "completed"
    error_code: str | None = None  # `errors[0].code` of the interaction
    input_tokens: int = 10
    output_tokens: int = 5
    thought_tokens: int = 3
    cached_tokens: int = 0
    usage: bool = True
    model: str = "gemini-test"
    steps_in_completed: bool = False  # the stream's `interaction.completed` carries the steps
    interrupt_after: int | None = None  # streamed events before the connection drops
    error_event: str | None = None  # the stream ends in an `error` event with this code
    drop_final: bool = False  # the stream ends cleanly without `interaction.completed`


@dataclass
class Failure:
    """An HTTP error answer in the Google error shape."""

    status: int
    message: str = "the provider's own words"
    reason: str = "INVALID_ARGUMENT"  # the error's `status`


Reply = Answer | Failure


class InteractionsServer:
    """Serves scripted replies in order; `requests` holds every body, `headers` every request's
    headers, `served` each answer's steps (None for a Failure)."""

    def __init__(self, *replies: Reply) -> None:
        self.script: deque[Reply] = deque(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.served: list[list[Step] | None] = []

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/interactions"), f"unexpected {request.url.path}"
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(dict(request.headers.items()))
        self.paths.append(request.url.path)
        if not self.script:
            raise AssertionError("the scripted server has no reply left")
        reply = self.script.popleft()
        if isinstance(reply, Failure):
            self.served.append(None)
            error = {"code": reply.status, "message": reply.message, "status": reply.reason}
            return httpx.Response(
                reply.status, json={"error": error}, headers={"x-request-id": "req_failed"}
            )
        steps = _steps(reply)
        self.served.append(steps)
        interaction = _interaction(reply, steps)
        headers = {"x-request-id": f"req_{next(_ids)}"}
        if not body.get("stream"):
            return httpx.Response(200, json=interaction, headers=headers)
        events = _events(reply, interaction, steps)
        return httpx.Response(
            200,
            stream=_EventStream(events, reply.interrupt_after),
            headers={**headers, "content-type": "text/event-stream"},
        )


def _steps(reply: Answer) -> list[Step]:
    steps: list[Step] = []
    if reply.thought is not None:
        thought: Step = {"type": "thought", **reply.step_extra}
        if reply.thought:
            thought["summary"] = [{"type": "text", "text": reply.thought}]
        if reply.signature is not None:
            thought["signature"] = reply.signature or f"tsig-{next(_ids)}"
        steps.append(thought)
    if reply.text:
        steps.append({"type": "model_output", "content": [{"type": "text", "text": reply.text}]})
    steps.extend(json.loads(json.dumps(reply.extra_steps)))
    return steps


def _interaction(reply: Answer, steps: list[Step]) -> dict[str, Any]:
    interaction: dict[str, Any] = {
        "id": f"int_{next(_ids)}",
        "object": "interaction",
        "model": reply.model,
        "status": reply.status,
        "created": "2026-12-01T00:00:00Z",
        "steps": steps,
    }
    if reply.error_code is not None:
        interaction["errors"] = [{"code": reply.error_code, "message": "it failed"}]
    if reply.usage:
        interaction["usage"] = {
            "total_input_tokens": reply.input_tokens,
            "total_cached_tokens": reply.cached_tokens,
            "total_output_tokens": reply.output_tokens,
            "total_thought_tokens": reply.thought_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens + reply.thought_tokens,
        }
    return interaction


def _events(reply: Answer, interaction: dict[str, Any], steps: list[Step]) -> list[dict[str, Any]]:
    head = {k: interaction[k] for k in ("id", "object", "model", "created")}
    events: list[dict[str, Any]] = [
        {"event_type": "interaction.created", "interaction": {**head, "status": "in_progress"}},
        {
            "event_type": "interaction.status_update",
            "interaction_id": interaction["id"],
            "status": "in_progress",
        },
    ]
    for index, step in enumerate(steps):
        events.extend(_step_events(index, step))
    if reply.error_event is not None:
        error = {"code": reply.error_event, "message": "the stream stopped"}
        events.append({"event_type": "error", "error": error})
    elif not reply.drop_final:
        final = {k: v for k, v in interaction.items() if k != "steps"}
        if reply.steps_in_completed:
            final["steps"] = steps
        events.append({"event_type": "interaction.completed", "interaction": final})
    return events


def _step_events(index: int, step: Step) -> Iterator[dict[str, Any]]:
    kind = step["type"]
    if kind == "thought":
        start = {k: v for k, v in step.items() if k not in ("summary", "signature")}
        yield {"event_type": "step.start", "index": index, "step": start}
        for part in step.get("summary", ()):
            for chunk in _chunks(part["text"]):
                content = {"type": "text", "text": chunk}
                delta = {"type": "thought_summary", "content": content}
                yield {"event_type": "step.delta", "index": index, "delta": delta}
        if "signature" in step:
            delta = {"type": "thought_signature", "signature": step["signature"]}
            yield {"event_type": "step.delta", "index": index, "delta": delta}
    elif kind == "model_output":
        yield {"event_type": "step.start", "index": index, "step": {"type": "model_output"}}
        for part in step["content"]:
            for chunk in _chunks(part["text"]):
                delta = {"type": "text", "text": chunk}
                yield {"event_type": "step.delta", "index": index, "delta": delta}
    else:
        yield {"event_type": "step.start", "index": index, "step": step}
    yield {"event_type": "step.stop", "index": index}


def _chunks(text: str) -> list[str]:
    middle = max(1, len(text) // 2)
    return [text[:middle], text[middle:]] if len(text) > 1 else [text]


class _EventStream(httpx.SyncByteStream):
    """The events as SSE frames; the connection drops after `interrupt_after` of them."""

    def __init__(self, events: list[dict[str, Any]], interrupt_after: int | None) -> None:
        self.events = events
        self.interrupt_after = interrupt_after

    def __iter__(self) -> Iterator[bytes]:
        for number, event in enumerate(self.events):
            if self.interrupt_after is not None and number >= self.interrupt_after:
                raise httpx.ReadError("the connection dropped")
            frame = f"event: {event['event_type']}\ndata: {json.dumps(event)}\n\n"
            yield frame.encode()
