"""The harness-summary capability of the Chat Completions adapters that carry reasoning.

Summarize the preamble and the accepted messages (never the pending inputs) in plain text,
unwind the latest accepted turn, and rebuild behind a user bridge message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.providers.chat.adapter import ChatCompletionsAdapter
from satchel.providers.chat.wire import call_chat
from satchel.providers.kit.unwinding import rebuilt, unwind_latest
from satchel.turns import InvalidResponseError, RuntimeState, SummaryReply, UnwoundTurn

ANSWER_FORMAT_KEY = "response_format"  # shapes an action's answer; a summary is prose


class ChatSummaries(ChatCompletionsAdapter):
    """A Chat Completions adapter with harness summaries; `summary_max_tokens` caps a summary,
    which is asked for without the profile's `response_format` (that shapes actions)."""

    summary_max_tokens: int | None = None

    def native_items(self, state: RuntimeState) -> int:
        return len(state.payload["messages"])

    def summarize(self, state: RuntimeState, prompt: str) -> SummaryReply:
        payload = state.payload
        messages = [*payload["preamble"], *payload["messages"], {"role": "user", "content": prompt}]
        body: dict[str, Any] = {
            **{key: value for key, value in self.request.items() if key != ANSWER_FORMAT_KEY},
            "messages": messages,
        }
        if self.summary_max_tokens is not None:
            key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
            body[key] = self.summary_max_tokens
        reply = call_chat(self.client, body)
        if reply.usage is None:
            raise InvalidResponseError("the summary answer reported no usage")
        text = reply.text.strip()
        complete = reply.finish_reason == "stop" and not reply.tool_calls and not reply.refusal
        return SummaryReply(text, reply.usage, complete and bool(text))

    def unwind_latest_turn(self, state: RuntimeState) -> tuple[RuntimeState, UnwoundTurn]:
        return unwind_latest(state, "messages")

    def rebuild(
        self, state: RuntimeState, bridge: str, tail: Sequence[UnwoundTurn]
    ) -> RuntimeState:
        return rebuilt(state, "messages", {"role": "user", "content": bridge}, tail)
