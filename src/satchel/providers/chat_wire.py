"""One Chat Completions call through the official `openai` SDK, streamed or not, normalized.

Shared by the Chat Completions adapters: it sends a body, accumulates a stream until the finish
reason and the usage chunk, and turns SDK exceptions into the turn contract's error taxonomy
(`openai_sdk`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from satchel.providers.openai_sdk import (
    classify_status_error,
    reply_error,
    sdk_arguments,
    unreachable,
)
from satchel.turns import (
    AttemptError,
    Diagnostics,
    InterruptedStreamError,
    InvalidResponseError,
    Usage,
)

REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(slots=True)
class ChatReply:
    """The normalized content of one Chat Completions answer."""

    model: str = ""
    response_id: str | None = None
    request_id: str | None = None
    text: str = ""
    reasoning: dict[str, str] = field(default_factory=dict)
    tool_calls: bool = False
    refusal: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


def call_chat(client: openai.OpenAI, body: dict[str, Any]) -> ChatReply:
    """Send `body` (streamed when `body["stream"]`), and return the accumulated answer.

    Errors are raised outside the SDK exception's handler, so no provider message travels along
    as their context.
    """
    error: AttemptError
    arguments = sdk_arguments(body, "messages")
    try:
        if body.get("stream"):
            stream = client.chat.completions.create(**arguments)
            reply = ChatReply(request_id=stream.response.headers.get("x-request-id"))
            _accumulate(reply, stream)
            return reply
        completion = client.chat.completions.create(**arguments)
    except openai.APIStatusError as exc:
        error = classify_status_error(exc)
    except (openai.APITimeoutError, openai.APIConnectionError) as exc:
        error = unreachable(exc)
    else:
        return _from_completion(completion)
    raise error


def _from_completion(completion: Any) -> ChatReply:
    reply = ChatReply(
        model=completion.model or "",
        response_id=completion.id,
        request_id=getattr(completion, "_request_id", None),
        usage=normalize_usage(completion.usage),
    )
    if not completion.choices:
        raise reply_error(InvalidResponseError, "the response has no choices", reply)
    choice = completion.choices[0]
    message = choice.message
    reply.finish_reason = choice.finish_reason
    reply.text = message.content or ""
    reply.refusal = message.refusal
    reply.tool_calls = bool(message.tool_calls) or bool(getattr(message, "function_call", None))
    _take_reasoning(reply, message.model_extra or {}, append=False)
    return reply


def _accumulate(reply: ChatReply, stream: Iterable[Any]) -> None:
    text: list[str] = []
    refusal: list[str] = []
    try:
        for chunk in stream:
            reply.model = chunk.model or reply.model
            reply.response_id = chunk.id or reply.response_id
            if chunk.usage is not None:
                reply.usage = normalize_usage(chunk.usage)
            for choice in chunk.choices[:1]:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                if delta.refusal:
                    refusal.append(delta.refusal)
                if delta.tool_calls or getattr(delta, "function_call", None):
                    reply.tool_calls = True
                _take_reasoning(reply, delta.model_extra or {}, append=True)
                if choice.finish_reason:
                    reply.finish_reason = choice.finish_reason
    except (openai.APIError, httpx.HTTPError) as exc:
        broken: str | None = type(exc).__name__
    else:
        broken = None
    if broken is not None:
        raise InterruptedStreamError(
            "the stream broke before the answer completed",
            usage=reply.usage,
            diagnostics=Diagnostics.build(broken, request_id=reply.request_id),
        )
    reply.text = "".join(text)
    reply.refusal = "".join(refusal) or None
    if reply.finish_reason is None:
        raise reply_error(InterruptedStreamError, "the stream ended without a finish reason", reply)


def _take_reasoning(reply: ChatReply, extra: dict[str, Any], *, append: bool) -> None:
    for name in REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str):
            reply.reasoning[name] = reply.reasoning.get(name, "") + value if append else value


def normalize_usage(usage: Any) -> Usage | None:
    """`Usage` from a Chat Completions usage object; None when the provider sent none."""
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens_details", None)
    completion = getattr(usage, "completion_tokens_details", None)
    extra = usage.model_extra or {}
    return Usage.from_counts(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        reasoning_tokens=getattr(completion, "reasoning_tokens", None),
        cache_read_tokens=getattr(prompt, "cached_tokens", None)
        or extra.get("prompt_cache_hit_tokens"),
        cost=extra.get("cost"),
    )
