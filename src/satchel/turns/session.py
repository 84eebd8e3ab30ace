"""`Session.turn`: commit on accept, bounded retries from the accepted state, honest accounting."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from satchel.turns.contract import (
    CompactionOutcome,
    Compactor,
    ModelResponse,
    ModelTurnRequest,
    ModelTurnResult,
    OverflowTrimmingAdapter,
    ProviderAdapter,
)
from satchel.turns.errors import (
    AttemptError,
    CompactionFailed,
    ConfigurationError,
    ContextOverflowError,
    InterruptedStreamError,
    InvalidAnswer,
    InvalidResponseError,
    RefusalError,
    StateError,
    TransientError,
    TruncatedError,
    TurnFailed,
)
from satchel.turns.messages import NeutralMessage, check_input_messages
from satchel.turns.records import RecordsWriter, action_record, fit_text, runtime_metadata
from satchel.turns.redaction import redact
from satchel.turns.state import RuntimeState
from satchel.turns.usage import ZERO_USAGE, Pricing, Usage

log = logging.getLogger("satchel.turns")

_FAILURE_KINDS: tuple[tuple[type[AttemptError], str], ...] = (
    (ContextOverflowError, "context_overflow"),
    (TransientError, "transient"),
    (RefusalError, "refusal"),
    (TruncatedError, "truncated"),
    (InterruptedStreamError, "interrupted_stream"),
    (InvalidResponseError, "invalid_response"),
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often one turn may be attempted, and how transient errors back off."""

    max_attempts: int = 3
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0

    def __post_init__(self) -> None:
        if type(self.max_attempts) is not int or self.max_attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy.max_attempts must be an integer >= 1, got {self.max_attempts!r}"
            )
        if self.backoff_initial_s < 0 or self.backoff_max_s < self.backoff_initial_s:
            raise ConfigurationError(
                "RetryPolicy backoff must satisfy 0 <= backoff_initial_s <= backoff_max_s"
            )

    def backoff(self, transient_failures: int) -> float:
        return min(self.backoff_max_s, self.backoff_initial_s * 2.0 ** (transient_failures - 1))


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """One attempt that did not commit: its kind and allowlisted diagnostics only."""

    attempt: int
    kind: str
    diagnostics: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "kind": self.kind, "diagnostics": self.diagnostics}


@dataclass(frozen=True, slots=True)
class AcceptedTurn[T]:
    """A committed turn: the parsed action and everything spent since the previous one."""

    step: int
    action: T
    response: ModelResponse
    usage: Usage
    attempts: int
    failures: tuple[FailedAttempt, ...]
    result: ModelTurnResult
    compaction_usage: Usage | None = None


@dataclass(slots=True)
class _Turn:
    """Book-keeping of the turn in progress."""

    calls: int = 0
    counted: int = 0
    transient: int = 0
    overflow_recovered: bool = False
    compact: bool = False  # the adapter compacts natively inside each attempt
    compactions: int = 0  # native compactions made by this turn's attempts
    failures: list[FailedAttempt] = field(default_factory=list)
    compaction_failures: tuple[dict[str, Any], ...] = ()
    observation: Mapping[str, Any] | None = None  # the caller's, for the step record


class Session:
    """Drives one conversation through an adapter, one accepted turn at a time."""

    def __init__(
        self,
        adapter: ProviderAdapter,
        *,
        state: RuntimeState | None = None,
        policy: RetryPolicy | None = None,
        compactor: Compactor | None = None,
        records: RecordsWriter | None = None,
        pricing: Pricing | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.adapter = adapter
        self.policy = policy or RetryPolicy()
        self.compactor = compactor
        self.records = records
        self.pricing = pricing
        self._sleep = sleep
        initial = state if state is not None else adapter.initial_state()
        adapter.check_state(initial)
        self._state = initial
        self._attempt_usage = ZERO_USAGE  # spent by the turn in progress
        self._carried_usage = ZERO_USAGE  # an installed compaction's, billed to the next turn
        self._compaction_usage = ZERO_USAGE
        self._total_usage = ZERO_USAGE
        self._abandoned_usage = ZERO_USAGE
        self._abandoned_turns: list[dict[str, Any]] = []
        self._steps = 0
        self._compactions = 0
        self._continuation: dict[str, Any] | None = None
        self._last_turn_usage: Usage | None = None

    @property
    def state(self) -> RuntimeState:
        """The last accepted state (buffered inputs included)."""
        return self._state

    @property
    def total_usage(self) -> Usage:
        """Every request of the run, each counted once."""
        return self._total_usage

    @property
    def pending_usage(self) -> Usage:
        """Spent since the last accepted turn and billed to the next one: an installed
        compaction's usage, and the turn in progress."""
        return self._carried_usage + self._attempt_usage

    @property
    def abandoned_usage(self) -> Usage:
        """Spent by turns that were abandoned; only in the run total."""
        return self._abandoned_usage

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def compactions(self) -> int:
        return self._compactions

    def bill(self, usage: Usage) -> None:
        """Count a request made beside the turns (a game's lesson) in the run's total."""
        self._total_usage = self._total_usage + usage

    def buffer(self, messages: Sequence[NeutralMessage]) -> None:
        """Commit inputs that must survive retries (a reset observation) into the accepted state."""
        check_input_messages(messages, "buffered messages")
        state = self.adapter.buffer_inputs(self._state, list(messages))
        self.adapter.check_state(state)
        self._state = state

    def turn[T](
        self,
        new_messages: Sequence[NeutralMessage],
        parse: Callable[[ModelResponse], T],
        *,
        observation: Mapping[str, Any] | None = None,
    ) -> AcceptedTurn[T]:
        """Ask until `parse` accepts an answer; commit only then. Raises `TurnFailed` otherwise.

        `parse` raises `InvalidAnswer` for an answer that is not a valid action. `observation`
        (JSON-able, the caller's own) is written into the step record as it is, redacted.
        """
        check_input_messages(new_messages)
        turn = _Turn(observation=observation)
        try:
            return self._turn(turn, tuple(new_messages), parse, time.monotonic())
        except BaseException as exc:
            # What this turn spent is abandoned; an installed compaction stays billed to the
            # next accepted turn, since the state it made stays accepted.
            if self._attempt_usage.requests or turn.calls:
                self._abandoned_turns.append(self._abandoned_record(turn, exc))
            self._abandoned_usage = self._abandoned_usage + self._attempt_usage
            self._attempt_usage = ZERO_USAGE
            raise

    def _turn[T](
        self,
        turn: _Turn,
        new: tuple[NeutralMessage, ...],
        parse: Callable[[ModelResponse], T],
        started: float,
    ) -> AcceptedTurn[T]:
        last = self._last_turn_usage
        native = bool(getattr(self.compactor, "within_attempt", False))
        if self.compactor is not None and last is not None and self.compactor.due(last):
            if native:
                turn.compact = True
            else:
                self._compact(turn, "threshold")
        trigger = "threshold"
        while True:
            turn.calls += 1
            turn.counted += 1
            request = ModelTurnRequest(self._state, new, turn.calls, compact=turn.compact)
            try:
                result = self.adapter.run(request)
            except AttemptError as exc:
                self._spend(exc.usage)
                self._fail(turn, _kind(exc), exc)
                if isinstance(exc, ContextOverflowError):
                    if turn.overflow_recovered or not self._recovers(exc):
                        raise self._failed(turn, "context overflow", exc, str(exc)) from exc
                    turn.overflow_recovered = True
                    turn.counted -= 1
                    if self.compactor is None:
                        continue  # the adapter has trimmed its window
                    if native:
                        turn.compact, trigger = True, "overflow"
                    else:
                        self._compact(turn, "overflow")
                    continue
                if not exc.retryable:
                    raise self._failed(
                        turn, f"a {type(exc).__name__} cannot be retried", exc, str(exc)
                    ) from exc
                if turn.counted >= self.policy.max_attempts:
                    raise self._failed(turn, "retries ran out", exc, str(exc)) from exc
                if isinstance(exc, TransientError):
                    turn.transient += 1
                    self._sleep(self.policy.backoff(turn.transient))
                continue
            self._spend(result.usage)
            if result.compaction is not None:
                turn.compactions += 1
                self._spend(result.compaction.usage)
            try:
                action = parse(result.response)
            except InvalidAnswer as exc:
                self._fail(turn, "invalid_answer", None, reason=str(exc))
                if turn.counted >= self.policy.max_attempts:
                    raise self._failed(
                        turn, "retries ran out", exc, f"invalid answer: {exc}"
                    ) from exc
                continue
            self.adapter.check_state(result.provisional_state, since=self._state)
            return self._commit(turn, action, result, started, trigger)

    def _commit[T](
        self, turn: _Turn, action: T, result: ModelTurnResult, started: float, trigger: str
    ) -> AcceptedTurn[T]:
        self._state = result.provisional_state
        self._steps += 1
        usage = self._carried_usage + self._attempt_usage
        self._carried_usage = self._attempt_usage = ZERO_USAGE
        if result.compaction is not None:
            self._compaction_usage = self._compaction_usage + result.compaction.usage
            self._native_compacted(turn, result, trigger)
        compaction_usage = self._compaction_usage if self._compaction_usage.requests else None
        self._compaction_usage = ZERO_USAGE
        self._last_turn_usage = result.usage
        accepted = AcceptedTurn(
            step=self._steps,
            action=action,
            response=result.response,
            usage=usage,
            attempts=turn.calls,
            failures=tuple(turn.failures),
            result=result,
            compaction_usage=compaction_usage,
        )
        continuation, self._continuation = self._continuation, None
        log.info("step %d accepted after %d attempt(s)", accepted.step, accepted.attempts)
        if self.records is not None:
            record = self._step_record(accepted, continuation, started)
            if turn.observation is not None:
                record["observation"] = dict(turn.observation)
            self.records.write_step(accepted.step, record)
        return accepted

    def _step_record(
        self, accepted: AcceptedTurn[Any], continuation: dict[str, Any] | None, started: float
    ) -> dict[str, Any]:
        result = accepted.result
        record: dict[str, Any] = {
            "step": accepted.step,
            "time": datetime.now(UTC).isoformat(),
            "duration_s": round(time.monotonic() - started, 6),
            "model": accepted.response.model,
            "messages_sent": list(result.readable_request_messages),
            "response": fit_text(accepted.response.text),
            "reasoning_summary": fit_text(accepted.response.reasoning)
            if accepted.response.reasoning is not None
            else None,
            "finish_reason": accepted.response.finish_reason,
            "action": action_record(accepted.action),
            "usage": accepted.usage.to_dict(),
            "estimated_cost": self.pricing.estimate(accepted.usage) if self.pricing else None,
            "compaction_usage": accepted.compaction_usage.to_dict()
            if accepted.compaction_usage
            else None,
            "attempts": accepted.attempts,
            "retries": [failure.to_dict() for failure in accepted.failures],
            "request": result.request_record.to_dict(),
            "state_transition": result.telemetry.to_dict(),
        }
        if continuation is not None:
            record["continuation"] = continuation
        if result.compaction is not None:
            record["native_compaction"] = {
                "compaction": self._compactions,
                **result.compaction.record,
                "usage": result.compaction.usage.to_dict(),
            }
        return record

    def _native_compacted(self, turn: _Turn, result: ModelTurnResult, trigger: str) -> None:
        """Count and record the native compaction that commits with this turn's action."""
        assert result.compaction is not None
        self._compactions += 1
        log.info("compaction %d (%s, native) committed", self._compactions, trigger)
        if self.records is not None:
            record = {
                "number": self._compactions,
                "step_before": self._steps - 1,
                "time": datetime.now(UTC).isoformat(),
                "model": self.adapter.model,
                "trigger": trigger,
                "mechanism": "native",
                "compactions_attempted": turn.compactions,
                **result.compaction.record,
                "usage": result.compaction.usage.to_dict(),
            }
            self.records.write_compaction(self._compactions, record)

    def _recovers(self, overflow: ContextOverflowError) -> bool:
        """Whether the next attempt can send less: accepted turns to drop, and a compactor, or
        an adapter that trims its own window and has done so."""
        if not self._state.accepted_turns or self.compactor is not None:
            return bool(self._state.accepted_turns)
        trimming = self.adapter
        if not isinstance(trimming, OverflowTrimmingAdapter):
            return False
        return trimming.trim_after_overflow(overflow)

    def _compact(self, turn: _Turn, trigger: str) -> None:
        assert self.compactor is not None
        started = time.monotonic()
        try:
            outcome: CompactionOutcome = self.compactor.compact(self._state, trigger)
        except AttemptError as exc:
            self._spend(exc.usage)
            if isinstance(exc, CompactionFailed):
                turn.compaction_failures = exc.failures
            raise self._failed(turn, f"{trigger} compaction failed ({exc})", exc) from exc
        try:
            self.adapter.check_state(outcome.state)
        except StateError as exc:
            self._spend(outcome.usage)
            raise self._failed(
                turn, f"{trigger} compaction produced an invalid state", exc
            ) from exc
        self._total_usage = self._total_usage + outcome.usage
        self._carried_usage = self._carried_usage + outcome.usage
        self._compaction_usage = self._compaction_usage + outcome.usage
        self._state = outcome.state
        self._last_turn_usage = None
        self._compactions += 1
        self._continuation = {
            "compaction": self._compactions,
            "summary": outcome.summary,
            "bridge": outcome.bridge,
        }
        log.info("compaction %d (%s) installed", self._compactions, trigger)
        if self.records is not None:
            record = {
                "number": self._compactions,
                "step_before": self._steps,
                "time": datetime.now(UTC).isoformat(),
                "duration_s": round(time.monotonic() - started, 6),
                "model": self.adapter.model,
                "trigger": trigger,
                "summary": outcome.summary,
                **outcome.record,
                "usage": outcome.usage.to_dict(),
            }
            self.records.write_compaction(self._compactions, record)

    def _spend(self, usage: Usage | None) -> None:
        if usage is None or usage == ZERO_USAGE:
            return
        self._attempt_usage = self._attempt_usage + usage
        self._total_usage = self._total_usage + usage

    def _fail(self, turn: _Turn, kind: str, exc: AttemptError | None, *, reason: str = "") -> None:
        """Note a failed attempt: its record keeps the allowlisted diagnostics, and the warning
        says the parser's `reason`, or those diagnostics (never a provider's message)."""
        diagnostics = exc.diagnostics.to_dict() if exc and exc.diagnostics else None
        turn.failures.append(FailedAttempt(turn.calls, kind, diagnostics))
        if not reason and exc and exc.diagnostics:
            reason = exc.diagnostics.summary()
        said = f": {reason}" if reason else ""
        log.warning("attempt %d of step %d failed: %s%s", turn.calls, self._steps + 1, kind, said)

    def _failed(self, turn: _Turn, why: str, exc: BaseException, said: str = "") -> TurnFailed:
        """`TurnFailed` saying `why`; its message ends with what the last attempt `said` (the
        provider's words), its `reason` for records does not."""
        reason = f"step {self._steps + 1} abandoned after {turn.calls} attempt(s): {why}"
        return TurnFailed(
            f"{reason}: {said}" if said else reason,
            attempts=turn.calls,
            usage=self._attempt_usage,
            last_error=exc,
            reason=reason,
        )

    def _abandoned_record(self, turn: _Turn, exc: BaseException) -> dict[str, Any]:
        """What run metadata keeps of an abandoned turn: counts, usage, allowlisted diagnostics."""
        record: dict[str, Any] = {
            "step": self._steps + 1,
            "attempts": turn.calls,
            "reason": exc.reason if isinstance(exc, TurnFailed) else type(exc).__name__,
            "usage": self._attempt_usage.to_dict(),
            "retries": [failure.to_dict() for failure in turn.failures],
        }
        if turn.compaction_failures:
            record["compaction_failures"] = list(turn.compaction_failures)
        return record

    def finish(
        self,
        outcome: str,
        *,
        run_id: str,
        started_at: datetime,
        game: str | None = None,
        config_id: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Build `run_meta.json` (written when the session has records) and return it;
        `details` (the caller's own fields, such as a game's score) are added to it."""
        policy = self.compactor.policy() if self.compactor else {"strategy": "none"}
        meta: dict[str, Any] = {
            "run_id": run_id,
            "game": game,
            "model": self.adapter.model,
            "started_at": started_at.isoformat(),
            "ended_at": datetime.now(UTC).isoformat(),
            "steps": self._steps,
            "outcome": outcome,
            "total_usage": self._total_usage.to_dict(),
            "abandoned_usage": self._abandoned_usage.to_dict(),
            "unbilled_usage": self._carried_usage.to_dict(),
            "abandoned_turns": list(self._abandoned_turns),
            "estimated_cost": self.pricing.estimate(self._total_usage) if self.pricing else None,
            "runtime": runtime_metadata(
                self.adapter.descriptor,
                strategy=self.adapter.strategy,
                config_id=config_id,
                settings=redact(self.adapter.settings(), self.adapter.opaque_fields),
                compaction_policy=policy,
                compactions=self._compactions,
            ),
        }
        meta.update(details or {})
        if self.records is not None:
            self.records.write_run_meta(meta)
        return meta


def _kind(exc: AttemptError) -> str:
    return next((kind for cls, kind in _FAILURE_KINDS if isinstance(exc, cls)), "provider_error")
