"""The Responses payload of a continuous conversation: native input items and buffered inputs.

`payload["items"]` holds every accepted user input and every native output item, in order, as the
next request sends them; accepted-turn boundaries index into it. `payload["pending"]` holds inputs
buffered since the last accepted turn (a reset observation), sent before the turn's new ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.providers.kit.state import History
from satchel.providers.kit.unwinding import check_boundaries
from satchel.turns import NeutralMessage, RuntimeState, StateError, TurnBoundary

Item = dict[str, Any]
PAYLOAD_KEYS = ("items", "pending")
INPUT_ROLES = frozenset({"system", "developer", "user"})
# Output fields the input schema refuses, by item type: the only fields replay leaves out.
RESPONSE_ONLY = {"reasoning": "status", "compaction": "created_by"}
COMPACTED = "[earlier turns, compacted by the provider: opaque]"


def input_item(message: NeutralMessage) -> Item:
    """A chat-style input message as a Responses input item."""
    return {"role": message["role"], "content": message["content"]}


def replayable(output: Sequence[Item]) -> list[Item]:
    """The output items as the next request sends them: each exactly as returned, less the one
    response-only field of reasoning and compaction items."""
    out = []
    for item in output:
        drop = RESPONSE_ONLY.get(str(item.get("type")))
        out.append({k: v for k, v in item.items() if k != drop} if drop else dict(item))
    return out


def latest_compaction(items: Sequence[Item]) -> int:
    """The index of the latest compaction item, or -1 when there is none."""
    for index in range(len(items) - 1, -1, -1):
        if items[index].get("type") == "compaction":
            return index
    return -1


class ResponsesState:
    """The Responses state handling of a continuous conversation."""

    def empty_payload(self) -> dict[str, Any]:
        return {"items": [], "pending": []}

    def check_payload(self, state: RuntimeState) -> None:
        """Validate a Responses payload and that boundaries fit inside its items."""
        payload = state.payload
        keys = sorted(payload)
        if keys != sorted(PAYLOAD_KEYS):
            raise StateError(
                f"RuntimeState.payload: expected keys {', '.join(PAYLOAD_KEYS)}, "
                f"got {', '.join(keys)}"
            )
        for key in PAYLOAD_KEYS:
            items = payload[key]
            if not isinstance(items, list):
                raise StateError(f"RuntimeState.payload.{key}: expected a list")
            for index, item in enumerate(items):
                where = f"RuntimeState.payload.{key}[{index}]"
                if not isinstance(item, dict):
                    raise StateError(f"{where}: expected an input item object")
                if key == "pending" and item.get("role") not in INPUT_ROLES:
                    raise StateError(f"{where}: expected a system, developer or user input")
                if key == "items" and "role" not in item and "type" not in item:
                    raise StateError(f"{where}: expected an item with a type or a role")
        check_boundaries(state, "items", "items")

    def buffered(self, state: RuntimeState, messages: Sequence[NeutralMessage]) -> RuntimeState:
        """`state` with `messages` waiting, as input items, for the next request."""
        pending = [*state.payload["pending"], *map(input_item, messages)]
        payload = {**state.payload, "pending": pending}
        return RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns)

    def committed(
        self,
        state: RuntimeState,
        history: History,
        inputs: Sequence[Item],
        output: Sequence[Item],
        reasoning: str | None,
        system: str | None = None,
    ) -> RuntimeState:
        """The provisional state after a completed response: `history` (the accepted items the
        request carried) with this turn's inputs and output. When the output holds a compaction
        item, the latest one carries everything before it: the items start there, and no
        earlier turn is left to unwind."""
        start = len(history.items)
        items = [*history.items, *inputs, *output]
        shown = tuple(readable(item) for item in items[start:])
        boundary = TurnBoundary(start, len(items), shown, reasoning)
        cut = latest_compaction(items)
        if cut >= start:
            kept = items[cut:]
            boundary = TurnBoundary(0, len(kept), tuple(readable(item) for item in kept), reasoning)
            return RuntimeState(
                state.adapter_id, state.strategy, {"items": kept, "pending": []}, (boundary,)
            )
        payload = {"items": items, "pending": []}
        return RuntimeState(state.adapter_id, state.strategy, payload, (*history.turns, boundary))

    def readable(self, item: Item) -> NeutralMessage:
        return readable(item)

    def descriptor(self, index: int, item: Item) -> dict[str, Any]:
        """An item as request records describe it: position, type, role and id; never a body."""
        out: dict[str, Any] = {"index": index, "type": str(item.get("type") or "message")}
        if "role" in item:
            out["role"] = str(item["role"])
        if isinstance(item.get("id"), str):
            out["id"] = item["id"]
        return out


def readable(item: Item) -> NeutralMessage:
    """The readable projection of one item: its role and text; reasoning by its summary; a
    compaction item by a placeholder. Opaque fields never appear."""
    kind = item.get("type")
    if kind == "reasoning":
        summary = "\n\n".join(str(part.get("text") or "") for part in item.get("summary") or ())
        return {"role": "assistant", "content": "", "reasoning": summary}
    if kind == "compaction":
        return {"role": "system", "content": COMPACTED}
    if "role" in item:
        return {"role": str(item["role"]), "content": _text(item.get("content"))}
    return {"role": "assistant", "content": f"[{kind} item]"}


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or part.get("refusal") or "")
            for part in content
            if isinstance(part, dict)
        )
    return ""
