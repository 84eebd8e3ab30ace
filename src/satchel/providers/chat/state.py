"""The Chat Completions payload: a pinned preamble, the accepted window, buffered inputs.

Native items are the chat messages of `payload["messages"]`; accepted-turn boundaries index into
it. System messages sent before the first accepted turn form the preamble, which is never trimmed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from satchel.providers.kit.state import History
from satchel.providers.kit.unwinding import check_boundaries
from satchel.turns import NeutralMessage, RuntimeState, StateError, TurnBoundary

PAYLOAD_KEYS = ("preamble", "messages", "pending")
CHAT_ROLES = frozenset({"system", "user", "assistant"})
ChatMessage = dict[str, Any]
"""A native chat message, as the Chat Completions API takes and replays it."""


class ChatState:
    """The Chat Completions state handling; `reasoning_fields`: the names an accepted answer's
    reasoning is replayed under (none for plain replies)."""

    def __init__(self, reasoning_fields: Sequence[str] = ()) -> None:
        self.reasoning_fields = tuple(reasoning_fields)

    def empty_payload(self) -> dict[str, Any]:
        return {"preamble": [], "messages": [], "pending": []}

    def check_payload(self, state: RuntimeState) -> None:
        """Validate a Chat Completions payload and that boundaries fit inside its messages."""
        check_keys(state)
        allowed = {"role", "content", "name", *self.reasoning_fields}
        payload = state.payload
        for key in PAYLOAD_KEYS:
            items = payload[key]
            if not isinstance(items, list):
                raise StateError(f"RuntimeState.payload.{key}: expected a list")
            for index, item in enumerate(items):
                where = f"RuntimeState.payload.{key}[{index}]"
                if not isinstance(item, dict) or item.get("role") not in CHAT_ROLES:
                    raise StateError(
                        f"{where}: expected a chat message with a system/user/assistant role"
                    )
                unknown = sorted(set(item) - allowed)
                if unknown:
                    raise StateError(f"{where}.{unknown[0]}: field not carried by this adapter")
        check_boundaries(state, "messages", "messages")

    def buffered(self, state: RuntimeState, messages: Sequence[NeutralMessage]) -> RuntimeState:
        """`state` with `messages` appended to the inputs waiting for the next request."""
        pending = [*state.payload["pending"], *map(dict, messages)]
        payload = {**state.payload, "pending": pending}
        return RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns)

    def committed(
        self,
        state: RuntimeState,
        history: History,
        inputs: Sequence[NeutralMessage],
        output: Sequence[ChatMessage],
        reasoning: str | None,
        system: str | None = None,
    ) -> RuntimeState:
        """The provisional state after the turn: the window, this turn's inputs and the messages
        that answer them (`output`). The system messages that open a session's first request
        become its preamble."""
        preamble: list[ChatMessage] = state.payload["preamble"]
        turn_inputs = list(inputs)
        if not state.accepted_turns and not state.payload["messages"] and not preamble:
            lead = 0
            while lead < len(turn_inputs) and turn_inputs[lead]["role"] == "system":
                lead += 1
            preamble, turn_inputs = turn_inputs[:lead], turn_inputs[lead:]
        start = len(history.items)
        messages = [*history.items, *turn_inputs, *output]
        boundary = TurnBoundary(
            start, len(messages), tuple(map(self.readable, messages[start:])), reasoning
        )
        payload = {"preamble": list(preamble), "messages": messages, "pending": []}
        return RuntimeState(state.adapter_id, state.strategy, payload, (*history.turns, boundary))

    def readable(self, item: ChatMessage) -> NeutralMessage:
        """The readable projection of one chat message (reasoning shown once, under
        `reasoning`)."""
        out: NeutralMessage = {"role": item["role"], "content": item["content"]}
        for name in self.reasoning_fields:
            if name in item:
                out["reasoning"] = item[name]
                break
        return out

    def descriptor(self, index: int, item: ChatMessage) -> dict[str, Any]:
        """A message as request records describe it: position, role and its parts' types."""
        content = item["content"]
        kinds = (
            ["text"]
            if isinstance(content, str)
            else [str(part.get("type", "unknown")) for part in content if isinstance(part, dict)]
        )
        return {"index": index, "type": "message", "role": item["role"], "content": kinds}


def check_keys(state: RuntimeState) -> None:
    """Refuse a payload without exactly the Chat Completions keys."""
    payload = state.payload
    keys = sorted(payload)
    if keys != sorted(PAYLOAD_KEYS):
        raise StateError(
            f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, got {', '.join(keys)}"
        )


def message_tokens(message: ChatMessage) -> int:
    """The estimate `ceil(chars / 3.5) + 4` tokens for one message."""
    chars = 0
    for key, value in message.items():
        if key == "role":
            continue
        chars += len(value) if isinstance(value, str) else len(json.dumps(value))
    return math.ceil(chars / 3.5) + 4


def trim_window(
    state: RuntimeState,
    inputs: Sequence[NeutralMessage],
    limit_tokens: int,
    target_tokens: int,
    scale: float = 1.0,
) -> History:
    """Hold the window unless the request passes `limit_tokens`; then leave out the fewest
    oldest complete turns that bring it to `target_tokens` (never the preamble or the inputs).
    Each message's estimate is multiplied by `scale` (a tokenizer the estimate undercounts)."""
    messages: list[ChatMessage] = state.payload["messages"]
    turns = state.accepted_turns
    sizes = [math.ceil(message_tokens(m) * scale) for m in messages]
    fixed = math.ceil(sum(message_tokens(m) for m in (*state.payload["preamble"], *inputs)) * scale)
    total = fixed + sum(sizes)
    if total <= limit_tokens or not turns:
        return History(messages, turns)
    dropped = 0
    cut = 0
    while dropped < len(turns) and total > target_tokens:
        end = turns[dropped].end_item
        total -= sum(sizes[cut:end])
        cut = end
        dropped += 1
    kept = tuple(turn.shifted(-cut) for turn in turns[dropped:])
    return History(messages[cut:], kept, cut)
