"""Harness summary compaction and overflow recovery for adapters without native compaction."""

from satchel.compaction.harness_summary import (
    BRIDGE_TEMPLATE,
    SUMMARY_PROMPT,
    HarnessSummaryCompactor,
    HarnessSummaryPolicy,
    state_tokens,
)

__all__ = [
    "BRIDGE_TEMPLATE",
    "SUMMARY_PROMPT",
    "HarnessSummaryCompactor",
    "HarnessSummaryPolicy",
    "state_tokens",
]
