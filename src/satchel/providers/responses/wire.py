"""One Responses call through the official `openai` SDK, streamed or not, normalized.

Shared by the OpenAI and xAI Responses adapters. Output items are kept as the provider returned
them (the SDK's view of the JSON, fields it did not send left out); streaming takes each item from
`response.output_item.done` and the status and usage from the final `response.completed`,
`response.incomplete` or `response.failed` event. Also the separate compact call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from satchel.providers.kit.errors import (
    OVERFLOW_CODES,
    classify_openai_status,
    reply_error,
    unreachable,
)
from satchel.providers.kit.sdk import sdk_arguments
from satchel.turns import (
    AttemptError,
    ContextOverflowError,
    Diagnostics,
    InterruptedStreamError,
    InvalidResponseError,
    TransientError,
    Usage,
)

Item = dict[str, Any]
_TRANSIENT_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded"})
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


@dataclass(slots=True)
class ResponsesReply:
    """The normalized content of one Responses answer."""

    model: str = ""
    response_id: str | None = None
    request_id: str | None = None
    status: str | None = None
    incomplete_reason: str | None = None
    error_code: str | None = None
    items: list[Item] = field(default_factory=list)
    usage: Usage | None = None

    @property
    def text(self) -> str:
        """The visible answer: every `output_text` part of the output messages, in order."""
        return "".join(
            part.get("text", "")
            for item in self.items
            if item.get("type") == "message"
            for part in item.get("content") or ()
            if part.get("type") == "output_text"
        )

    @property
    def refusal(self) -> str | None:
        parts = [
            str(part.get("refusal") or "")
            for item in self.items
            if item.get("type") == "message"
            for part in item.get("content") or ()
            if part.get("type") == "refusal"
        ]
        return "".join(parts) if parts else None

    @property
    def reasoning(self) -> str | None:
        """The readable reasoning summaries, joined; None when the model gave none."""
        parts = [
            str(part.get("text") or "")
            for item in self.items
            if item.get("type") == "reasoning"
            for part in item.get("summary") or ()
        ]
        return "\n\n".join(parts) if parts else None


def call_responses(client: openai.OpenAI, body: dict[str, Any]) -> ResponsesReply:
    """Send `body` (streamed when `body["stream"]`) and return the accumulated answer, whatever
    its status; the adapter decides what a status means. SDK errors become attempt errors,
    raised outside the SDK exception's handler, so the SDK's exception (its raw body) never
    travels along."""
    error: AttemptError
    arguments = sdk_arguments(body, "input")
    try:
        if body.get("stream"):
            stream = client.responses.create(**arguments)
            reply = ResponsesReply(request_id=stream.response.headers.get("x-request-id"))
            _accumulate(reply, stream)
            return reply
        response = client.responses.create(**arguments)
    except openai.APIStatusError as exc:
        error = classify_openai_status(exc, secret=client.api_key)
    except (openai.APITimeoutError, openai.APIConnectionError) as exc:
        error = unreachable(exc)
    else:
        reply = ResponsesReply(request_id=getattr(response, "_request_id", None))
        _take_response(reply, response)
        reply.items = [item.to_dict(mode="json", warnings=False) for item in response.output]
        return reply
    raise error


def call_compact(client: openai.OpenAI, model: str, items: list[Item]) -> ResponsesReply:
    """`POST /responses/compact` with only the model and `items`; the answer's output items and
    usage (its status is `completed` when it came back at all)."""
    error: AttemptError
    try:
        compacted = client.responses.compact(
            **sdk_arguments({"model": model, "input": items}, "input")
        )
    except openai.APIStatusError as exc:
        error = classify_openai_status(exc, secret=client.api_key)
    except (openai.APITimeoutError, openai.APIConnectionError) as exc:
        error = unreachable(exc)
    else:
        return ResponsesReply(
            model=model,
            response_id=compacted.id,
            request_id=getattr(compacted, "_request_id", None),
            status="completed",
            items=[item.to_dict(mode="json", warnings=False) for item in compacted.output],
            usage=normalize_usage(compacted.usage),
        )
    raise error


def _accumulate(reply: ResponsesReply, stream: Iterable[Any]) -> None:
    done: dict[int, Item] = {}
    final = False
    try:
        for event in stream:
            kind = event.type
            if kind == "response.output_item.done":
                done[event.output_index] = event.item.to_dict(mode="json", warnings=False)
            elif kind in _FINAL_EVENTS:
                _take_response(reply, event.response)
                final = True
            elif kind in ("response.created", "response.in_progress"):
                reply.response_id = event.response.id or reply.response_id
                reply.model = event.response.model or reply.model
            elif kind == "error":
                raise _stream_error(reply, event.code)
    except (openai.APIError, httpx.HTTPError) as exc:
        broken: str | None = type(exc).__name__
    else:
        broken = None
    if broken is not None:
        raise InterruptedStreamError(
            "the stream broke before the response completed",
            usage=reply.usage,
            diagnostics=Diagnostics.build(broken, request_id=reply.request_id),
        )
    if not final:
        raise reply_error(
            InterruptedStreamError, "the stream ended before the response completed", reply
        )
    reply.items = [done[index] for index in sorted(done)]


def _take_response(reply: ResponsesReply, response: Any) -> None:
    reply.response_id = response.id or reply.response_id
    reply.model = response.model or reply.model
    reply.status = response.status
    details = response.incomplete_details
    reply.incomplete_reason = getattr(details, "reason", None) if details else None
    error = response.error
    reply.error_code = str(error.code) if error is not None and error.code else None
    reply.usage = normalize_usage(response.usage)


def _stream_error(reply: ResponsesReply, code: object) -> AttemptError:
    """An `error` event: the provider stopped the stream and says why in `code`."""
    return coded_error(reply, code if isinstance(code, str) else None, InterruptedStreamError)


def failed_error(reply: ResponsesReply) -> AttemptError:
    """The attempt error of a response whose status is `failed`, by its error code."""
    return coded_error(reply, reply.error_code, InvalidResponseError)


def coded_error(
    reply: ResponsesReply, code: str | None, otherwise: type[AttemptError]
) -> AttemptError:
    """An overflow or a transient failure when the provider's code says so, else `otherwise`."""
    if code in OVERFLOW_CODES:
        return reply_error(
            ContextOverflowError, "the request exceeds the model's context", reply, error_type=code
        )
    if code in _TRANSIENT_CODES:
        return reply_error(
            TransientError, "the provider failed the response", reply, error_type=code
        )
    return reply_error(otherwise, "the response failed", reply, error_type=code)


def normalize_usage(usage: Any) -> Usage | None:
    """`Usage` from a Responses usage object: cached tokens are a breakdown of the input,
    reasoning tokens of the output; None when the provider sent none."""
    if usage is None:
        return None
    cached = getattr(usage, "input_tokens_details", None)
    reasoning = getattr(usage, "output_tokens_details", None)
    extra = usage.model_extra or {}
    return Usage.from_counts(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        reasoning_tokens=getattr(reasoning, "reasoning_tokens", None),
        cache_read_tokens=getattr(cached, "cached_tokens", None),
        cost=extra.get("cost"),
    )
