"""The base of every family's adapter: the `ProviderAdapter` methods that only pass through the
family's state handling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.providers.kit.state import StateHandling
from satchel.turns import AdapterDescriptor, NeutralMessage, RuntimeState


class AdapterBase:
    """An adapter whose payload is kept by `handling`; `request` holds the checked settings."""

    descriptor: AdapterDescriptor
    strategy: str
    opaque_fields: frozenset[str] = frozenset()
    handling: StateHandling
    request: dict[str, Any]
    model: str

    def initial_state(self) -> RuntimeState:
        return RuntimeState(
            self.descriptor.adapter_id, self.strategy, self.handling.empty_payload()
        )

    def check_state(self, state: RuntimeState, since: RuntimeState | None = None) -> None:
        state.validate(since)
        state.check_owner(self.descriptor.adapter_id, (self.strategy,))
        self.handling.check_payload(state)

    def buffer_inputs(
        self, state: RuntimeState, messages: Sequence[NeutralMessage]
    ) -> RuntimeState:
        return self.handling.buffered(state, messages)

    def settings(self) -> dict[str, Any]:
        return dict(self.request)
