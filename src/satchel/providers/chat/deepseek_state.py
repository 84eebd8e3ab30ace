"""The DeepSeek payload: the Chat Completions one, with the adapter-owned answer tool's calls and
their fixed results.

Every request offers one tool, `submit_answer`; each accepted assistant message keeps its exact
`reasoning_content` and its one call, followed by the call's fixed tool result, as DeepSeek
requires after a tool call.
"""

from __future__ import annotations

from typing import Any

from satchel.providers.chat.state import PAYLOAD_KEYS, ChatMessage, ChatState, check_keys
from satchel.providers.kit.unwinding import check_boundaries
from satchel.turns import NeutralMessage, RuntimeState, StateError

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


class DeepSeekState(ChatState):
    """The Chat Completions state handling, with tool calls and tool results carried."""

    def __init__(self) -> None:
        super().__init__((REASONING_FIELD,))

    def check_payload(self, state: RuntimeState) -> None:
        """Validate a DeepSeek payload: chat messages, tool results and assistant tool calls
        only, and boundaries inside the messages."""
        check_keys(state)
        payload = state.payload
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
                        f"{where}.tool_call_id: does not answer a call of the assistant "
                        "message before"
                    )
                if item["role"] != "tool":
                    answered = {call["id"] for call in item.get("tool_calls", [])}
        check_boundaries(state, "messages", "messages")

    def readable(self, item: ChatMessage) -> NeutralMessage:
        """The chat projection of one message, plus its tool call or call id."""
        out = super().readable(item)
        for name in ("tool_calls", "tool_call_id"):
            if name in item:
                out[name] = item[name]
        return out


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
