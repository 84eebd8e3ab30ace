"""Microsoft Agent Framework: a memory context provider and a compaction provider."""

from satchel.integrations.agent_framework.compaction import ContextCompactionProvider
from satchel.integrations.agent_framework.provider import (
    MemoryProvider,
    final_reply,
    memory_message,
    person_text,
)
from satchel.integrations.core import MemoryStoreFailed

__all__ = [
    "ContextCompactionProvider",
    "MemoryProvider",
    "MemoryStoreFailed",
    "final_reply",
    "memory_message",
    "person_text",
]
