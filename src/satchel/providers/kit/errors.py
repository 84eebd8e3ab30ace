"""How SDK errors and unacceptable answers map onto the turn contract's taxonomy: the overflow
wording every family recognizes, the `openai` SDK's HTTP errors, unreachable providers, and the
error of an answer that cannot be accepted."""

from __future__ import annotations

import re
from typing import Protocol

import openai

from satchel.turns import (
    AttemptError,
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


class Answered(Protocol):
    """An answer as far as an error needs it: what it spent, and its request id."""

    usage: Usage | None
    request_id: str | None


def classify_openai_status(exc: openai.APIStatusError) -> AttemptError:
    """Map an HTTP error answer of the `openai` SDK to the taxonomy; provider messages are
    inspected, never kept."""
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
