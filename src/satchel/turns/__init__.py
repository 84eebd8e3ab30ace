"""The provider-neutral turn contract: state, session, usage, errors, redaction, records."""

from satchel.turns.contract import (
    AdapterDescriptor,
    CompactionOutcome,
    Compactor,
    ModelResponse,
    ModelTurnRequest,
    ModelTurnResult,
    NativeCompaction,
    OverflowTrimmingAdapter,
    ProviderAdapter,
    RequestRecord,
    SummaryCompactionAdapter,
    SummaryReply,
    TransitionTelemetry,
    UnwoundTurn,
)
from satchel.turns.diagnostics import Diagnostics
from satchel.turns.errors import (
    AttemptError,
    CompactionFailed,
    ConfigurationError,
    ContextOverflowError,
    FatalAttemptError,
    InterruptedStreamError,
    InvalidAnswer,
    InvalidResponseError,
    RefusalError,
    SatchelTurnError,
    StateError,
    TransientError,
    TruncatedError,
    TurnFailed,
)
from satchel.turns.messages import NeutralMessage
from satchel.turns.records import RecordsWriter
from satchel.turns.redaction import redact
from satchel.turns.registry import AdapterRegistry
from satchel.turns.session import AcceptedTurn, FailedAttempt, RetryPolicy, Session
from satchel.turns.state import RuntimeState, TurnBoundary
from satchel.turns.usage import Pricing, Usage

__all__ = [
    "AcceptedTurn",
    "AdapterDescriptor",
    "AdapterRegistry",
    "AttemptError",
    "CompactionFailed",
    "CompactionOutcome",
    "Compactor",
    "ConfigurationError",
    "ContextOverflowError",
    "Diagnostics",
    "FailedAttempt",
    "FatalAttemptError",
    "InterruptedStreamError",
    "InvalidAnswer",
    "InvalidResponseError",
    "ModelResponse",
    "ModelTurnRequest",
    "ModelTurnResult",
    "NativeCompaction",
    "NeutralMessage",
    "OverflowTrimmingAdapter",
    "Pricing",
    "ProviderAdapter",
    "RecordsWriter",
    "RefusalError",
    "RequestRecord",
    "RetryPolicy",
    "RuntimeState",
    "SatchelTurnError",
    "Session",
    "StateError",
    "SummaryCompactionAdapter",
    "SummaryReply",
    "TransientError",
    "TransitionTelemetry",
    "TruncatedError",
    "TurnBoundary",
    "TurnFailed",
    "UnwoundTurn",
    "Usage",
    "redact",
]
