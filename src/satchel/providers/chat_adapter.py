"""What the Chat Completions adapters share: request building, the call, and the commit."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import openai

from satchel.providers.chat_state import (
    Window,
    buffered,
    check_payload,
    committed,
    empty_payload,
    readable,
)
from satchel.providers.chat_wire import ChatReply, call_chat
from satchel.providers.openai_sdk import check_settings, reply_error
from satchel.turns import (
    AdapterDescriptor,
    ConfigurationError,
    InvalidResponseError,
    Message,
    ModelResponse,
    ModelTurnRequest,
    ModelTurnResult,
    RefusalError,
    RequestRecord,
    RuntimeState,
    TransitionTelemetry,
    TruncatedError,
    redact,
)

FORBIDDEN_REQUEST_KEYS = ("messages", "tools", "tool_choice", "functions", "function_call")
SDK_REQUEST_KEYS = frozenset(
    inspect.signature(openai.resources.chat.Completions.create).parameters
) - {"self"}


class ChatCompletionsAdapter:
    """Base of the adapters that speak Chat Completions through the `openai` SDK."""

    descriptor: AdapterDescriptor
    strategy: str
    opaque_fields: frozenset[str] = frozenset()

    def __init__(self, client: openai.OpenAI, request: dict[str, Any]) -> None:
        self.client = client
        self.request = self.validate_request(request)
        self.model: str = self.request["model"]
        self.reasoning_fields: tuple[str, ...] = ()

    @classmethod
    def validate_request(cls, request: dict[str, Any]) -> dict[str, Any]:
        """Check the profile's `request` section; return the settings sent on every call."""
        settings = check_settings(
            request,
            api="Chat Completions",
            sdk_keys=SDK_REQUEST_KEYS,
            owned=FORBIDDEN_REQUEST_KEYS,
            why_owned=f"{cls.descriptor.adapter_id} builds messages itself and answers in "
            "plain text",
        )
        if settings.get("n", 1) != 1:
            raise ConfigurationError("request.n: must be 1 (one answer per turn)")
        options = settings.get("stream_options")
        if settings.get("stream"):
            if options is not None and not isinstance(options, dict):
                raise ConfigurationError("request.stream_options: expected a mapping")
            if (options or {}).get("include_usage") is False:
                raise ConfigurationError(
                    "request.stream_options.include_usage: must be true when streaming; "
                    "usage arrives in the last chunk"
                )
            settings["stream_options"] = {**(options or {}), "include_usage": True}
        elif options is not None:
            raise ConfigurationError("request.stream_options: only valid with request.stream: true")
        return settings

    def initial_state(self) -> RuntimeState:
        return RuntimeState(self.descriptor.adapter_id, self.strategy, empty_payload())

    def check_state(self, state: RuntimeState, since: RuntimeState | None = None) -> None:
        state.validate(since)
        state.check_owner(self.descriptor.adapter_id, (self.strategy,))
        check_payload(state, self.reasoning_fields)

    def buffer_inputs(self, state: RuntimeState, messages: Sequence[Message]) -> RuntimeState:
        return buffered(state, messages)

    def settings(self) -> dict[str, Any]:
        return dict(self.request)

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        inputs = [*state.payload["pending"], *request.new_messages]
        window = self.window(state, inputs)
        sent = [*state.payload["preamble"], *window.messages, *inputs]
        reply = call_chat(self.client, {**self.settings(), "messages": sent})
        text, reasoning, answered = self.answered(reply)
        provisional = committed(state, window, inputs, answered, self.readable, reasoning)
        assert reply.usage is not None
        return ModelTurnResult(
            response=ModelResponse(
                text=text,
                reasoning=reasoning,
                finish_reason=reply.finish_reason or "stop",
                model=reply.model or self.model,
                response_id=reply.response_id,
            ),
            usage=reply.usage,
            provisional_state=provisional,
            request_record=RequestRecord(
                input_items=tuple(input_descriptor(i, m) for i, m in enumerate(sent)),
                settings=redact(self.settings(), self.opaque_fields),
            ),
            telemetry=TransitionTelemetry(
                items_sent=len(sent),
                history_before=len(state.payload["messages"]),
                history_after=len(provisional.payload["messages"]),
                items_pruned=window.pruned_items,
            ),
            readable_request_messages=tuple(map(self.readable, sent)),
        )

    def answered(self, reply: ChatReply) -> tuple[str, str | None, list[Message]]:
        """The action, its exact reasoning and the native messages that answer the turn's inputs
        (one plain assistant message here), or the attempt error the reply deserves."""
        text, reasoning = self.accept_reply(reply)
        answer: Message = {"role": "assistant", "content": text}
        if reasoning and self.reasoning_fields:
            answer.update(dict.fromkeys(self.reasoning_fields, reasoning))
        return text, reasoning, [answer]

    def readable(self, message: Message) -> Message:
        """One message as the records show it."""
        return readable(message, self.reasoning_fields)

    def window(self, state: RuntimeState, inputs: Sequence[Message]) -> Window:
        """The accepted window the next request carries (a strategy may trim it)."""
        return Window(state.payload["messages"], state.accepted_turns)

    def accept_reply(self, reply: ChatReply) -> tuple[str, str | None]:
        """Return the answer text and exact reasoning, or raise the attempt error it deserves."""
        if reply.usage is None:
            raise reply_error(
                InvalidResponseError,
                "the provider reported no usage; every request must be accounted for",
                reply,
            )
        if reply.refusal or reply.finish_reason == "content_filter":
            raise reply_error(RefusalError, "the model refused", reply)
        if reply.tool_calls or reply.finish_reason in ("tool_calls", "function_call"):
            raise reply_error(
                InvalidResponseError,
                "the model called a tool; this adapter accepts plain-text answers only",
                reply,
            )
        if reply.finish_reason == "length":
            raise reply_error(TruncatedError, "the answer hit the output limit", reply)
        if reply.finish_reason != "stop":
            raise reply_error(
                InvalidResponseError,
                f"the answer did not complete (finish reason {reply.finish_reason!r})",
                reply,
            )
        if not reply.text.strip():
            raise reply_error(InvalidResponseError, "the answer is empty", reply)
        return reply.text, next(iter(reply.reasoning.values()), None)


def input_descriptor(index: int, message: Message) -> dict[str, Any]:
    content = message["content"]
    kinds = (
        ["text"]
        if isinstance(content, str)
        else [str(part.get("type", "unknown")) for part in content if isinstance(part, dict)]
    )
    return {"index": index, "type": "message", "role": message["role"], "content": kinds}
