"""Harness summary compaction: the model summarizes the accepted turns into one bridge message.

On a summary request that overflows, the latest accepted turn is unwound and kept aside; after a
summary succeeds its exact native items follow the bridge, so opaque reasoning survives for that
tail. Failures leave the accepted state untouched and raise `CompactionFailed`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from satchel.turns import (
    AttemptError,
    CompactionFailed,
    CompactionOutcome,
    ConfigurationError,
    ContextOverflowError,
    RuntimeState,
    StateError,
    SummaryCompactionAdapter,
    TransientError,
    UnwoundTurn,
    Usage,
)
from satchel.turns.usage import ZERO_USAGE

SUMMARY_PROMPT = (
    "Write a summary of this conversation so far. A fresh context will hold only your summary "
    "and the messages that come after it, so keep everything needed to carry on with the task: "
    "the goal, what has been tried and what was learned from it, the current situation, and the "
    "next steps you intend. Answer with the summary alone."
)
BRIDGE_TEMPLATE = (
    "Earlier turns of this conversation were condensed into the summary below so that the task "
    "can continue in a fresh context. Where a later message disagrees with it, the later message "
    "is right.\n\n<summary>\n{summary}\n</summary>"
)


@dataclass(frozen=True, slots=True)
class HarnessSummaryPolicy:
    """When to compact and how hard to try; all defaults are written to run metadata."""

    trigger_tokens: int
    max_context_tokens: int
    summary_max_tokens: int | None = None
    summary_input_headroom_tokens: int = 8_000
    max_attempts: int = 3
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0

    def __post_init__(self) -> None:
        if self.trigger_tokens <= 0 or self.trigger_tokens >= self.max_context_tokens:
            raise ConfigurationError(
                "runtime.compaction.trigger_tokens: expected 0 < trigger_tokens < "
                f"MAX_CONTEXT_LENGTH ({self.max_context_tokens}), got {self.trigger_tokens}"
            )
        if self.max_attempts < 1:
            raise ConfigurationError("runtime.compaction.max_summary_attempts: expected >= 1")


def state_tokens(state: RuntimeState) -> int:
    """A size estimate of a state's payload: `ceil(json chars / 3.5)`."""
    return math.ceil(len(json.dumps(state.payload, ensure_ascii=False)) / 3.5)


class HarnessSummaryCompactor:
    """Compacts an adapter's accepted state through its harness-summary capability."""

    within_attempt = False

    def __init__(
        self,
        adapter: SummaryCompactionAdapter,
        policy: HarnessSummaryPolicy,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(adapter, SummaryCompactionAdapter):
            raise ConfigurationError(
                f"runtime.compaction.strategy: {adapter.descriptor.adapter_id} cannot be "
                "compacted by a harness summary"
            )
        self.adapter = adapter
        self.limits = policy
        self._sleep = sleep

    def due(self, last_turn_usage: Usage) -> bool:
        return (
            last_turn_usage.input_tokens + last_turn_usage.output_tokens
            >= self.limits.trigger_tokens
        )

    def policy(self) -> dict[str, Any]:
        return {"strategy": "harness_summary", **asdict(self.limits)}

    def compact(self, state: RuntimeState, trigger: str) -> CompactionOutcome:
        candidate = state
        tail: list[UnwoundTurn] = []
        usage = ZERO_USAGE
        attempts = transient = 0
        failures: list[dict[str, Any]] = []
        while True:
            if not candidate.accepted_turns:
                raise CompactionFailed(
                    "compaction reached the protected boundary: no accepted turn left to summarize",
                    usage=usage,
                    failures=failures,
                )
            attempts += 1
            try:
                reply = self.adapter.summarize(candidate, SUMMARY_PROMPT)
            except ContextOverflowError as exc:
                usage = usage + (exc.usage or ZERO_USAGE)
                failures.append(_failure(attempts, "context_overflow", exc))
                candidate, unwound = self.adapter.unwind_latest_turn(candidate)
                tail.insert(0, unwound)
                continue
            except AttemptError as exc:
                usage = usage + (exc.usage or ZERO_USAGE)
                failures.append(_failure(attempts, type(exc).__name__, exc))
                if not exc.retryable or _failed(failures) >= self.limits.max_attempts:
                    raise CompactionFailed(
                        f"the summary request failed ({type(exc).__name__})",
                        usage=usage,
                        diagnostics=exc.diagnostics,
                        failures=failures,
                    ) from exc
                if isinstance(exc, TransientError):
                    transient += 1
                    delay = self.limits.backoff_initial_s * 2.0 ** (transient - 1)
                    self._sleep(min(self.limits.backoff_max_s, delay))
                continue
            usage = usage + reply.usage
            if not reply.complete:
                failures.append(_failure(attempts, "incomplete_summary", None))
                if _failed(failures) >= self.limits.max_attempts:
                    raise CompactionFailed(
                        "the summary was empty or incomplete", usage=usage, failures=failures
                    )
                continue
            bridge = BRIDGE_TEMPLATE.format(summary=reply.text)
            rebuilt = self.adapter.rebuild(candidate, bridge, tail)
            try:
                self.adapter.check_state(rebuilt)
            except StateError as exc:
                raise CompactionFailed(
                    f"the rebuilt state is invalid ({exc})", usage=usage, failures=failures
                ) from exc
            size = state_tokens(rebuilt)
            if size >= self.limits.trigger_tokens:
                raise CompactionFailed(
                    f"the rebuilt state (~{size} tokens) is not below the trigger "
                    f"({self.limits.trigger_tokens})",
                    usage=usage,
                    failures=failures,
                )
            record = {
                "mechanism": "harness_summary",
                "attempts": attempts,
                "overflow_recoveries": len(tail),
                "excluded_turns": len(tail),
                "excluded_items": sum(len(turn.items) for turn in tail),
                "items_before": self.adapter.native_items(state),
                "items_after": self.adapter.native_items(rebuilt),
                "turns_before": len(state.accepted_turns),
                "turns_summarized": len(candidate.accepted_turns),
                "turns_after": len(rebuilt.accepted_turns),
                "failures": failures,
            }
            return CompactionOutcome(rebuilt, usage, reply.text, bridge, record)


def _failure(attempt: int, kind: str, exc: AttemptError | None) -> dict[str, Any]:
    """A failed summary attempt as records keep it: number, kind, allowlisted diagnostics."""
    diagnostics = exc.diagnostics.to_dict() if exc is not None and exc.diagnostics else None
    return {"attempt": attempt, "kind": kind, "diagnostics": diagnostics}


def _failed(failures: list[dict[str, Any]]) -> int:
    """Failed summary attempts that count against the limit (overflow recoveries do not)."""
    return sum(1 for failure in failures if failure["kind"] != "context_overflow")
