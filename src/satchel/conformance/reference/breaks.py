"""Switches for the reference integration, each breaking exactly one rule, and the cases that
catch each one.

A switch is one small override: of the agent loop (`ReferenceAgent`) or of the shared turn policy
(`AgentMemory`). `BREAKS` is the one table of them; the mutation test runs the suite on every
variant and checks that the cases named here fail.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from satchel.conformance.reference.agent import ReferenceAgent
from satchel.integrations.core import AgentMemory, MemoryStoreFailed, observed_messages
from satchel.integrations.driver import DriverMessage
from satchel.memory.client import MemoryServiceError
from satchel.memory.message import MEMORY_MESSAGE_PREFIX, render_memory_message, turn_key


class _SystemMemory(ReferenceAgent):
    memory_role = "system"


class _TrustedMemory(ReferenceAgent):
    memory_untrusted = False


class _BareMemory(AgentMemory):
    """Renders the recall's arrays without the watermark and the plan."""

    def recalled(self, watermark: Mapping[str, Any], recall: Mapping[str, Any]) -> str | None:
        arrays = {name: recall.get(name) or [] for name in ("facts", "reports", "passages")}
        return MEMORY_MESSAGE_PREFIX + "\n" + json.dumps(arrays, separators=(",", ":"))


class _EmptyRecallInjected(AgentMemory):
    """Renders a memory message whether or not the recall found anything."""

    async def recall_message(self, question: str) -> str | None:
        try:
            recall = await self.client.recall(
                question=question, data_subject_id=self.data_subject_id, **self.recall_controls
            )
            watermark = (await self.client.freshness()).as_watermark()
        except MemoryServiceError as error:
            self.on_error("recall", error)
            return None
        return render_memory_message(watermark, recall)


class _RaisesOn(AgentMemory):
    """Raises the failure of `fatal_operation` into the turn after reporting it."""

    fatal_operation = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        report = self.on_error

        def report_and_raise(operation: str, error: Exception) -> None:
            report(operation, error)
            if operation == self.fatal_operation:
                raise error

        self.on_error = report_and_raise


class _RecallFailureFatal(_RaisesOn):
    fatal_operation = "recall"


class _ContextFailureFatal(_RaisesOn):
    fatal_operation = "context"


class _CompactsWhenNotDue(ReferenceAgent):
    def compaction_due(self) -> bool:
        return True


class _IgnoresCompaction(ReferenceAgent):
    async def compacted(self, history: list[DriverMessage]) -> list[DriverMessage]:
        return history


class _CompactionDropsPerson(ReferenceAgent):
    async def compacted(self, history: list[DriverMessage]) -> list[DriverMessage]:
        context = await self.memory.context_message()
        return history if context is None else [self.memory_message(context)]


class _SwallowsStoreFailure(ReferenceAgent):
    async def store(self, user: str, reply: str) -> None:
        with suppress(MemoryStoreFailed):
            await super().store(user, reply)


class _StoresFailedTurns(ReferenceAgent):
    store_failed_turns = True


def _in_groups(groups: list[list[tuple[str, str]]]) -> list[dict[str, Any]]:
    return [
        {"role": role, "content": content, "group_ordinal": ordinal}
        for ordinal, group in enumerate(groups)
        for role, content in group
    ]


class _ObservesToolTraffic(ReferenceAgent):
    """Observes each tool call with its answer as one group between the person and the reply."""

    async def store(self, user: str, reply: str) -> None:
        said = [(m.role, m.content) for m in self.traffic]
        calls = [said[i : i + 2] for i in range(0, len(said), 2)]
        groups = [[("user", user)], *calls, [("assistant", reply)]]
        await self.memory.observe_messages(_in_groups(groups))


class _ObservesSynthetic(ReferenceAgent):
    async def store(self, user: str, reply: str) -> None:
        written = [[(m.role, m.content)] for m in self.synthetic]
        groups = [*written, [("user", user)], [("assistant", reply)]]
        await self.memory.observe_messages(_in_groups(groups))


class _OneGroup(ReferenceAgent):
    async def store(self, user: str, reply: str) -> None:
        messages = [{**m, "group_ordinal": 0} for m in observed_messages(user, reply)]
        await self.memory.observe_messages(messages)


class _RandomKey(AgentMemory):
    def key(self, messages: list[dict[str, Any]]) -> str:
        return str(uuid.uuid4())


class _KeyWithSeconds(AgentMemory):
    def key(self, messages: list[dict[str, Any]]) -> str:
        return turn_key(self.data_subject_id, f"{self.run_id}@{int(time.time())}", messages)


@dataclass(frozen=True)
class Break:
    """One switch: its name, the rule it breaks, the cases that catch it, and the variant."""

    name: str
    rule: str
    caught_by: tuple[str, ...]
    agent: type[ReferenceAgent] = ReferenceAgent
    memory: type[AgentMemory] = AgentMemory


_MEMORY_CASE = "memory_is_one_untrusted_user_message"
_COMPACTION_CASE = "compaction_hands_the_model_the_deployments_context"

BREAKS = (
    Break(
        "memory-as-system",
        "memory is a user message, never system",
        (_MEMORY_CASE, _COMPACTION_CASE),
        agent=_SystemMemory,
    ),
    Break(
        "memory-trusted",
        "memory is marked untrusted",
        (_MEMORY_CASE, _COMPACTION_CASE),
        agent=_TrustedMemory,
    ),
    Break(
        "memory-without-watermark",
        "the memory message carries the watermark and the plan",
        (_MEMORY_CASE,),
        memory=_BareMemory,
    ),
    Break(
        "memory-on-empty-recall",
        "memory is injected only when the recall returned something",
        (
            "an_empty_recall_injects_nothing",
            "without_compaction_the_history_reaches_the_model_unchanged",
            "context_failure_is_not_fatal",
            _COMPACTION_CASE,
        ),
        memory=_EmptyRecallInjected,
    ),
    Break(
        "recall-failure-fatal",
        "a recall failure is not fatal",
        ("recall_failure_is_not_fatal",),
        memory=_RecallFailureFatal,
    ),
    Break(
        "context-failure-fatal",
        "a context failure is not fatal",
        ("context_failure_is_not_fatal",),
        memory=_ContextFailureFatal,
    ),
    Break(
        "compaction-when-not-due",
        "the history is left alone when compaction is not due",
        ("without_compaction_the_history_reaches_the_model_unchanged",),
        agent=_CompactsWhenNotDue,
    ),
    Break(
        "compaction-ignored",
        "when compaction is due the deployment's context replaces the history",
        (_COMPACTION_CASE,),
        agent=_IgnoresCompaction,
    ),
    Break(
        "compaction-drops-person",
        "compaction keeps the person's message",
        (_COMPACTION_CASE,),
        agent=_CompactionDropsPerson,
    ),
    Break(
        "store-failure-swallowed",
        "a store failure is surfaced to the application",
        ("write_failure_is_never_silent", "a_failed_store_is_raised_to_the_application"),
        agent=_SwallowsStoreFailure,
    ),
    Break(
        "observe-on-model-failure",
        "a turn is observed only after a successful model call",
        ("store_only_on_success", "a_failed_model_call_sends_no_observation"),
        agent=_StoresFailedTurns,
    ),
    Break(
        "tool-traffic-observed",
        "tool traffic is never observed",
        ("filters_default_to_external_messages", "tool_traffic_contents_are_not_observed"),
        agent=_ObservesToolTraffic,
    ),
    Break(
        "synthetic-observed",
        "a message the framework wrote is never observed",
        ("no_synthetic_message_reaches_observe",),
        agent=_ObservesSynthetic,
    ),
    Break(
        "one-group",
        "each observed message is its own group",
        ("filters_default_to_external_messages", "tool_traffic_contents_are_not_observed"),
        agent=_OneGroup,
    ),
    Break(
        "random-key",
        "the idempotency key is derived from the turn",
        ("a_retried_turn_is_stored_once", "a_turn_retried_a_second_later_is_stored_once"),
        memory=_RandomKey,
    ),
    Break(
        "key-with-seconds",
        "the idempotency key does not depend on when the turn is stored",
        ("a_turn_retried_a_second_later_is_stored_once",),
        memory=_KeyWithSeconds,
    ),
)
