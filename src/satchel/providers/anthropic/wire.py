"""One Messages call through the official `anthropic` SDK, streamed or not, normalized.

The beta surface is used (`client.beta.messages`): it is the one that sends `betas` and the
on-demand `compaction` parameter and that parses compaction blocks and per-iteration usage.
Content blocks are kept as the provider returned them (the SDK's view of the JSON: fields it did
not receive left out, unknown fields kept). A stream is accumulated here from its raw events: each
block from its `content_block_start` (a signed compaction summary arrives whole there) and its
deltas, the stop reason, stop sequence and `stop_details` from `message_delta`, the usage from
`message_start` overlaid by the cumulative counts of `message_delta`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

from satchel.providers.kit.errors import overflows, provider_words, reply_error, unreachable
from satchel.providers.kit.logs import hide_bodies
from satchel.providers.kit.sdk import sdk_arguments
from satchel.turns import (
    AttemptError,
    ContextOverflowError,
    Diagnostics,
    FatalAttemptError,
    InterruptedStreamError,
    TransientError,
    Usage,
)

Block = dict[str, Any]
TRANSIENT_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
_APPENDED = {"text_delta": "text", "thinking_delta": "thinking", "compaction_delta": "content"}


# The SDK's debug line that prints each request's options carries its JSON body (signatures,
# redacted thinking).
hide_bodies("anthropic._base_client", "Request options")


@dataclass(slots=True)
class MessagesReply:
    """The normalized content of one Messages answer."""

    model: str = ""
    message_id: str | None = None
    request_id: str | None = None
    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    stop_details: dict[str, Any] | None = None
    usage: Usage | None = None
    complete: bool = False  # the whole answer arrived (a stream reached `message_stop`)

    @property
    def text(self) -> str:
        """The visible answer: every text block, in order."""
        return "".join(str(b.get("text") or "") for b in self.blocks if b.get("type") == "text")

    @property
    def reasoning(self) -> str | None:
        """The readable thinking, joined; None when the model showed none."""
        parts = [str(b["thinking"]) for b in self.blocks if b.get("type") == "thinking"]
        shown = [part for part in parts if part]
        return "\n\n".join(shown) if shown else None


def call_messages(client: anthropic.Anthropic, body: dict[str, Any]) -> MessagesReply:
    """Send `body` (streamed when `body["stream"]`) and return the accumulated answer, whatever
    its stop reason; the adapter decides what it means. SDK errors become attempt errors, raised
    outside the SDK exception's handler, so the SDK's exception (its raw body) never travels
    along."""
    error: AttemptError
    arguments = sdk_arguments(body, "messages")
    try:
        if body.get("stream"):
            stream = client.beta.messages.create(**arguments)
            reply = MessagesReply(request_id=stream.response.headers.get("request-id"))
            _accumulate(reply, stream)
            return reply
        message = client.beta.messages.create(**arguments)
    except anthropic.APIStatusError as exc:
        error = classify_status_error(exc, secret=client.api_key or "")
    except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
        error = unreachable(exc)
    else:
        reply = MessagesReply(
            model=message.model,
            message_id=message.id,
            request_id=getattr(message, "_request_id", None),
            blocks=[block.to_dict(mode="json", warnings=False) for block in message.content],
            stop_reason=message.stop_reason,
            stop_sequence=message.stop_sequence,
            stop_details=_details(message.stop_details),
            usage=normalize_usage(message.usage.to_dict(mode="json", warnings=False)),
            complete=True,
        )
        return reply
    raise error


def classify_status_error(exc: anthropic.APIStatusError, *, secret: str = "") -> AttemptError:
    """Map an HTTP error answer to the taxonomy; the message keeps the provider's words
    (`provider_words`, `secret` masked), the diagnostics only allowlisted values."""
    status = exc.status_code
    error_type = _error_type(exc.body)
    diagnostics = Diagnostics.build(type(exc).__name__, error_type, status, exc.request_id)
    said = provider_words(status, error_type, _error_field(exc.body, "message"), secret)
    if status in (400, 413) and overflows(str(exc.message or "")):
        return ContextOverflowError(
            f"the request exceeds the model's context ({said})", diagnostics=diagnostics
        )
    if error_type in TRANSIENT_TYPES or status in (408, 409, 429) or status >= 500:
        return TransientError(f"the provider answered {said}", diagnostics=diagnostics)
    return FatalAttemptError(f"the provider refused the request: {said}", diagnostics=diagnostics)


def _error_type(body: object) -> str | None:
    return _error_field(body, "type")


def _error_field(body: object, name: str) -> str | None:
    error = body.get("error") if isinstance(body, Mapping) else None
    value = error.get(name) if isinstance(error, Mapping) else None
    return value if isinstance(value, str) else None


def _accumulate(reply: MessagesReply, stream: Iterable[Any]) -> None:
    blocks: dict[int, Block] = {}
    usage: dict[str, Any] = {}
    failure: AttemptError | None = None
    try:
        for event in stream:
            kind = event.type
            if kind == "content_block_start":
                blocks[event.index] = event.content_block.to_dict(mode="json", warnings=False)
            elif kind == "content_block_delta":
                _apply(blocks[event.index], event.delta)
            elif kind == "message_delta":
                reply.stop_reason = event.delta.stop_reason
                reply.stop_sequence = event.delta.stop_sequence
                reply.stop_details = _details(event.delta.stop_details)
                if event.usage is not None:
                    delta = event.usage.to_dict(mode="json", warnings=False)
                    usage.update({k: v for k, v in delta.items() if v is not None})
            elif kind == "message_start":
                message = event.message
                reply.message_id, reply.model = message.id, message.model
                usage = message.usage.to_dict(mode="json", warnings=False)
            elif kind == "message_stop":
                reply.complete = True
    except anthropic.APIStatusError as exc:  # an `error` event: the provider stopped the stream
        failure = _stream_error(exc)
    except (anthropic.APIError, httpx2.HTTPError) as exc:
        failure = InterruptedStreamError(
            "the stream broke before the answer completed",
            diagnostics=Diagnostics.build(type(exc).__name__, request_id=reply.request_id),
        )
    reply.blocks = [blocks[index] for index in sorted(blocks)]
    reply.usage = normalize_usage(usage) if usage else None
    if failure is not None:
        failure.usage = reply.usage
        raise failure
    if not reply.complete:
        raise reply_error(
            InterruptedStreamError, "the stream ended before the answer completed", reply
        )


def _apply(block: Block, delta: Any) -> None:
    """One content delta onto its block: text appended, a signature set, citations listed."""
    kind = delta.type
    if kind in _APPENDED:
        key = _APPENDED[kind]
        block[key] = str(block.get(key) or "") + str(getattr(delta, key) or "")
    elif kind == "signature_delta":
        block["signature"] = delta.signature
    elif kind == "citations_delta":
        block.setdefault("citations", []).append(delta.citation.to_dict(mode="json"))
    elif kind == "input_json_delta":
        block["partial_json"] = str(block.get("partial_json") or "") + delta.partial_json


def _stream_error(exc: anthropic.APIStatusError) -> AttemptError:
    error_type = _error_type(exc.body)
    diagnostics = Diagnostics.build(type(exc).__name__, error_type, request_id=exc.request_id)
    if exc.status_code >= 400:
        return classify_status_error(exc)
    if error_type in TRANSIENT_TYPES:
        return TransientError("the provider stopped the stream", diagnostics=diagnostics)
    return InterruptedStreamError("the provider stopped the stream", diagnostics=diagnostics)


def _details(details: Any) -> dict[str, Any] | None:
    """`stop_details` as the provider sent them (the adapter keeps only their category)."""
    if details is None:
        return None
    kept: dict[str, Any] = details.to_dict(mode="json", warnings=False)
    return kept


def normalize_usage(usage: Mapping[str, Any]) -> Usage:
    """`Usage` from a Messages usage object (as JSON).

    With `iterations`, their sum is the usage (compaction iterations included: the top level
    leaves those out); without, the top level is. Input counts uncached input, cache reads and
    cache writes (the two kept apart too). Reasoning is the reported thinking breakdown: the top
    level's covers the sampling iterations, per-iteration counts stand in when it is absent, and
    thinking reported on compaction iterations is added once. Missing counts stay zero.
    """
    entries = usage.get("iterations")
    parts = [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []
    counted = parts or [usage]
    read = sum(_count(e, "cache_read_input_tokens") for e in counted)
    written = sum(_count(e, "cache_creation_input_tokens") for e in counted)
    fresh = sum(_count(e, "input_tokens") for e in counted)
    output = sum(_count(e, "output_tokens") for e in counted)
    top = _thinking(usage)
    sampled = [e for e in parts if e.get("type") != "compaction"]
    thinking = top if top is not None else sum(_thinking(e) or 0 for e in sampled)
    thinking += sum(_thinking(e) or 0 for e in parts if e.get("type") == "compaction")
    return Usage.from_counts(
        input_tokens=fresh + read + written,
        output_tokens=output,
        reasoning_tokens=thinking,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def _count(entry: Mapping[str, Any], key: str) -> int:
    value = entry.get(key)
    return value if type(value) is int and value > 0 else 0


def _thinking(entry: Mapping[str, Any]) -> int | None:
    details = entry.get("output_tokens_details")
    value = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    return value if type(value) is int and value >= 0 else None
