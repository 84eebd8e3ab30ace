"""The shared turn policy against a real deployment, behind the fault proxy where it must fail."""

from __future__ import annotations

import pytest

from conformance_kit import STATED_ANSWER, STATED_CONTEXT, Hook, observed_bodies
from satchel.conformance.cases import Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import FaultProxy
from satchel.integrations.core import (
    AgentMemory,
    MemoryStoreFailed,
    SyncAgentMemory,
    observed_messages,
)
from satchel.memory.client import AsyncMemoryClient, MemoryClient
from satchel.memory.message import parse_memory_message, turn_key


async def test_a_fresh_subjects_context_is_empty_so_there_is_no_context_message(
    deployment: Deployment, subject: str
) -> None:
    hook = Hook()
    async with AsyncMemoryClient(deployment.api, deployment.token) as client:
        memory = AgentMemory(client, data_subject_id=subject, on_error=hook)
        assert await memory.context_message() is None
    with MemoryClient(deployment.api, deployment.token) as sync_client:
        sync_memory = SyncAgentMemory(sync_client, data_subject_id=subject, on_error=hook)
        assert sync_memory.context_message() is None
    assert hook.calls == []


async def test_a_context_with_segments_is_one_memory_message(
    deployment: Deployment, proxied: tuple[FaultProxy, str], proxy: FaultProxy, subject: str
) -> None:
    proxy.configure(Faults(), STATED_ANSWER)
    async with AsyncMemoryClient(proxied[1], deployment.token) as client:
        text = await AgentMemory(client, data_subject_id=subject).context_message()
    assert text is not None
    context = parse_memory_message(text)
    assert (context.segments, context.turns) == (
        STATED_CONTEXT["segments"],
        STATED_CONTEXT["turns"],
    )


async def test_observe_stores_the_person_and_the_reply_as_observe_messages_does(
    deployment: Deployment, proxied: tuple[FaultProxy, str], proxy: FaultProxy, subject: str
) -> None:
    groups = [{"role": "user", "content": "I moved to Oslo.", "group_ordinal": 0}]
    async with AsyncMemoryClient(proxied[1], deployment.token) as client:
        memory = AgentMemory(client, data_subject_id=subject, run_id="r1")
        await memory.observe("I moved to Oslo.", "Noted.")
        await memory.observe_messages(groups)
    bodies = observed_bodies(proxy)
    assert [body["messages"] for body in bodies] == [
        observed_messages("I moved to Oslo.", "Noted."),
        groups,
    ]
    assert [body["idempotency_key"] for body in bodies] == [
        turn_key(subject, "r1", body["messages"]) for body in bodies
    ]


def test_a_refused_observation_reaches_the_hook_and_is_raised(
    deployment: Deployment, proxied: tuple[FaultProxy, str], proxy: FaultProxy, subject: str
) -> None:
    proxy.configure(Faults(observe="unavailable"), None)
    hook = Hook()
    with MemoryClient(proxied[1], deployment.token) as client:
        memory = SyncAgentMemory(client, data_subject_id=subject, on_error=hook)
        with pytest.raises(MemoryStoreFailed) as raised:
            memory.observe_messages(observed_messages("I moved to Oslo.", "Noted."))
    assert raised.value.cause.code == "unavailable"
    assert hook.operations == ["observe"]
