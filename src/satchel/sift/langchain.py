"""LangChain and LangGraph: sift a list of LangChain messages the way `trim_messages` trims one.

`LangChainSift` keeps the unchanged messages as the very objects it was given, turns receipts into
`AIMessage`s and bounded results into copies of their `ToolMessage`, and appends the note last.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableLambda

from satchel.sift.manager import ContextSift
from satchel.sift.messages import ChatMessage
from satchel.sift.result import SiftResult


class LangChainSift:
    """Applies one `ContextSift` to LangChain message lists, call after call."""

    def __init__(
        self, sift: ContextSift, *, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        self.sift = sift
        self.tools = tools
        self._converted: dict[int, tuple[BaseMessage, ChatMessage]] = {}

    def begin_run(self, messages: Sequence[BaseMessage]) -> str:
        """Record the run's task: the newest human message."""
        return self.sift.begin_run(self.to_openai(messages))

    def __call__(
        self, messages: Sequence[BaseMessage], *, note: str | None = None
    ) -> list[BaseMessage]:
        """The messages to send for this call."""
        history = self.to_openai(messages)
        result = self.sift.sift(history, tools=self.tools, note=note)
        return from_sifted(messages, history, result)

    def runnable(self) -> RunnableLambda[Sequence[BaseMessage], list[BaseMessage]]:
        """The sift as a runnable, to put before a chat model in a chain or graph node."""
        return RunnableLambda(lambda messages: self(messages), name="context_sift")

    def to_openai(self, messages: Sequence[BaseMessage]) -> list[ChatMessage]:
        """OpenAI-style dicts for `messages`, the same dict for the same message on every call."""
        converted: dict[int, tuple[BaseMessage, ChatMessage]] = {}
        history: list[ChatMessage] = []
        for position, message in enumerate(messages):
            hit = self._converted.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, to_openai_message(message, position))
            converted[id(message)] = hit
            history.append(hit[1])
        self._converted = converted
        return history


def sift_messages(
    messages: Sequence[BaseMessage],
    sift: ContextSift,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    note: str | None = None,
) -> list[BaseMessage]:
    """One sift of LangChain messages, like `trim_messages`; keep a `LangChainSift` across calls
    to skip converting the history again."""
    return LangChainSift(sift, tools=tools)(messages, note=note)


def to_openai_message(message: BaseMessage, position: int) -> ChatMessage:
    """One LangChain message as an OpenAI-style dict; its `id` is kept when it has one."""
    converted: ChatMessage
    if isinstance(message, SystemMessage):
        converted = {"role": "system", "content": message.content}
    elif isinstance(message, HumanMessage):
        converted = {"role": "user", "content": message.content}
    elif isinstance(message, AIMessage):
        converted = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            converted["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["args"], sort_keys=True, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
    elif isinstance(message, ToolMessage):
        converted = {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content,
            "is_error": message.status == "error",
        }
    else:
        raise ValueError(
            f"message {position} is a {type(message).__name__}; the sift reads system, human, "
            "AI and tool messages"
        )
    if message.id:
        converted["id"] = message.id
    return converted


def from_sifted(
    messages: Sequence[BaseMessage], history: Sequence[ChatMessage], result: SiftResult
) -> list[BaseMessage]:
    """LangChain messages for a sift result over `history`, the dicts made from `messages`."""
    out: list[BaseMessage] = []
    for sifted, source in zip(result.messages, result.sources, strict=True):
        if source is None:
            out.append(HumanMessage(content=sifted["content"]))
        elif sifted is history[source]:
            out.append(messages[source])
        elif sifted["role"] == "assistant":
            out.append(AIMessage(content=sifted["content"]))
        else:
            out.append(messages[source].model_copy(update={"content": sifted["content"]}))
    return out
