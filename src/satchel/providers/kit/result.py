"""The one place a completed attempt becomes a `ModelTurnResult`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from satchel.providers.kit.state import StateHandling
from satchel.turns import (
    ModelResponse,
    ModelTurnResult,
    NativeCompaction,
    NeutralMessage,
    RequestRecord,
    RuntimeState,
    TransitionTelemetry,
    Usage,
    redact,
)


class Recording(Protocol):
    """An adapter as far as its results need it."""

    @property
    def model(self) -> str: ...
    @property
    def opaque_fields(self) -> frozenset[str]: ...
    @property
    def handling(self) -> StateHandling: ...

    def settings(self) -> dict[str, Any]: ...


def turn_result(
    adapter: Recording,
    *,
    text: str,
    reasoning: str | None,
    finish_reason: str,
    model: str | None,
    response_id: str | None,
    usage: Usage | None,
    provisional: RuntimeState,
    sent: Sequence[Any],
    telemetry: TransitionTelemetry,
    readable: tuple[NeutralMessage, ...] | None = None,
    compaction: NativeCompaction | None = None,
) -> ModelTurnResult:
    """The result of an attempt whose answer the adapter found acceptable: the normalized
    response (`model` falls back to the adapter's), the action request's `usage`, the
    provisional state, and what records show of the request of `sent` (item descriptors,
    redacted settings, the readable projection unless given as `readable`)."""
    assert usage is not None
    handling = adapter.handling
    return ModelTurnResult(
        response=ModelResponse(
            text=text,
            reasoning=reasoning,
            finish_reason=finish_reason,
            model=model or adapter.model,
            response_id=response_id,
        ),
        usage=usage,
        provisional_state=provisional,
        request_record=RequestRecord(
            input_items=tuple(handling.descriptor(i, item) for i, item in enumerate(sent)),
            settings=redact(adapter.settings(), adapter.opaque_fields),
        ),
        telemetry=telemetry,
        readable_request_messages=(
            tuple(map(handling.readable, sent)) if readable is None else readable
        ),
        compaction=compaction,
    )
