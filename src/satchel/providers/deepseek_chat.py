"""`deepseek.chat_completions.v1`: continuous conversation with DeepSeek in thinking mode.

Every request offers one adapter-owned tool, `submit_answer`; an answer is accepted only as exactly
one call to it with a non-empty `answer`. The accepted assistant message (exact `reasoning_content`
and tool call) and its fixed tool result are replayed on every later request, as DeepSeek requires
after a tool call. Supports harness summary compaction: summarize in plain text without the tool,
unwind the latest accepted turn, rebuild behind a bridge message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import openai

from satchel.providers.chat_adapter import FORBIDDEN_REQUEST_KEYS
from satchel.providers.chat_state import PAYLOAD_KEYS, readable
from satchel.providers.chat_summary import ChatSummaries
from satchel.providers.chat_wire import ChatReply, ToolCall
from satchel.providers.openai_sdk import reply_error
from satchel.providers.unwinding import check_boundaries
from satchel.turns import (
    AdapterDescriptor,
    ConfigurationError,
    InvalidResponseError,
    Message,
    RefusalError,
    RuntimeState,
    StateError,
    TruncatedError,
)

ANSWER_TOOL_NAME = "submit_answer"
ANSWER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ANSWER_TOOL_NAME,
        "description": "Submit your answer for this turn. Call this exactly once, with the whole "
        "answer as a string in `answer`; nothing else you write is read.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The answer."}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    },
}
TOOL_RESULT = "received"
THINKING = {"type": "enabled"}
REASONING_FIELD = "reasoning_content"
ROLE_FIELDS = {
    "system": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", REASONING_FIELD, "tool_calls"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}


def check_deepseek_payload(state: RuntimeState) -> None:
    """Validate a DeepSeek payload: chat messages, tool results and assistant tool calls only,
    and boundaries inside the messages."""
    payload = state.payload
    keys = sorted(payload)
    if keys != sorted(PAYLOAD_KEYS):
        raise StateError(
            f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, got {', '.join(keys)}"
        )
    for key in PAYLOAD_KEYS:
        items = payload[key]
        if not isinstance(items, list):
            raise StateError(f"RuntimeState.payload.{key}: expected a list")
        answered: set[str] = set()  # the calls the latest assistant message made
        for index, item in enumerate(items):
            where = f"RuntimeState.payload.{key}[{index}]"
            _check_message(where, item)
            if item["role"] == "tool" and item["tool_call_id"] not in answered:
                raise StateError(
                    f"{where}.tool_call_id: does not answer a call of the assistant message before"
                )
            if item["role"] != "tool":
                answered = {call["id"] for call in item.get("tool_calls", [])}
    check_boundaries(state, "messages", "messages")


def _check_message(where: str, item: object) -> None:
    if not isinstance(item, dict) or item.get("role") not in ROLE_FIELDS:
        raise StateError(f"{where}: expected a chat message with a system/user/assistant/tool role")
    unknown = sorted(set(item) - ROLE_FIELDS[item["role"]])
    if unknown:
        raise StateError(f"{where}.{unknown[0]}: field not carried by this adapter")
    if item["role"] == "tool" and not isinstance(item.get("tool_call_id"), str):
        raise StateError(f"{where}.tool_call_id: a tool result needs the id of its call")
    calls = item.get("tool_calls", [])
    if not isinstance(calls, list):
        raise StateError(f"{where}.tool_calls: expected a list")
    for index, call in enumerate(calls):
        path = f"{where}.tool_calls[{index}]"
        if not isinstance(call, dict) or sorted(call) != ["function", "id", "type"]:
            raise StateError(f"{path}: expected exactly id, type and function")
        function = call["function"]
        if not isinstance(function, dict) or sorted(function) != ["arguments", "name"]:
            raise StateError(f"{path}.function: expected exactly name and arguments")
        if not all(isinstance(v, str) for v in (call["id"], call["type"], *function.values())):
            raise StateError(f"{path}: expected string id, type, name and arguments")


def shown(message: Message) -> Message:
    """The readable projection of one message: `readable`, plus its tool call or call id."""
    out = readable(message, (REASONING_FIELD,))
    for name in ("tool_calls", "tool_call_id"):
        if name in message:
            out[name] = message[name]
    return out


class DeepSeekChatAdapter(ChatSummaries):
    """DeepSeek thinking mode with one owned answer tool and exact reasoning replay."""

    descriptor = AdapterDescriptor(
        adapter_id="deepseek.chat_completions.v1",
        provider="deepseek",
        api_surface="chat.completions",
        implementation_path="src/satchel/providers/deepseek_chat.py",
        version="1.0.0",
        strategies=("continuous_conversation",),
        review_status="unreviewed",
        compaction=("none", "harness_summary"),
    )
    strategy = "continuous_conversation"

    def __init__(
        self,
        client: openai.OpenAI,
        request: dict[str, Any],
        *,
        summary_max_tokens: int | None = None,
    ) -> None:
        super().__init__(client, request)
        self.reasoning_fields = (REASONING_FIELD,)
        self.summary_max_tokens = summary_max_tokens

    @classmethod
    def validate_request(cls, request: dict[str, Any]) -> dict[str, Any]:
        """The base checks, then thinking mode: absent means enabled, anything else is refused."""
        extra = request.get("extra_body", {}) if isinstance(request, Mapping) else {}
        for key in FORBIDDEN_REQUEST_KEYS:
            for where, settings in (("request", request), ("request.extra_body", extra)):
                if isinstance(settings, Mapping) and key in settings:
                    raise ConfigurationError(
                        f"{where}.{key}: not allowed; {cls.descriptor.adapter_id} builds the "
                        f"messages and owns the one tool ({ANSWER_TOOL_NAME}) it sends"
                    )
        settings = super().validate_request(request)
        extra = dict(settings.get("extra_body") or {})
        if extra.get("thinking", THINKING) != THINKING:
            raise ConfigurationError(
                f"request.extra_body.thinking: must be {THINKING!r} (or left out); "
                f"{cls.descriptor.adapter_id} replays reasoning in thinking mode only"
            )
        settings["extra_body"] = {**extra, "thinking": dict(THINKING)}
        return settings

    def check_state(self, state: RuntimeState, since: RuntimeState | None = None) -> None:
        state.validate(since)
        state.check_owner(self.descriptor.adapter_id, (self.strategy,))
        check_deepseek_payload(state)

    def settings(self) -> dict[str, Any]:
        return {**self.request, "tools": [ANSWER_TOOL]}

    def answered(self, reply: ChatReply) -> tuple[str, str | None, list[Message]]:
        """The answer tool's `answer`, the exact reasoning, and the native messages: the
        assistant message as it came (reasoning and call), then the call's fixed result."""
        call, text = self.accept_call(reply)
        reasoning = reply.reasoning.get(REASONING_FIELD)
        answer: Message = {"role": "assistant", "content": reply.text}
        if reasoning is not None:
            answer[REASONING_FIELD] = reasoning
        answer["tool_calls"] = [call.native()]
        result: Message = {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT}
        return text, reasoning, [answer, result]

    def readable(self, message: Message) -> Message:
        return shown(message)

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
