"""LangGraph / LangChain v1 agent middleware over the memory deployment."""

from satchel.integrations.langgraph.middleware import (
    CompactTrigger,
    MemoryMiddleware,
    is_untrusted,
    memory_message,
)

__all__ = ["CompactTrigger", "MemoryMiddleware", "is_untrusted", "memory_message"]
