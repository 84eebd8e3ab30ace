"""The local adapter registry: stable ids to descriptors and factories, never code by URI."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from satchel.turns.contract import AdapterDescriptor, ProviderAdapter
from satchel.turns.errors import ConfigurationError, StateError
from satchel.turns.state import RuntimeState

AdapterFactory = Callable[..., ProviderAdapter]
# Checks a profile's `request` section for a strategy and a compaction strategy; raises
# `ConfigurationError` naming the field.
RequestValidator = Callable[[dict[str, Any], str, str], object]


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    descriptor: AdapterDescriptor
    factory: AdapterFactory
    validate_request: RequestValidator


class AdapterRegistry:
    """Adapters known to this installation, by adapter id."""

    def __init__(self) -> None:
        self._entries: dict[str, RegistryEntry] = {}

    def register(
        self,
        descriptor: AdapterDescriptor,
        factory: AdapterFactory,
        validate_request: RequestValidator,
    ) -> None:
        """Register an adapter with the factory that builds it and the check of its requests."""
        if descriptor.adapter_id in self._entries:
            raise ConfigurationError(f"adapter id {descriptor.adapter_id!r} is already registered")
        self._entries[descriptor.adapter_id] = RegistryEntry(descriptor, factory, validate_request)

    def get(self, adapter_id: str) -> RegistryEntry:
        entry = self._entries.get(adapter_id)
        if entry is None:
            known = ", ".join(sorted(self._entries)) or "none"
            raise ConfigurationError(f"unknown adapter id {adapter_id!r} (registered: {known})")
        return entry

    def descriptor(self, adapter_id: str) -> AdapterDescriptor:
        return self.get(adapter_id).descriptor

    def create(self, adapter_id: str, **options: Any) -> ProviderAdapter:
        return self.get(adapter_id).factory(**options)

    def check_state(self, state: RuntimeState) -> None:
        """Validate a state's envelope and that its adapter id is registered here."""
        state.validate()
        if state.adapter_id not in self._entries:
            raise StateError(f"RuntimeState.adapter_id: unknown adapter id {state.adapter_id!r}")

    def __contains__(self, adapter_id: object) -> bool:
        return adapter_id in self._entries

    def __iter__(self) -> Iterator[AdapterDescriptor]:
        return iter(entry.descriptor for _, entry in sorted(self._entries.items()))
