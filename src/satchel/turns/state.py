"""`RuntimeState`: the JSON envelope of one accepted conversation, validated on every use."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from satchel.turns.errors import StateError
from satchel.turns.messages import NeutralMessage

SCHEMA_VERSION = 1
STRATEGIES = ("manual_rolling", "previous_response_id", "continuous_conversation")


@dataclass(frozen=True, slots=True)
class TurnBoundary:
    """One accepted turn: native items `[start_item, end_item)` plus its readable projection."""

    start_item: int
    end_item: int
    messages: tuple[NeutralMessage, ...] = ()
    reasoning_summary: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "start_item": self.start_item,
            "end_item": self.end_item,
            "messages": list(self.messages),
            "reasoning_summary": self.reasoning_summary,
        }

    def shifted(self, offset: int) -> TurnBoundary:
        return TurnBoundary(
            self.start_item + offset, self.end_item + offset, self.messages, self.reasoning_summary
        )


@dataclass(frozen=True, slots=True)
class RuntimeState:
    """The state an adapter carries between accepted turns. Never written to records as is."""

    adapter_id: str
    strategy: str
    payload: dict[str, Any]
    accepted_turns: tuple[TurnBoundary, ...] = ()
    schema_version: int = SCHEMA_VERSION

    def validate(self, since: RuntimeState | None = None) -> RuntimeState:
        """Check the envelope; raise `StateError` naming the first field that is wrong.

        `since`: a state already validated that this one extends (the accepted state a
        provisional one was built from); the parts the two share, the very same objects at the
        same places, are not walked again, so a turn's check costs what the turn added.
        """
        if type(self.schema_version) is not int or self.schema_version != SCHEMA_VERSION:
            raise StateError(
                f"RuntimeState.schema_version: expected {SCHEMA_VERSION}, "
                f"got {self.schema_version!r}"
            )
        if not isinstance(self.adapter_id, str) or not self.adapter_id:
            raise StateError(
                f"RuntimeState.adapter_id: expected an adapter id, got {self.adapter_id!r}"
            )
        if self.strategy not in STRATEGIES:
            raise StateError(
                f"RuntimeState.strategy: expected one of {', '.join(STRATEGIES)}, "
                f"got {self.strategy!r}"
            )
        check_json("RuntimeState.payload", self.payload, since.payload if since else _UNKNOWN)
        check_boundaries(self.accepted_turns)
        known = since.accepted_turns if since else ()
        fresh = [
            (index, turn.to_json())
            for index, turn in enumerate(self.accepted_turns)
            if index >= len(known) or known[index] is not turn
        ]
        try:
            check_json("RuntimeState.accepted_turns", [turn for _, turn in fresh])
        except StateError:
            for index, turn in fresh:
                check_json(f"RuntimeState.accepted_turns[{index}]", turn)
            raise
        return self

    def check_owner(self, adapter_id: str, strategies: tuple[str, ...]) -> None:
        """Refuse a state made by another adapter or for a strategy this adapter does not run."""
        if self.adapter_id != adapter_id:
            raise StateError(
                f"RuntimeState.adapter_id: state belongs to {self.adapter_id!r} "
                f"but is used with adapter {adapter_id!r}"
            )
        if self.strategy not in strategies:
            raise StateError(
                f"RuntimeState.strategy: state uses {self.strategy!r} but adapter {adapter_id!r} "
                f"runs {', '.join(strategies)}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "adapter_id": self.adapter_id,
            "strategy": self.strategy,
            "payload": self.payload,
            "accepted_turns": [turn.to_json() for turn in self.accepted_turns],
        }

    @classmethod
    def from_json(cls, data: object) -> RuntimeState:
        """Parse and validate an envelope produced by `to_json`."""
        if not isinstance(data, dict):
            raise StateError(f"RuntimeState: expected an object, got {type(data).__name__}")
        expected = {"schema_version", "adapter_id", "strategy", "payload", "accepted_turns"}
        unknown = sorted(set(data) - expected)
        if unknown:
            raise StateError(f"RuntimeState.{unknown[0]}: unknown field")
        missing = sorted(expected - set(data))
        if missing:
            raise StateError(f"RuntimeState.{missing[0]}: missing")
        turns = data["accepted_turns"]
        if not isinstance(turns, list):
            raise StateError("RuntimeState.accepted_turns: expected a list")
        payload = data["payload"]
        if not isinstance(payload, dict):
            raise StateError("RuntimeState.payload: expected an object")
        return cls(
            adapter_id=data["adapter_id"],
            strategy=data["strategy"],
            payload=payload,
            accepted_turns=tuple(_boundary(i, turn) for i, turn in enumerate(turns)),
            schema_version=data["schema_version"],
        ).validate()


_SCALARS = (str, int, bool, type(None))


_UNKNOWN = object()


def check_json(field_name: str, value: object, known: object = _UNKNOWN) -> None:
    """Refuse a value that would not survive a JSON round trip unchanged: only dicts with str
    keys, lists, str, int, finite float, bool and None, of exactly those types (a tuple, a
    subclass or NaN would come back as something else). One walk, no serialization; a part that
    is the very object found at the same place in `known` (already checked) is skipped."""
    stack = [(value, known)]
    while stack:
        item, old = stack.pop()
        if item is old:
            continue
        if type(item) is dict:
            olds = old if type(old) is dict else {}
            for key, inner in item.items():
                if type(key) is not str:
                    raise StateError(f"{field_name}: not JSON (a key {key!r} is not a str)")
                stack.append((inner, olds.get(key, _UNKNOWN)))
        elif type(item) is list:
            before = old if type(old) is list else []
            stack.extend(
                (inner, before[index] if index < len(before) else _UNKNOWN)
                for index, inner in enumerate(item)
            )
        elif type(item) is float:
            if not math.isfinite(item):
                raise StateError(f"{field_name}: not JSON ({item!r} is not a finite number)")
        elif type(item) not in _SCALARS:
            raise StateError(
                f"{field_name}: not JSON (a {type(item).__name__} does not survive a round "
                "trip; use str keys, lists rather than tuples, and plain JSON values)"
            )


def check_boundaries(turns: tuple[TurnBoundary, ...]) -> None:
    """Boundaries must be well-formed, ordered and non-overlapping."""
    previous_end = 0
    for index, turn in enumerate(turns):
        where = f"RuntimeState.accepted_turns[{index}]"
        start, end = turn.start_item, turn.end_item
        if type(start) is not int or type(end) is not int or start < 0 or end <= start:
            raise StateError(f"{where}: expected 0 <= start_item < end_item, got [{start}, {end})")
        if start < previous_end:
            raise StateError(
                f"{where}: [{start}, {end}) overlaps or precedes the previous turn, "
                f"which ends at {previous_end}"
            )
        previous_end = end


def _boundary(index: int, data: object) -> TurnBoundary:
    where = f"RuntimeState.accepted_turns[{index}]"
    if not isinstance(data, dict):
        raise StateError(f"{where}: expected an object")
    unknown = sorted(set(data) - {"start_item", "end_item", "messages", "reasoning_summary"})
    if unknown:
        raise StateError(f"{where}.{unknown[0]}: unknown field")
    messages = data.get("messages", [])
    summary = data.get("reasoning_summary")
    if not isinstance(messages, list):
        raise StateError(f"{where}.messages: expected a list")
    if summary is not None and not isinstance(summary, str):
        raise StateError(f"{where}.reasoning_summary: expected a string or null")
    return TurnBoundary(
        start_item=data.get("start_item"),  # type: ignore[arg-type]
        end_item=data.get("end_item"),  # type: ignore[arg-type]
        messages=tuple(messages),
        reasoning_summary=summary,
    )
