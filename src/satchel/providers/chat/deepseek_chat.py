"""`deepseek.chat_completions.v1`: continuous conversation with DeepSeek in thinking mode.

Every request offers one adapter-owned tool, `submit_answer`; an answer is accepted only as exactly
one call to it with a non-empty `answer`. The accepted assistant message (exact `reasoning_content`
and tool call) and its fixed tool result are replayed on every later request, as DeepSeek requires
after a tool call. Supports harness summary compaction: summarize in plain text without the tool,
unwind the latest accepted turn, rebuild behind a bridge message.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from satchel.providers.chat.deepseek_state import (
    ANSWER_TOOL,
    ANSWER_TOOL_NAME,
    REASONING_FIELD,
    TOOL_RESULT,
    DeepSeekState,
)
from satchel.providers.chat.settings import DeepSeekSettings
from satchel.providers.chat.state import ChatMessage
from satchel.providers.chat.summary import ChatSummaries
from satchel.providers.chat.wire import ChatReply, ToolCall
from satchel.providers.kit.errors import reply_error
from satchel.turns import (
    AdapterDescriptor,
    InvalidResponseError,
    RefusalError,
    TruncatedError,
)


class DeepSeekChatAdapter(ChatSummaries):
    """DeepSeek thinking mode with one owned answer tool and exact reasoning replay."""

    descriptor = AdapterDescriptor(
        adapter_id="deepseek.chat_completions.v1",
        provider="deepseek",
        api_surface="chat.completions",
        implementation_path="src/satchel/providers/chat/deepseek_chat.py",
        version="1.0.0",
        strategies=("continuous_conversation",),
        review_status="unreviewed",
        compaction=("none", "harness_summary"),
    )
    strategy = "continuous_conversation"
    request_settings = DeepSeekSettings

    def __init__(
        self,
        client: openai.OpenAI,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        super().__init__(client, request)
        self.handling = DeepSeekState()
        self.summary_max_tokens = summary_max_tokens

    def settings(self) -> dict[str, Any]:
        return {**self.request, "tools": [ANSWER_TOOL]}

    def answered(self, reply: ChatReply) -> tuple[str, str | None, list[ChatMessage]]:
        """The answer tool's `answer`, the exact reasoning, and the native messages: the
        assistant message as it came (reasoning and call), then the call's fixed result."""
        call, text = self.accept_call(reply)
        reasoning = reply.reasoning.get(REASONING_FIELD)
        answer: ChatMessage = {"role": "assistant", "content": reply.text}
        if reasoning is not None:
            answer[REASONING_FIELD] = reasoning
        answer["tool_calls"] = [call.native()]
        result: ChatMessage = {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT}
        return text, reasoning, [answer, result]

    def accept_call(self, reply: ChatReply) -> tuple[ToolCall, str]:
        """Return the one call to the answer tool and its answer, or raise the attempt error."""
        if reply.usage is None:
            raise reply_error(
                InvalidResponseError,
                "the provider reported no usage; every request must be accounted for",
                reply,
            )
        if reply.refusal or reply.finish_reason == "content_filter":
            raise reply_error(RefusalError, "the model refused", reply)
        if reply.finish_reason == "length":
            raise reply_error(TruncatedError, "the answer hit the output limit", reply)
        if reply.finish_reason != "tool_calls":
            raise reply_error(
                InvalidResponseError,
                f"the model did not call {ANSWER_TOOL_NAME} "
                f"(finish reason {reply.finish_reason!r})",
                reply,
            )
        if reply.conflicting_calls:
            raise reply_error(
                InvalidResponseError,
                "the stream sent conflicting ids, types or names for one tool call",
                reply,
            )
        calls = reply.calls
        if len(calls) != 1:
            raise reply_error(
                InvalidResponseError,
                f"expected exactly one call to {ANSWER_TOOL_NAME}, got {len(calls)} tool calls",
                reply,
            )
        call = calls[0]
        if call.name != ANSWER_TOOL_NAME or call.type not in (None, "function"):
            raise reply_error(
                InvalidResponseError,
                f"the model called a tool other than {ANSWER_TOOL_NAME}",
                reply,
            )
        if not call.id:
            raise reply_error(InvalidResponseError, "the tool call has no id", reply)
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = None
        answer = arguments.get("answer") if isinstance(arguments, dict) else None
        if not isinstance(answer, str) or not answer.strip() or len(arguments) != 1:
            raise reply_error(
                InvalidResponseError,
                f"the {ANSWER_TOOL_NAME} arguments must be a JSON object with one non-empty "
                "string `answer`",
                reply,
            )
        return call, answer
