"""One adapter's spec: its descriptor, the pydantic model of its request settings, and its
factory; and the parts of a model profile a factory reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from satchel.providers.kit.settings import RequestSettings
from satchel.turns import AdapterDescriptor, ProviderAdapter

INLINE_COMPACTION = "inline"
"""The compaction a descriptor lists when the provider compacts inside the request it is sent
(`request.context_management`), rather than by a `runtime.compaction.strategy`."""


class ClientOptions(Protocol):
    """Where and how the SDK client connects."""

    @property
    def base_url(self) -> str | None: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def max_retries(self) -> int: ...


class CompactionOptions(Protocol):
    @property
    def summary_max_output_tokens(self) -> int | None: ...


class TrimOptions(Protocol):
    @property
    def limit_tokens(self) -> int | None: ...
    @property
    def target_fraction(self) -> float: ...


class RuntimeOptions(Protocol):
    @property
    def strategy(self) -> str: ...
    @property
    def compaction(self) -> CompactionOptions: ...
    @property
    def trim(self) -> TrimOptions: ...
    @property
    def reasoning_replay(self) -> tuple[str, ...] | None: ...


class AgentOptions(Protocol):
    @property
    def MAX_CONTEXT_LENGTH(self) -> int: ...


class AdapterProfile(Protocol):
    """What a factory reads of a model profile (`satchel.providers.Profile` is one)."""

    @property
    def request(self) -> dict[str, Any]: ...
    @property
    def client(self) -> ClientOptions: ...
    @property
    def runtime(self) -> RuntimeOptions: ...
    @property
    def agent(self) -> AgentOptions: ...


AdapterFactory = Callable[[AdapterProfile, Any, str], ProviderAdapter]
"""Builds an adapter, SDK client included, from a profile, an optional `httpx.Client` and the
API key."""


@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """Everything the registry and profiles know of one adapter id. `needs_reasoning_replay`:
    profiles must name `runtime.reasoning_replay` for it."""

    descriptor: AdapterDescriptor
    settings: type[RequestSettings]
    factory: AdapterFactory
    needs_reasoning_replay: bool = False

    def validate_request(
        self, request: dict[str, Any], strategy: str, compaction: str = "none"
    ) -> dict[str, Any]:
        """The settings sent on every call, or `ConfigurationError` naming the field."""
        return self.settings.check(request, self.descriptor.adapter_id, strategy, compaction)
