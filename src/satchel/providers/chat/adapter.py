"""What the Chat Completions adapters share: request building, the call, and the commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from satchel.providers.chat.settings import ChatCompletionsSettings
from satchel.providers.chat.state import ChatMessage, ChatState
from satchel.providers.chat.wire import ChatReply, call_chat
from satchel.providers.kit.adapter import AdapterBase
from satchel.providers.kit.errors import reply_error
from satchel.providers.kit.result import turn_result
from satchel.providers.kit.state import History
from satchel.turns import (
    InvalidResponseError,
    ModelTurnRequest,
    ModelTurnResult,
    NeutralMessage,
    RefusalError,
    RuntimeState,
    TransitionTelemetry,
    TruncatedError,
)


class ChatCompletionsAdapter(AdapterBase):
    """Base of the adapters that speak Chat Completions through the `openai` SDK;
    `request_settings` checks the profile's `request` section."""

    request_settings: type[ChatCompletionsSettings] = ChatCompletionsSettings

    def __init__(self, client: openai.OpenAI, request: dict[str, Any]) -> None:
        self.client = client
        self.request = self.request_settings.check(
            request, self.descriptor.adapter_id, self.strategy
        )
        self.model: str = self.request["model"]
        self.handling: ChatState = ChatState()

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        state = request.state
        inputs = [*state.payload["pending"], *request.new_messages]
        window = self.window(state, inputs)
        sent = [*state.payload["preamble"], *window.items, *inputs]
        reply = call_chat(self.client, {**self.settings(), "messages": sent})
        text, reasoning, answered = self.answered(reply)
        provisional = self.handling.committed(state, window, inputs, answered, reasoning)
        return turn_result(
            self,
            text=text,
            reasoning=reasoning,
            finish_reason=reply.finish_reason or "stop",
            model=reply.model,
            response_id=reply.response_id,
            usage=reply.usage,
            provisional=provisional,
            sent=sent,
            telemetry=TransitionTelemetry(
                items_sent=len(sent),
                history_before=len(state.payload["messages"]),
                history_after=len(provisional.payload["messages"]),
                items_pruned=window.pruned_items,
            ),
        )

    def answered(self, reply: ChatReply) -> tuple[str, str | None, list[ChatMessage]]:
        """The action, its exact reasoning and the native messages that answer the turn's inputs
        (one plain assistant message here), or the attempt error the reply deserves."""
        text, reasoning = self.accept_reply(reply)
        answer: ChatMessage = {"role": "assistant", "content": text}
        fields = self.handling.reasoning_fields
        if reasoning and fields:
            answer.update(dict.fromkeys(fields, reasoning))
        return text, reasoning, [answer]

    def window(self, state: RuntimeState, inputs: Sequence[NeutralMessage]) -> History:
        """The accepted window the next request carries (a strategy may trim it)."""
        return History(state.payload["messages"], state.accepted_turns)

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
