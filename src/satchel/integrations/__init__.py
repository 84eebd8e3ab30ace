"""Framework integrations with the memory deployment, each with its conformance driver."""

from satchel.integrations.core import (
    AgentMemory,
    ErrorHook,
    MemoryStoreFailed,
    SyncAgentMemory,
    observed_messages,
)

__all__ = ["AgentMemory", "ErrorHook", "MemoryStoreFailed", "SyncAgentMemory", "observed_messages"]
