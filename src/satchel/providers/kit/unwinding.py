"""Unwind and rebuild a payload of native items: the harness-summary capability's two moves,
shared by every adapter whose accepted turns index one list of items (`key` of the payload)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.turns import RuntimeState, StateError, UnwoundTurn


def check_boundaries(state: RuntimeState, key: str, noun: str) -> None:
    """Refuse a state whose latest accepted turn ends past the `noun` of `payload[key]`."""
    turns = state.accepted_turns
    if turns and turns[-1].end_item > len(state.payload[key]):
        raise StateError(
            f"RuntimeState.accepted_turns[{len(turns) - 1}]: ends at {turns[-1].end_item}, "
            f"past the {len(state.payload[key])} {noun}"
        )


def unwind_latest(state: RuntimeState, key: str) -> tuple[RuntimeState, UnwoundTurn]:
    """Take the latest accepted turn's exact items off `payload[key]`; the rest stays."""
    if not state.accepted_turns:
        raise StateError("RuntimeState.accepted_turns: no accepted turn left to unwind")
    last = state.accepted_turns[-1]
    items = state.payload[key]
    unwound = UnwoundTurn(tuple(items[last.start_item : last.end_item]), last)
    payload = {**state.payload, key: items[: last.start_item]}
    shorter = RuntimeState(state.adapter_id, state.strategy, payload, state.accepted_turns[:-1])
    return shorter, unwound


def rebuilt(
    state: RuntimeState, key: str, bridge: dict[str, Any], tail: Sequence[UnwoundTurn]
) -> RuntimeState:
    """A fresh `payload[key]`: the bridge item, then `tail`'s exact items in order, with their
    boundaries remapped; every other part of the payload (pending inputs) kept."""
    items: list[Any] = [bridge]
    turns = []
    for turn in tail:
        turns.append(turn.boundary.shifted(len(items) - turn.boundary.start_item))
        items.extend(turn.items)
    payload = {**state.payload, key: items}
    return RuntimeState(state.adapter_id, state.strategy, payload, tuple(turns))
