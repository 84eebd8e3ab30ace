"""Compaction: harness summaries and overflow recovery for adapters without native compaction,
and the policy of native compaction for adapters with it."""

from satchel.compaction.harness_summary import (
    BRIDGE_TEMPLATE,
    SUMMARY_PROMPT,
    HarnessSummaryCompactor,
    HarnessSummaryPolicy,
    state_tokens,
)
from satchel.compaction.native import NativeCompactionPolicy

__all__ = [
    "BRIDGE_TEMPLATE",
    "SUMMARY_PROMPT",
    "HarnessSummaryCompactor",
    "HarnessSummaryPolicy",
    "NativeCompactionPolicy",
    "state_tokens",
]
