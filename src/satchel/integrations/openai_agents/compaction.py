"""Compaction by the deployment's context: when the trigger says it is due, the session's
history is replaced by one untrusted memory message carrying the subject's context.

The trigger speaks the SDK's compaction vocabulary: a `should_trigger_compaction` callable handed
`{"session_items", "compaction_candidate_items"}`, candidates being every stored item except user
messages and compaction items, as the SDK's own compaction session counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.memory import Session
from agents.memory.openai_responses_compaction_session import select_compaction_candidate_items

from satchel.integrations.core import AgentMemory
from satchel.integrations.openai_agents.items import memory_item

CompactionTrigger = Callable[[dict[str, Any]], bool]
"""Decides from the session's items whether compaction is due before this turn."""


def compact_at(candidates: int) -> CompactionTrigger:
    """A trigger that is due once the session holds `candidates` compaction candidates."""
    if candidates < 1:
        raise ValueError("a compaction threshold counts at least one item")

    def due(context: dict[str, Any]) -> bool:
        return len(context["compaction_candidate_items"]) >= candidates

    return due


async def compact_if_due(
    session: Session, memory: AgentMemory, trigger: CompactionTrigger | None
) -> bool:
    """Replace the session's history by the subject's context when due; True when replaced.

    A context that cannot be fetched (the failure goes to the error hook), or an empty one,
    leaves the history as it was.
    """
    if trigger is None:
        return False
    history = await session.get_items()
    due = trigger(
        {
            "session_items": history,
            "compaction_candidate_items": select_compaction_candidate_items(history),
        }
    )
    if not due:
        return False
    context = await memory.context_message()
    if context is None:
        return False
    await session.clear_session()
    await session.add_items([memory_item(context)])
    return True
