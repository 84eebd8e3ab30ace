"""OpenAI Agents SDK integration: recall injected per request, turns observed after success."""

from satchel.integrations.openai_agents.compaction import (
    CompactionTrigger,
    compact_at,
    compact_if_due,
)
from satchel.integrations.openai_agents.items import is_untrusted, memory_item
from satchel.integrations.openai_agents.memory import SessionMemory, final_text, memory_filter

__all__ = [
    "CompactionTrigger",
    "SessionMemory",
    "compact_at",
    "compact_if_due",
    "final_text",
    "is_untrusted",
    "memory_filter",
    "memory_item",
]
