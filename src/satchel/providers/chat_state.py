"""The Chat Completions payload: a pinned preamble, the accepted window, buffered inputs.

Native items are the chat messages of `payload["messages"]`; accepted-turn boundaries index into
it. System messages sent before the first accepted turn form the preamble, which is never trimmed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from satchel.providers.unwinding import check_boundaries
from satchel.turns import Message, RuntimeState, StateError, TurnBoundary

PAYLOAD_KEYS = ("preamble", "messages", "pending")
CHAT_ROLES = frozenset({"system", "user", "assistant"})


def empty_payload() -> dict[str, Any]:
    return {"preamble": [], "messages": [], "pending": []}


def check_payload(state: RuntimeState, reasoning_fields: Sequence[str]) -> None:
    """Validate a Chat Completions payload and that boundaries fit inside its messages."""
    payload = state.payload
    keys = sorted(payload)
    if keys != sorted(PAYLOAD_KEYS):
        raise StateError(
            f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, got {', '.join(keys)}"
        )
    allowed = {"role", "content", "name", *reasoning_fields}
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


def buffered(state: RuntimeState, messages: Sequence[Message]) -> RuntimeState:
    """`state` with `messages` appended to the inputs waiting for the next request."""
    payload = {**state.payload, "pending": [*state.payload["pending"], *map(dict, messages)]}
    return RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns)


def message_tokens(message: Message) -> int:
    """The estimate `ceil(chars / 3.5) + 4` tokens for one message."""
    chars = 0
    for key, value in message.items():
        if key == "role":
            continue
        chars += len(value) if isinstance(value, str) else len(json.dumps(value))
    return math.ceil(chars / 3.5) + 4


@dataclass(frozen=True, slots=True)
class Window:
    """The accepted window after any trim, as the next request will carry it."""

    messages: list[Message]
    turns: tuple[TurnBoundary, ...]
    pruned_items: int = 0


def trim_window(
    state: RuntimeState,
    inputs: Sequence[Message],
    limit_tokens: int,
    target_tokens: int,
) -> Window:
    """Hold the window unless the request passes `limit_tokens`; then leave out the fewest
    oldest complete turns that bring it to `target_tokens` (never the preamble or the inputs)."""
    messages: list[Message] = state.payload["messages"]
    turns = state.accepted_turns
    sizes = [message_tokens(m) for m in messages]
    fixed = sum(message_tokens(m) for m in (*state.payload["preamble"], *inputs))
    total = fixed + sum(sizes)
    if total <= limit_tokens or not turns:
        return Window(messages, turns)
    dropped = 0
    cut = 0
    while dropped < len(turns) and total > target_tokens:
        end = turns[dropped].end_item
        total -= sum(sizes[cut:end])
        cut = end
        dropped += 1
    kept = tuple(turn.shifted(-cut) for turn in turns[dropped:])
    return Window(messages[cut:], kept, cut)


def committed(
    state: RuntimeState,
    window: Window,
    inputs: Sequence[Message],
    answered: Sequence[Message],
    shown: Callable[[Message], Message],
    reasoning_summary: str | None,
) -> RuntimeState:
    """The provisional state after the turn: the window, this turn's inputs and the messages
    that answer them (`answered`); `shown`: each message's readable projection."""
    preamble: list[Message] = state.payload["preamble"]
    turn_inputs = list(inputs)
    if not state.accepted_turns and not state.payload["messages"] and not preamble:
        lead = 0
        while lead < len(turn_inputs) and turn_inputs[lead]["role"] == "system":
            lead += 1
        preamble, turn_inputs = turn_inputs[:lead], turn_inputs[lead:]
    start = len(window.messages)
    messages = [*window.messages, *turn_inputs, *answered]
    boundary = TurnBoundary(
        start, len(messages), tuple(map(shown, messages[start:])), reasoning_summary
    )
    payload = {"preamble": list(preamble), "messages": messages, "pending": []}
    return RuntimeState(state.adapter_id, state.strategy, payload, (*window.turns, boundary))


def readable(message: Message, reasoning_fields: Sequence[str]) -> Message:
    """The readable projection of one chat message (reasoning shown once, under `reasoning`)."""
    out: Message = {"role": message["role"], "content": message["content"]}
    for name in reasoning_fields:
        if name in message:
            out["reasoning"] = message[name]
            break
    return out
