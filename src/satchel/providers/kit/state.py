"""The protocol every family's state handling keeps, and the accepted history a request carries.

A family's payload holds its native items (chat messages, Responses items, Messages messages,
Interactions steps) under one key that accepted-turn boundaries index, beside the inputs buffered
for the next request. Its state handling makes the empty payload, validates one, buffers inputs,
commits a completed turn provisionally, and projects items for records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from satchel.turns import NeutralMessage, RuntimeState, TurnBoundary


@dataclass(frozen=True, slots=True)
class History:
    """The accepted native items a request carries and their turn boundaries, after any trim
    (`pruned_items` left out) or native compaction."""

    items: list[Any]
    turns: tuple[TurnBoundary, ...]
    pruned_items: int = 0


class StateHandling(Protocol):
    """One family's payload: how it starts, is checked, buffers inputs, commits a turn, and how
    its items appear in records."""

    def empty_payload(self) -> dict[str, Any]:
        """The payload of a session that has sent nothing."""
        ...

    def check_payload(self, state: RuntimeState) -> None:
        """Validate the payload and that its boundaries fit; raise `StateError` naming the field."""
        ...

    def buffered(self, state: RuntimeState, messages: Sequence[NeutralMessage]) -> RuntimeState:
        """`state` with `messages` waiting for the next request."""
        ...

    def committed(
        self,
        state: RuntimeState,
        history: History,
        inputs: Sequence[Any],
        output: Sequence[Any],
        reasoning: str | None,
        system: str | None = None,
    ) -> RuntimeState:
        """The provisional state after a completed answer: `history`, this turn's native
        `inputs` and the native `output` that answers them, with one more boundary; `system`:
        the session's system prompt, for families that send it apart."""
        ...

    def readable(self, item: Any) -> NeutralMessage:
        """The readable projection of one native item; opaque fields never appear."""
        ...

    def descriptor(self, index: int, item: Any) -> dict[str, Any]:
        """One sent item as request records describe it; never a body."""
        ...
