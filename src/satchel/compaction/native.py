"""Native compaction: the provider compacts, inside the attempt, when the latest action was large.

The adapter does the work (`ModelTurnRequest.compact`); this policy only says when, and what run
metadata records of it. The summary and the action commit together: a compaction whose action
is not accepted is made again from the unchanged accepted history on the next attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from satchel.turns import CompactionOutcome, ConfigurationError, RuntimeState, Usage


@dataclass(frozen=True, slots=True)
class NativeCompactionPolicy:
    """Compact when the latest accepted action's input plus output tokens reach the trigger.
    `summary_max_tokens`: the compaction request's own output cap, where the adapter has one."""

    trigger_tokens: int
    max_context_tokens: int
    summary_max_tokens: int | None = None
    within_attempt = True

    def __post_init__(self) -> None:
        if self.trigger_tokens <= 0 or self.trigger_tokens >= self.max_context_tokens:
            raise ConfigurationError(
                "runtime.compaction.trigger_tokens: expected 0 < trigger_tokens < "
                f"MAX_CONTEXT_LENGTH ({self.max_context_tokens}), got {self.trigger_tokens}"
            )

    def due(self, last_turn_usage: Usage) -> bool:
        return last_turn_usage.input_tokens + last_turn_usage.output_tokens >= self.trigger_tokens

    def compact(self, state: RuntimeState, trigger: str) -> CompactionOutcome:
        raise ConfigurationError(
            "native compaction runs inside the adapter's attempt, never on its own"
        )

    def policy(self) -> dict[str, Any]:
        policy: dict[str, Any] = {
            "strategy": "native",
            "trigger_tokens": self.trigger_tokens,
            "max_context_tokens": self.max_context_tokens,
        }
        if self.summary_max_tokens is not None:
            policy["summary_max_output_tokens"] = self.summary_max_tokens
        return policy
