"""The Messages payload of a continuous conversation: the session's system prompt, the native
messages of the accepted turns, and the inputs buffered since.

`payload["messages"]` holds each accepted user message and each accepted assistant message with
every content block as the provider returned it (readable and empty thinking, signatures,
redacted thinking, compaction blocks, unknown fields), less the two response-only fields the
request schema refuses. After a native compaction it starts with one assistant message holding the
signed compaction block. Accepted-turn boundaries index into it. `payload["system"]` is the
system prompt, fixed by the first turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.providers.kit.state import History
from satchel.providers.kit.unwinding import check_boundaries
from satchel.turns import (
    ConfigurationError,
    NeutralMessage,
    RuntimeState,
    StateError,
    TurnBoundary,
)

Block = dict[str, Any]
NativeMessage = dict[str, Any]
PAYLOAD_KEYS = ("messages", "pending", "system")
NATIVE_ROLES = frozenset({"user", "assistant"})
SUMMARY = "[summary of the earlier turns, by the provider]\n\n"


def user_message(message: NeutralMessage, where: str) -> NativeMessage:
    """A normalized user message as a native one: text as given, text parts as text blocks."""
    content = message["content"]
    if isinstance(content, str):
        return {"role": "user", "content": content}
    blocks = []
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            raise ConfigurationError(
                f"{where}.content[{index}]: anthropic.messages.v1 sends text parts only"
            )
        blocks.append({"type": "text", "text": part.get("text", "")})
    return {"role": "user", "content": blocks}


def split_inputs(
    messages: Sequence[NeutralMessage], where: str
) -> tuple[str | None, list[NativeMessage]]:
    """The system prompt among `messages` (None when there is none) and the user messages."""
    system = None
    users = []
    for index, message in enumerate(messages):
        if message["role"] == "system":
            text = message["content"]
            if not isinstance(text, str):
                raise ConfigurationError(f"{where}[{index}].content: a system prompt is text")
            system = text if system is None else f"{system}\n\n{text}"
        else:
            users.append(user_message(message, f"{where}[{index}]"))
    return system, users


def replayable(blocks: Sequence[Block]) -> list[Block]:
    """The content blocks as the next request sends them: each exactly as returned, less
    `parsed_output` on text blocks and a null `encrypted_content` on compaction blocks."""
    out = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and "parsed_output" in block:
            block = {k: v for k, v in block.items() if k != "parsed_output"}
        elif kind == "compaction" and block.get("encrypted_content", "") is None:
            block = {k: v for k, v in block.items() if k != "encrypted_content"}
        out.append(block)
    return out


class MessagesState:
    """The Messages state handling of a continuous conversation."""

    def empty_payload(self) -> dict[str, Any]:
        return {"system": None, "messages": [], "pending": []}

    def check_payload(self, state: RuntimeState) -> None:
        """Validate a Messages payload and that boundaries fit inside its messages."""
        payload = state.payload
        keys = sorted(payload)
        if keys != list(PAYLOAD_KEYS):
            raise StateError(
                f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, "
                f"got {', '.join(keys)}"
            )
        if payload["system"] is not None and not isinstance(payload["system"], str):
            raise StateError("RuntimeState.payload.system: expected the system prompt or null")
        for key in ("messages", "pending"):
            messages = payload[key]
            if not isinstance(messages, list):
                raise StateError(f"RuntimeState.payload.{key}: expected a list")
            for index, message in enumerate(messages):
                where = f"RuntimeState.payload.{key}[{index}]"
                if not isinstance(message, dict) or message.get("role") not in NATIVE_ROLES:
                    raise StateError(f"{where}: expected a user or assistant message")
                if key == "pending" and message["role"] != "user":
                    raise StateError(f"{where}: expected a user message")
                if not isinstance(message.get("content"), str | list):
                    raise StateError(f"{where}.content: expected text or a list of blocks")
        check_boundaries(state, "messages", "messages")

    def buffered(self, state: RuntimeState, messages: Sequence[NeutralMessage]) -> RuntimeState:
        """`state` with `messages` (user messages) waiting for the next request."""
        system, users = split_inputs(messages, "buffered")
        if system is not None:
            raise ConfigurationError("buffered: a system prompt cannot wait for the next request")
        payload = {**state.payload, "pending": [*state.payload["pending"], *users]}
        return RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns)

    def committed(
        self,
        state: RuntimeState,
        history: History,
        inputs: Sequence[NativeMessage],
        output: Sequence[Block],
        reasoning: str | None,
        system: str | None = None,
    ) -> RuntimeState:
        """The provisional state after an acceptable answer: `history` (the accepted messages
        the request carried), this turn's inputs and the assistant message of the `output`
        blocks."""
        start = len(history.items)
        messages = [*history.items, *inputs, {"role": "assistant", "content": output}]
        shown = tuple(readable(message) for message in messages[start:])
        boundary = TurnBoundary(start, len(messages), shown, reasoning)
        payload = {"system": system, "messages": messages, "pending": []}
        return RuntimeState(state.adapter_id, state.strategy, payload, (*history.turns, boundary))

    def readable(self, item: NativeMessage) -> NeutralMessage:
        return readable(item)

    def descriptor(self, index: int, item: NativeMessage) -> dict[str, Any]:
        """A message as request records describe it: position, role and its blocks' types."""
        content = item["content"]
        kinds = ["text"] if isinstance(content, str) else [str(b.get("type")) for b in content]
        return {"index": index, "role": item["role"], "blocks": kinds}


def readable(message: NativeMessage) -> NeutralMessage:
    """The readable projection of one native message: its text, thinking by its readable text,
    a compaction block by its summary. Signatures and redacted thinking never appear."""
    content = message["content"]
    if isinstance(content, str):
        return {"role": message["role"], "content": content}
    texts = []
    thoughts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "thinking" and block.get("thinking"):
            thoughts.append(str(block["thinking"]))
        elif kind == "compaction":
            texts.append(SUMMARY + str(block.get("content") or ""))
    shown: NeutralMessage = {"role": message["role"], "content": "".join(texts)}
    if thoughts:
        shown["reasoning"] = "\n\n".join(thoughts)
    return shown


def shown(messages: Sequence[NativeMessage], turns: Sequence[TurnBoundary]) -> list[NeutralMessage]:
    """The readable projection of `messages`, taken from the accepted turns that already hold
    it (each boundary keeps its own), computed only for messages outside every turn."""
    out: list[NeutralMessage | None] = [None] * len(messages)
    for turn in turns:
        out[turn.start_item : turn.end_item] = turn.messages
    return [readable(messages[i]) if m is None else m for i, m in enumerate(out)]
