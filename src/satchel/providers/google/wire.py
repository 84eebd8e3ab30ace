"""One Interactions call through the official `google-genai` SDK, streamed or not, normalized.

The conversation travels as the request's `input`, merged into the JSON as given (`extra_body`),
so every replayed step reaches the wire exactly. Automatic continuation is off: an interaction
that stops at the decode limit comes back as `requires_continuation` for the adapter to refuse.
Steps are kept as the provider returned them (the SDK's view of the JSON, unknown fields kept).
A stream is accumulated here from its events: each step from its `step.start` and deltas (text
appended, thought summaries appended, the signature set), the status and usage from
`interaction.completed`, whose steps, when it carries them, are the authoritative ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from google import genai
from google.genai import _interactions as gi

from satchel.providers.google.state import Step, content_text
from satchel.providers.kit.errors import overflows, provider_words, reply_error, unreachable
from satchel.providers.kit.logs import hide_bodies
from satchel.turns import (
    AttemptError,
    ContextOverflowError,
    Diagnostics,
    FatalAttemptError,
    InterruptedStreamError,
    InvalidResponseError,
    TransientError,
    Usage,
)

TRANSIENT_STATUSES = frozenset(
    {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"}
)
# Gemini words an overflow as "The input token count (N) exceeds the maximum number of tokens
# allowed (M)".
_TOKEN_COUNT = re.compile(r"input token count.*exceeds the maximum", re.IGNORECASE)


# The SDK's debug lines that print each request and response with headers and body
# (`GOOGLE_GENAI_DEBUG`) carry thought signatures and the API key.
hide_bodies("google.genai", "Request:", "Response:")


@dataclass(slots=True)
class InteractionReply:
    """The normalized content of one Interactions answer."""

    model: str = ""
    interaction_id: str | None = None
    request_id: str | None = None
    status: str | None = None
    error_code: str | None = None
    steps: list[Step] = field(default_factory=list)
    usage: Usage | None = None
    unreadable: int = 0  # stream deltas the adapter could not fold into their step

    @property
    def text(self) -> str:
        """The visible answer: the text parts of every model output step, in order."""
        return "".join(
            content_text(step.get("content"))
            for step in self.steps
            if step.get("type") == "model_output"
        )

    @property
    def reasoning(self) -> str | None:
        """The readable thought summaries, joined; None when the model showed none."""
        parts = [
            content_text(step.get("summary"))
            for step in self.steps
            if step.get("type") == "thought"
        ]
        shown = [part for part in parts if part]
        return "\n\n".join(shown) if shown else None


def call_interactions(client: genai.Client, body: dict[str, Any]) -> InteractionReply:
    """Send `body` (streamed when `body["stream"]`) and return the accumulated answer, whatever
    its status; the adapter decides what a status means. SDK errors become attempt errors,
    raised outside the SDK exception's handler, so the SDK's exception (its raw body) never
    travels along."""
    error: AttemptError
    settings = {k: v for k, v in body.items() if k != "input"}
    extra = {**(settings.pop("extra_body", None) or {}), "input": body.get("input", [])}
    try:
        if body.get("stream"):
            stream = client.interactions.create(
                **settings, extra_body=extra, automatic_continuation=False
            )
            reply = InteractionReply(request_id=_request_id(stream))
            _accumulate(reply, stream)
            return reply
        interaction = client.interactions.create(
            **settings, extra_body=extra, automatic_continuation=False
        )
    except gi.APIStatusError as exc:
        error = classify_status_error(exc)
    except gi.APIConnectionError as exc:
        error = unreachable(exc)
    else:
        reply = InteractionReply()
        _take_interaction(reply, interaction.to_dict(mode="json", warnings=False))
        return reply
    raise error


def classify_status_error(exc: gi.APIStatusError) -> AttemptError:
    """Map an HTTP error answer to the taxonomy; the message keeps the provider's words
    (`provider_words`), the diagnostics only allowlisted values."""
    status = int(exc.status_code or 0)
    kind, message = _error_body(exc.body)
    diagnostics = Diagnostics.build(
        type(exc).__name__, kind.lower() if kind else None, status, _header(exc.response)
    )
    said = provider_words(status, kind, message)
    if status in (400, 413) and (overflows(message) or _TOKEN_COUNT.search(message)):
        return ContextOverflowError(
            f"the request exceeds the model's context ({said})", diagnostics=diagnostics
        )
    if kind in TRANSIENT_STATUSES or status in (408, 409, 429) or status >= 500:
        return TransientError(f"the provider answered {said}", diagnostics=diagnostics)
    return FatalAttemptError(f"the provider refused the request: {said}", diagnostics=diagnostics)


def failed_error(reply: InteractionReply) -> AttemptError:
    """The attempt error of an interaction whose status is `failed`, by its error code."""
    code = reply.error_code
    if code in TRANSIENT_STATUSES:
        return reply_error(
            TransientError, "the provider failed the interaction", reply, error_type=code.lower()
        )
    return reply_error(
        InvalidResponseError,
        "the interaction failed",
        reply,
        error_type=code.lower() if code else None,
    )


def _error_body(body: object) -> tuple[str | None, str]:
    error = body.get("error") if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return None, ""
    kind, message = error.get("status"), error.get("message")
    return (kind if isinstance(kind, str) else None), (message if isinstance(message, str) else "")


def _header(response: Any) -> str | None:
    headers = getattr(response, "headers", None)
    value = headers.get("x-request-id") if headers is not None else None
    return value if isinstance(value, str) else None


def _request_id(stream: Any) -> str | None:
    return _header(getattr(stream, "response", None))


def _take_interaction(reply: InteractionReply, interaction: Mapping[str, Any]) -> None:
    """Status, identity, usage and (when present) steps of an interaction as JSON."""
    reply.interaction_id = interaction.get("id") or reply.interaction_id
    reply.model = interaction.get("model") or reply.model
    reply.status = interaction.get("status")
    errors = interaction.get("errors")
    first = errors[0] if isinstance(errors, list) and errors else None
    code = first.get("code") if isinstance(first, Mapping) else None
    reply.error_code = code if isinstance(code, str) else None
    usage = interaction.get("usage")
    reply.usage = normalize_usage(usage) if isinstance(usage, Mapping) else None
    steps = interaction.get("steps")
    if isinstance(steps, list):
        reply.steps = [dict(step) for step in steps]
        reply.unreadable = 0


def _accumulate(reply: InteractionReply, stream: Iterable[Any]) -> None:
    steps: dict[int, Step] = {}
    final = False
    failure: AttemptError | None = None
    try:
        for event in stream:
            kind = getattr(event, "event_type", None)
            if kind == "step.start":
                steps[event.index] = event.step.to_dict(mode="json", warnings=False)
            elif kind == "step.delta":
                delta = event.delta.to_dict(mode="json", warnings=False)
                if event.index not in steps or not _apply(steps[event.index], delta):
                    reply.unreadable += 1
            elif kind == "interaction.status_update":
                reply.status = event.status
            elif kind == "interaction.created":
                reply.interaction_id = event.interaction.id
                reply.model = event.interaction.model or reply.model
            elif kind == "interaction.completed":
                reply.steps = [steps[index] for index in sorted(steps)]
                _take_interaction(reply, event.interaction.to_dict(mode="json", warnings=False))
                final = True
            elif kind == "error":
                failure = _stream_error(reply, event.error)
                break
    except (gi.APIError, httpx.HTTPError) as exc:
        failure = InterruptedStreamError(
            "the stream broke before the interaction completed",
            diagnostics=Diagnostics.build(type(exc).__name__, request_id=reply.request_id),
        )
    if failure is not None:
        failure.usage = reply.usage
        raise failure
    if not final:
        raise reply_error(
            InterruptedStreamError, "the stream ended before the interaction completed", reply
        )


def _apply(step: Step, delta: dict[str, Any]) -> bool:
    """Fold one delta into its step; False when this adapter cannot reproduce it exactly."""
    kind = delta.get("type")
    if kind == "text" and step.get("type") == "model_output":
        _append_text(step.setdefault("content", []), str(delta.get("text") or ""))
        return True
    if kind == "thought_summary" and step.get("type") == "thought":
        part = delta.get("content")
        if not isinstance(part, dict):
            return False
        summary = step.setdefault("summary", [])
        if part.get("type") == "text" and set(part) <= {"type", "text"}:
            _append_text(summary, str(part.get("text") or ""))
        else:
            summary.append(part)
        return True
    if kind == "thought_signature" and step.get("type") == "thought":
        step["signature"] = delta.get("signature")
        return True
    if kind == "text_annotation_delta" and step.get("type") == "model_output":
        content = step.get("content") or []
        if not content or content[-1].get("type") != "text":
            return False
        content[-1].setdefault("annotations", []).extend(delta.get("annotations") or [])
        return True
    return False


def _append_text(parts: list[dict[str, Any]], text: str) -> None:
    last = parts[-1] if parts else None
    if last is not None and last.get("type") == "text" and "annotations" not in last:
        last["text"] = str(last.get("text") or "") + text
    else:
        parts.append({"type": "text", "text": text})


def _stream_error(reply: InteractionReply, error: Any) -> AttemptError:
    """An `error` event: the provider stopped the stream and says why in its code."""
    code = getattr(error, "code", None)
    kind = code if isinstance(code, str) else None
    if kind in TRANSIENT_STATUSES:
        return reply_error(
            TransientError, "the provider stopped the stream", reply, error_type=kind.lower()
        )
    return reply_error(
        InterruptedStreamError,
        "the provider stopped the stream",
        reply,
        error_type=kind.lower() if kind else None,
    )


def normalize_usage(usage: Mapping[str, Any]) -> Usage:
    """`Usage` from an Interactions usage object (as JSON).

    Input is `total_input_tokens`, of which `total_cached_tokens` were cache reads. As in the
    rest of the Gemini API, the thought tokens are reported beside the output tokens, not in
    them: output is their sum, reasoning the thought tokens.
    """
    thoughts = _count(usage, "total_thought_tokens")
    return Usage.from_counts(
        input_tokens=_count(usage, "total_input_tokens"),
        output_tokens=_count(usage, "total_output_tokens") + thoughts,
        total_tokens=usage.get("total_tokens"),
        reasoning_tokens=thoughts,
        cache_read_tokens=_count(usage, "total_cached_tokens"),
    )


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if type(value) is int and value > 0 else 0
