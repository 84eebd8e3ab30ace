"""How SDK errors and unacceptable answers map onto the turn contract's taxonomy: the overflow
wording every family recognizes, the `openai` SDK's HTTP errors, unreachable providers, and the
error of an answer that cannot be accepted.

An error's message keeps the provider's own words (status, error code, message), masked and on
one line, for the user's terminal and a run's error reason; its `Diagnostics`, which records
keep, never hold them.
"""

from __future__ import annotations

import re
from typing import Protocol
from urllib.parse import urlsplit

import openai

from satchel.turns import (
    AttemptError,
    ContextOverflowError,
    Diagnostics,
    FatalAttemptError,
    TransientError,
    Usage,
)
from satchel.turns.redaction import REDACTED

# Error codes or types that name an overflow: OpenAI's, and llama.cpp server's
# `exceed_context_size_error` (HTTP 400, with `n_prompt_tokens` and `n_ctx` beside the message).
OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "string_above_max_length", "exceed_context_size_error"}
)
# The words of an overflow. Beside OpenAI's: llama.cpp's "request (N tokens) exceeds the
# available context size (M tokens)" (older builds without the counts); vLLM's "maximum context
# length is M tokens" and, from its V1 engine, "The decoder prompt (length N) is longer than the
# maximum model length of M"; SGLang's "The input (N tokens) is longer than the model's context
# length (M tokens)"; Ollama's "prompt too long; exceeded max context length by K tokens" and
# "the input length exceeds the context length" (when it refuses rather than truncates).
_OVERFLOW_TEXT = re.compile(
    r"context length|context window|maximum context|too many tokens|prompt is too long"
    r"|input is too long|reduce the length|exceeds the model|available context size"
    r"|maximum model length",
    re.IGNORECASE,
)
# Where each server's words state the request's size and the model's context, first match wins.
_PROMPT_SIZE = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"request \((\d+) tokens\)",  # llama.cpp
        r"input \((\d+) tokens\)",  # SGLang
        r"prompt \(length (\d+)\)",  # vLLM V1
        r"request has (\d+) (?:input|prompt) tokens",  # vLLM
        r"at least (\d+) input tokens",  # vLLM
        r"\((\d+) in the messages",  # vLLM, older
        r"(\d+) tokens from the input messages",  # SGLang
        r"messages resulted in (\d+) tokens",  # OpenAI
    )
)
_CONTEXT_SIZE = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"context size \((\d+) tokens\)",  # llama.cpp
        r"context length \((\d+) tokens\)",  # SGLang
        r"maximum model length of (\d+)",  # vLLM V1
        r"maximum context length (?:is|of) (\d+)",  # vLLM, SGLang, OpenAI
    )
)
# A message naming the output limit (max_tokens, completion or output tokens) is about the
# requested output, which compaction cannot shrink, so it is fatal; unless it also counts the
# input tokens, as vLLM's "'max_tokens' ... is too large: 1000. This model's maximum context
# length is 2048 tokens and your request has 1500 input tokens" does: that one is an overflow.
_OUTPUT_LIMIT = re.compile(
    r"max_(?:completion_|output_)?tokens|(?:completion|output) tokens", re.IGNORECASE
)
_INPUT_TOKENS = re.compile(r"\b(?:input|prompt) tokens\b", re.IGNORECASE)
PROVIDER_TEXT_LIMIT = 300  # characters of a provider's message kept in an error
CODE_LIMIT = 80  # characters of its error code
# What may be a credential or opaque state in a provider's words: a bearer token, a key-shaped
# word (`sk-...`, `xai-...`, Google's `AIza...`), a long unbroken run of base64-like characters.
_SECRET_WORDS = re.compile(
    r"(?i:bearer)\s+\S+|\b(?:sk|xai|gsk|key)-[A-Za-z0-9_\-]{6,}|\bAIza[A-Za-z0-9_\-]{20,}"
    r"|[A-Za-z0-9+/_\-]{64,}={0,2}"
)


class Answered(Protocol):
    """An answer as far as an error needs it: what it spent, and its request id."""

    usage: Usage | None
    request_id: str | None


def classify_openai_status(exc: openai.APIStatusError, *, secret: str = "") -> AttemptError:
    """Map an HTTP error answer of the `openai` SDK to the taxonomy; the message keeps the
    provider's words (`provider_words`, `secret` masked), the diagnostics only allowlisted
    values."""
    status = exc.status_code
    error_type = exc.type if isinstance(exc.type, str) else None
    code = exc.code if isinstance(exc.code, str) else None
    diagnostics = Diagnostics.build(type(exc).__name__, error_type or code, status, exc.request_id)
    body = exc.body if isinstance(exc.body, dict) else {}
    # A server's own error shape may be a bare string (`{"error": "server busy ..."}`).
    message = body.get("message") if body else exc.body
    said = provider_words(status, code or error_type, message, secret)
    named = code in OVERFLOW_CODES or error_type in OVERFLOW_CODES
    if named or (status in (400, 413, 422) and overflows(str(exc.message or ""))):
        prompt_tokens, context_tokens = overflow_sizes(body, str(message or exc.message or ""))
        return ContextOverflowError(
            f"the request exceeds the model's context ({said})",
            diagnostics=diagnostics,
            prompt_tokens=prompt_tokens,
            context_tokens=context_tokens,
        )
    if status in (408, 409, 429) or status >= 500:
        return TransientError(f"the provider answered {said}", diagnostics=diagnostics)
    return FatalAttemptError(f"the provider refused the request: {said}", diagnostics=diagnostics)


def provider_words(status: int | None, code: object, message: object, secret: str = "") -> str:
    """What the provider said, fit for a terminal and a run's error reason: `HTTP 404
    model_not_found: The model ... does not exist`, on one line, at most
    `PROVIDER_TEXT_LIMIT` characters of the message, with `secret` (the key sent),
    bearer tokens, key-shaped words and long opaque runs masked."""
    label = _one_line(code, CODE_LIMIT, secret)
    head = " ".join(part for part in (f"HTTP {status}" if status else "", label) if part)
    text = _one_line(message, PROVIDER_TEXT_LIMIT, secret)
    return f"{head}: {text}" if head and text else head or text or "no details"


def _one_line(value: object, limit: int, secret: str) -> str:
    text = " ".join(value.split()) if isinstance(value, str) else ""
    if secret:
        text = text.replace(secret, REDACTED)
    text = _SECRET_WORDS.sub(REDACTED, text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def overflows(message: str) -> bool:
    """Whether a provider's error message says the input exceeds the model's context."""
    if _OUTPUT_LIMIT.search(message) and not _INPUT_TOKENS.search(message):
        return False
    return _OVERFLOW_TEXT.search(message) is not None


def overflow_sizes(body: dict[str, object], message: str) -> tuple[int | None, int | None]:
    """The request's size and the model's context in tokens, as an overflow answer states them:
    llama.cpp's `n_prompt_tokens` and `n_ctx`, or else the numbers in the message (None for
    what it does not say)."""
    return (
        _count(body.get("n_prompt_tokens")) or _first_number(_PROMPT_SIZE, message),
        _count(body.get("n_ctx")) or _first_number(_CONTEXT_SIZE, message),
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _first_number(patterns: tuple[re.Pattern[str], ...], message: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return None


def unreachable(exc: Exception) -> TransientError:
    """A timeout or a connection that failed: retryable, naming the URL tried (without its
    query) and the SDK's exception, diagnosed by its class alone."""
    url = getattr(getattr(exc, "request", None), "url", None)
    where = f" at {_without_query(str(url))}" if url is not None else ""
    return TransientError(
        f"the provider{where} could not be reached ({type(exc).__name__})",
        diagnostics=Diagnostics.build(type(exc).__name__),
    )


def _without_query(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


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
