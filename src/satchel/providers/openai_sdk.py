"""What every adapter on the official `openai` SDK shares: how a conversation is handed to the
SDK, and how SDK errors and unacceptable answers map onto the turn contract's taxonomy. The
profile checks, the overflow wording and the answer errors serve the `anthropic` adapter too."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import openai

from satchel.turns import (
    AttemptError,
    ConfigurationError,
    ContextOverflowError,
    Diagnostics,
    FatalAttemptError,
    TransientError,
    Usage,
)

OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_OVERFLOW_TEXT = re.compile(
    r"context length|context window|maximum context|too many tokens|prompt is too long"
    r"|input is too long|reduce the length|exceeds the model",
    re.IGNORECASE,
)
# A message naming the output limit (max_tokens, completion or output tokens) is about the
# requested output, which compaction cannot shrink, so it is fatal; unless it also counts the
# input tokens, as vLLM's "'max_tokens' ... is too large: 1000. This model's maximum context
# length is 2048 tokens and your request has 1500 input tokens" does: that one is an overflow.
_OUTPUT_LIMIT = re.compile(
    r"max_(?:completion_|output_)?tokens|(?:completion|output) tokens", re.IGNORECASE
)
_INPUT_TOKENS = re.compile(r"\b(?:input|prompt) tokens\b", re.IGNORECASE)


def check_settings(
    request: object,
    *,
    api: str,
    sdk_keys: frozenset[str],
    owned: Sequence[str],
    why_owned: str,
    sdk: str = "openai",
) -> dict[str, Any]:
    """The checks every profile `request` section passes: a mapping of settings the SDK's `api`
    method takes (`sdk_keys`), with a model, and none of the `owned` ones (`why_owned` says why
    the adapter keeps those), neither directly nor in `extra_body`, which is sent as given.
    Raises `ConfigurationError` naming the field."""
    if not isinstance(request, Mapping):
        raise ConfigurationError(f"request: expected a mapping of {api} settings")
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigurationError("request.model: a model name is required")
    extra = request.get("extra_body", {})
    if not isinstance(extra, Mapping):
        raise ConfigurationError("request.extra_body: expected a mapping of extra JSON fields")
    for key in owned:
        for where, settings in (("request", request), ("request.extra_body", extra)):
            if key in settings:
                raise ConfigurationError(f"{where}.{key}: not allowed; {why_owned}")
    unknown = sorted(set(request) - sdk_keys)
    if unknown:
        raise ConfigurationError(
            f"request.{unknown[0]}: not a {api} setting the {sdk} SDK sends "
            "(use extra_body for server-specific fields)"
        )
    return dict(request)


class Answered(Protocol):
    """An answer as far as an error needs it: what it spent, and its request id."""

    usage: Usage | None
    request_id: str | None


def sdk_arguments(body: dict[str, Any], field: str) -> dict[str, Any]:
    """`body` as `create()` arguments whose conversation (`field`: `messages` or `input`)
    travels in `extra_body`.

    The SDK walks every parameter against its type hints before sending; over a long
    conversation that walk is most of a request's client-side time, and for the message and item
    parameters satchel sends (no aliased or formatted fields) it returns its input unchanged.
    `extra_body` is merged into the JSON as given, in place of the empty list, so the bytes sent
    are the same; tests hold them equal.
    """
    conversation = body.get(field)
    if conversation is None:
        return body
    extra = {field: conversation, **(body.get("extra_body") or {})}
    return {**body, field: [], "extra_body": extra}


def classify_status_error(exc: openai.APIStatusError) -> AttemptError:
    """Map an HTTP error answer to the taxonomy; provider messages are inspected, never kept."""
    status = exc.status_code
    error_type = exc.type if isinstance(exc.type, str) else None
    code = exc.code if isinstance(exc.code, str) else None
    diagnostics = Diagnostics.build(type(exc).__name__, error_type or code, status, exc.request_id)
    if code in OVERFLOW_CODES or (status in (400, 413, 422) and overflows(str(exc.message or ""))):
        return ContextOverflowError(
            "the request exceeds the model's context", diagnostics=diagnostics
        )
    if status in (408, 409, 429) or status >= 500:
        return TransientError(f"the provider answered HTTP {status}", diagnostics=diagnostics)
    return FatalAttemptError(
        f"the provider refused the request (HTTP {status})", diagnostics=diagnostics
    )


def overflows(message: str) -> bool:
    """Whether a provider's error message says the input exceeds the model's context."""
    if _OUTPUT_LIMIT.search(message) and not _INPUT_TOKENS.search(message):
        return False
    return _OVERFLOW_TEXT.search(message) is not None


def unreachable(exc: Exception) -> TransientError:
    """A timeout or a connection that failed: retryable, diagnosed by its class alone."""
    return TransientError(
        "the provider could not be reached", diagnostics=Diagnostics.build(type(exc).__name__)
    )


def reply_error[E: AttemptError](
    error: type[E], message: str, reply: Answered, *, error_type: object = None
) -> E:
    """`error` for an answer that cannot be accepted, with the answer's usage and diagnostics
    naming `error`, the provider's error code (`error_type`) and the request id."""
    return error(
        message,
        usage=reply.usage,
        diagnostics=Diagnostics.build(error.__name__, error_type, request_id=reply.request_id),
    )
