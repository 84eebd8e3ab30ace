"""One Chat Completions call through the official `openai` SDK, streamed or not, normalized.

Shared by the Chat Completions adapters: it sends a body, accumulates a stream until the finish
reason and the usage chunk, and turns SDK exceptions into the turn contract's error taxonomy
(`kit.errors`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from satchel.providers.kit.errors import classify_openai_status, reply_error, unreachable
from satchel.providers.kit.sdk import sdk_arguments
from satchel.turns import (
    AttemptError,
    Diagnostics,
    InterruptedStreamError,
    InvalidResponseError,
    Usage,
)

REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass(slots=True)
class ToolCall:
    """One tool call as the model sent it, its arguments exactly as received."""

    id: str | None = None
    type: str | None = None
    name: str = ""
    arguments: str = ""

    def native(self) -> dict[str, Any]:
        """The call as an assistant message replays it."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class ChatReply:
    """The normalized content of one Chat Completions answer."""

    model: str = ""
    response_id: str | None = None
    request_id: str | None = None
    text: str = ""
    reasoning: dict[str, str] = field(default_factory=dict)
    tool_calls: bool = False
    calls: list[ToolCall] = field(default_factory=list)
    conflicting_calls: bool = False  # a stream changed a call's id, type or name midway
    refusal: str | None = None
    finish_reason: str | None = None
    usage: Usage | None = None


def call_chat(client: openai.OpenAI, body: dict[str, Any]) -> ChatReply:
    """Send `body` (streamed when `body["stream"]`), and return the accumulated answer.

    Errors are raised outside the SDK exception's handler, so the SDK's exception (its raw body)
    never travels along as their context.
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
        error = classify_openai_status(exc, secret=client.api_key)
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
    for call in message.tool_calls or []:
        function = getattr(call, "function", None)
        reply.calls.append(
            ToolCall(
                call.id,
                call.type,
                getattr(function, "name", None) or "",
                getattr(function, "arguments", None) or "",
            )
        )
    _take_reasoning(reply, message.model_extra or {}, append=False)
    return reply


def _accumulate(reply: ChatReply, stream: Iterable[Any]) -> None:
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[int, ToolCall] = {}
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
                for call in delta.tool_calls or []:
                    _take_call(reply, calls.setdefault(call.index, ToolCall()), call)
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
    reply.calls = [calls[index] for index in sorted(calls)]
    if reply.finish_reason is None:
        raise reply_error(InterruptedStreamError, "the stream ended without a finish reason", reply)


def _take_call(reply: ChatReply, call: ToolCall, delta: Any) -> None:
    """Add one streamed tool-call delta to `call`: id, type and name once, arguments appended."""
    function = getattr(delta, "function", None)
    named = getattr(function, "name", None)
    for name, value in (("id", delta.id), ("type", delta.type), ("name", named)):
        if value:
            known = getattr(call, name)
            reply.conflicting_calls |= bool(known) and known != value
            setattr(call, name, value)
    arguments = getattr(function, "arguments", None)
    if isinstance(arguments, str):
        call.arguments += arguments


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
    hit = extra.get("prompt_cache_hit_tokens")  # DeepSeek's own count, when it sends one
    cached = hit if isinstance(hit, int) else getattr(prompt, "cached_tokens", None)
    return Usage.from_counts(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        reasoning_tokens=getattr(completion, "reasoning_tokens", None),
        cache_read_tokens=cached,
        cost=extra.get("cost"),
    )
