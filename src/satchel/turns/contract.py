"""The turn contract between a session and a provider adapter: requests, results, protocols."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from satchel.turns.errors import ContextOverflowError
from satchel.turns.messages import NeutralMessage
from satchel.turns.state import RuntimeState, TurnBoundary
from satchel.turns.usage import Usage

ReviewStatus = Literal["unreviewed", "provider_reference", "provider_approved"]


@dataclass(frozen=True, slots=True)
class AdapterDescriptor:
    """What the registry says about one adapter id."""

    adapter_id: str
    provider: str
    api_surface: str
    implementation_path: str
    version: str
    strategies: tuple[str, ...]
    review_status: ReviewStatus = "unreviewed"
    compaction: tuple[str, ...] = ("none",)

    def to_dict(self) -> dict[str, Any]:
        return {
            "adapter_id": self.adapter_id,
            "provider": self.provider,
            "api_surface": self.api_surface,
            "implementation_path": self.implementation_path,
            "version": self.version,
            "strategies": list(self.strategies),
            "review_status": self.review_status,
            "compaction": list(self.compaction),
        }


@dataclass(frozen=True, slots=True)
class ModelTurnRequest:
    """One attempt: the last accepted state plus the inputs of this turn. `compact`: an adapter
    with native compaction compacts the accepted history first, inside this attempt."""

    state: RuntimeState
    new_messages: tuple[NeutralMessage, ...]
    attempt: int = 1
    compact: bool = False


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """The normalized answer of one completed model call."""

    text: str
    reasoning: str | None
    finish_reason: str
    model: str
    response_id: str | None = None


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """A sanitized description of what was sent: item types and ids, settings. No bodies."""

    input_items: tuple[dict[str, Any], ...]
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"input_items": list(self.input_items), "settings": self.settings}


@dataclass(frozen=True, slots=True)
class TransitionTelemetry:
    """Counts describing how the state moved in one attempt."""

    items_sent: int
    compaction_items_returned: int = 0
    history_before: int = 0
    history_after: int = 0
    items_pruned: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "items_sent": self.items_sent,
            "compaction_items_returned": self.compaction_items_returned,
            "history_before": self.history_before,
            "history_after": self.history_after,
            "items_pruned": self.items_pruned,
        }


@dataclass(frozen=True, slots=True)
class NativeCompaction:
    """A provider compaction made inside an attempt: it commits with the attempt's action or not
    at all. `usage` is the compaction call's own; `record` is what records may show of it."""

    usage: Usage
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelTurnResult:
    """What an adapter returns for a completed attempt; the state is provisional until accepted.
    `usage` is the action request's; a native compaction before it carries its own."""

    response: ModelResponse
    usage: Usage
    provisional_state: RuntimeState
    request_record: RequestRecord
    telemetry: TransitionTelemetry
    readable_request_messages: tuple[NeutralMessage, ...] = field(default=())
    compaction: NativeCompaction | None = None


@runtime_checkable
class ProviderAdapter(Protocol):
    """Translates one normalized request into one SDK call and normalizes the answer.

    `run` raises an `AttemptError` subclass for every failed attempt (carrying the usage it spent)
    and never decides what an answer means: the caller's parser does.
    """

    descriptor: AdapterDescriptor
    strategy: str
    model: str
    opaque_fields: frozenset[str]

    def initial_state(self) -> RuntimeState:
        """The empty state a new session starts from."""
        ...

    def check_state(self, state: RuntimeState, since: RuntimeState | None = None) -> None:
        """Validate the envelope and this adapter's payload; raise `StateError` naming the field.
        `since`: the validated state `state` extends (see `RuntimeState.validate`)."""
        ...

    def buffer_inputs(
        self, state: RuntimeState, messages: Sequence[NeutralMessage]
    ) -> RuntimeState:
        """Return `state` with `messages` waiting for the next request, so retries keep them."""
        ...

    def run(self, request: ModelTurnRequest) -> ModelTurnResult:
        """Make one model call for `request`."""
        ...

    def settings(self) -> dict[str, Any]:
        """The request settings, for records (redacted by the caller)."""
        ...


@dataclass(frozen=True, slots=True)
class UnwoundTurn:
    """The exact native items of one accepted turn taken off the end of a state."""

    items: tuple[Any, ...]
    boundary: TurnBoundary


@dataclass(frozen=True, slots=True)
class SummaryReply:
    """The answer to a harness summary request."""

    text: str
    usage: Usage
    complete: bool


@runtime_checkable
class SummaryCompactionAdapter(ProviderAdapter, Protocol):
    """The optional harness-summary capability of an adapter without native compaction."""

    def native_items(self, state: RuntimeState) -> int:
        """How many native items the state's history holds."""
        ...

    def summarize(self, state: RuntimeState, prompt: str) -> SummaryReply:
        """Ask the model to summarize the accepted turns of `state` (pending inputs left out)."""
        ...

    def unwind_latest_turn(self, state: RuntimeState) -> tuple[RuntimeState, UnwoundTurn]:
        """Take the latest accepted turn off `state`, trailing buffered inputs staying pending."""
        ...

    def rebuild(
        self, state: RuntimeState, bridge: str, tail: Sequence[UnwoundTurn]
    ) -> RuntimeState:
        """A fresh state: the bridge message, then `tail`'s exact items, then `state`'s pending."""
        ...


@runtime_checkable
class OverflowTrimmingAdapter(ProviderAdapter, Protocol):
    """The optional capability of an adapter that trims its own window: after a context
    overflow, send less on the next attempt (the session asks once per turn)."""

    def trim_after_overflow(self, error: ContextOverflowError) -> bool:
        """Shrink what the next attempt sends, guided by the sizes `error` states; False when
        it cannot (the turn then fails)."""
        ...


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """A compacted accepted state, with what the compaction cost and what records may show."""

    state: RuntimeState
    usage: Usage
    summary: str
    bridge: str
    record: dict[str, Any]


class Compactor(Protocol):
    """Replaces an accepted state by a shorter one; fails closed (raises) otherwise.

    With `within_attempt` true (absent means false) the compactor only decides *when*: the
    session then asks the adapter to compact inside each attempt of the turn
    (`ModelTurnRequest.compact`), and the compaction commits with the action; `compact` is not
    called.
    """

    def due(self, last_turn_usage: Usage) -> bool:
        """Whether the latest accepted turn's size schedules a compaction before the next."""
        ...

    def compact(self, state: RuntimeState, trigger: str) -> CompactionOutcome:
        """Compact `state`; the caller installs the outcome only when this returns."""
        ...

    def policy(self) -> dict[str, Any]:
        """The compaction policy, defaults included, for run metadata."""
        ...
