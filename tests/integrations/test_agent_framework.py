"""The Agent Framework integration against a real deployment: a real `Agent`, a scripted model.

Faults and stated contexts come from the conformance fault proxy in front of the deployment.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, InMemoryHistoryProvider, Message

from conformance_kit import STATED_ANSWER, STATED_CONTEXT, Hook, failed_cases, seed_marta
from conformance_kit import stored as stored_offset
from satchel.conformance.cases import Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import CONTEXTS, FaultProxy
from satchel.integrations.agent_framework import (
    ContextCompactionProvider,
    MemoryProvider,
    MemoryStoreFailed,
)
from satchel.integrations.agent_framework.driver import ScriptedChatClient, turn_tool
from satchel.integrations.driver import ModelFailure, RecordingClient, ToolCall, Turn
from satchel.memory.message import UNTRUSTED_KEY, parse_memory_message, turn_key

HISTORY = [
    ("user", "I moved the office to Cork in March."),
    ("assistant", "Noted: the office is in Cork."),
    ("user", "We hired two engineers in April."),
    ("assistant", "Noted: two engineers joined in April."),
]


@dataclass
class Rig:
    """One agent over the providers, with what the model was handed and what was observed."""

    agent: Agent[Any]
    model: ScriptedChatClient
    memory: RecordingClient
    subject: str
    errors: Hook

    def session(
        self, held: list[tuple[str, str]], session_id: str = "conversation-1"
    ) -> AgentSession:
        session = self.agent.create_session(session_id=session_id)
        session.state[InMemoryHistoryProvider.DEFAULT_SOURCE_ID] = {
            "messages": [Message(role, [text]) for role, text in held]
        }
        return session

    def first_request(self) -> list[tuple[str, str, bool]]:
        return [
            (m.role, m.text, bool(m.additional_properties.get(UNTRUSTED_KEY)))
            for m in self.model.requests[0]
        ]


@pytest.fixture
async def rig_for(proxied: tuple[FaultProxy, str], deployment: Deployment) -> AsyncIterator[Any]:
    memories: list[RecordingClient] = []

    def build(turn: Turn, *, max_messages: int | None = None, subject: str = "") -> Rig:
        memory = RecordingClient(proxied[1], deployment.token)
        memories.append(memory)
        subject = subject or str(uuid.uuid4())
        hook = Hook()
        model = ScriptedChatClient(turn)
        agent = Agent(
            client=model,
            tools=[turn_tool(turn)],
            context_providers=[
                InMemoryHistoryProvider(),
                ContextCompactionProvider(
                    memory, data_subject_id=subject, max_messages=max_messages, on_error=hook
                ),
                MemoryProvider(memory, data_subject_id=subject, on_error=hook),
            ],
        )
        return Rig(agent, model, memory, subject, hook)

    yield build
    for memory in memories:
        await memory.aclose()


def held(session: AgentSession) -> list[tuple[str, str]]:
    messages = session.state[InMemoryHistoryProvider.DEFAULT_SOURCE_ID]["messages"]
    return [(m.role, m.text) for m in messages]


async def test_recall_is_one_untrusted_user_message_right_before_the_person(
    proxy: FaultProxy, rig_for: Any
) -> None:
    rig = rig_for(Turn(user="Where does Marta work?", assistant="At Ensera."))
    await seed_marta(rig.memory, rig.subject)
    response = await rig.agent.run("Where does Marta work?", session=rig.session(HISTORY[:2]))
    assert response.text == "At Ensera."
    sent = rig.first_request()
    assert [(role, text) for role, text, _ in sent[:2]] == HISTORY[:2]
    assert [(role, untrusted) for role, _, untrusted in sent[2:]] == [
        ("user", True),
        ("user", False),
    ]
    assert sent[3][1] == "Where does Marta work?"
    recalled = parse_memory_message(sent[2][1])
    assert not recalled.is_context
    assert "Marta works at Ensera." in sent[2][1]
    assert set(recalled.watermark) == {"stored", "formed", "parked"}
    assert rig.errors.calls == []


async def test_an_empty_recall_injects_nothing(proxy: FaultProxy, rig_for: Any) -> None:
    rig = rig_for(Turn(user="What is my favourite colour?", assistant="You have not said."))
    await rig.agent.run("What is my favourite colour?", session=rig.session([]))
    assert rig.first_request() == [("user", "What is my favourite colour?", False)]
    assert len(rig.memory.observations) == 1


async def test_recall_failure_runs_without_memory_and_tells_the_hook(
    proxy: FaultProxy, rig_for: Any
) -> None:
    rig = rig_for(Turn(user="Where does Marta work?", assistant="I do not know."))
    await seed_marta(rig.memory, rig.subject)
    proxy.configure(Faults(recall="unavailable"), None)
    before = await stored_offset(rig.memory)
    response = await rig.agent.run("Where does Marta work?", session=rig.session([]))
    assert response.text == "I do not know."
    assert rig.first_request() == [("user", "Where does Marta work?", False)]
    assert rig.errors.operations == ["recall"]
    assert await stored_offset(rig.memory) - before == 1


async def test_only_the_person_and_the_final_reply_are_observed_under_the_turn_key(
    proxy: FaultProxy, rig_for: Any
) -> None:
    call = ToolCall(call="calendar.book(room=A, day=Tuesday)", result="booked: A/Tuesday")
    turn = Turn(
        user="Book the room for Tuesday.",
        tool_calls=[call],
        assistant="Room A is booked for Tuesday.",
    )
    rig = rig_for(turn)
    session = rig.session([("assistant", "Summary of earlier conversation: none.")])
    await rig.agent.run(turn.user, session=session)
    second = rig.model.requests[1]
    assert any(c.result == "booked: A/Tuesday" for m in second for c in m.contents)
    (observation,) = rig.memory.observations
    messages = observation["messages"]
    assert messages == [
        {"role": "user", "content": "Book the room for Tuesday.", "group_ordinal": 0},
        {"role": "assistant", "content": "Room A is booked for Tuesday.", "group_ordinal": 1},
    ]
    assert observation["idempotency_key"] == turn_key(rig.subject, "conversation-1", messages)
    assert observation["data_subject_id"] == rig.subject


async def test_a_failed_model_call_is_not_observed(proxy: FaultProxy, rig_for: Any) -> None:
    rig = rig_for(Turn(user="Remember that I prefer written notes.", model_failure=True))
    session = rig.session(HISTORY[:2])
    with pytest.raises(ModelFailure):
        await rig.agent.run("Remember that I prefer written notes.", session=session)
    assert rig.memory.observations == []
    assert held(session) == HISTORY[:2]


async def test_a_store_failure_is_reported_raised_and_leaves_the_session_as_it_was(
    proxy: FaultProxy, rig_for: Any
) -> None:
    rig = rig_for(Turn(user="My badge number is 4417.", assistant="Noted."))
    proxy.configure(Faults(observe="unavailable"), None)
    session = rig.session(HISTORY[:2])
    with pytest.raises(MemoryStoreFailed) as raised:
        await rig.agent.run("My badge number is 4417.", session=session)
    assert raised.value.cause.code == "unavailable"
    assert rig.errors.operations == ["observe"]
    assert held(session) == HISTORY[:2]


async def test_a_retried_turn_is_stored_once_and_the_session_id_is_the_run_id(
    proxy: FaultProxy, rig_for: Any
) -> None:
    turn = Turn(user="I moved to Oslo last month.", assistant="Noted.")
    first = rig_for(turn)
    before = await stored_offset(first.memory)
    await first.agent.run(turn.user, session=first.session([]))
    retry = rig_for(turn, subject=first.subject)
    await retry.agent.run(turn.user, session=retry.session([]))
    assert await stored_offset(first.memory) - before == 1
    keys = {o["idempotency_key"] for o in [*first.memory.observations, *retry.memory.observations]}
    assert len(keys) == 1
    other = rig_for(turn, subject=first.subject)
    await other.agent.run(turn.user, session=other.session([], session_id="conversation-2"))
    assert other.memory.observations[0]["idempotency_key"] not in keys


async def test_compaction_is_off_by_default(proxy: FaultProxy, rig_for: Any) -> None:
    proxy.configure(Faults(), STATED_ANSWER)
    rig = rig_for(Turn(user="Where is the office now?", assistant="In Cork."))
    await rig.agent.run("Where is the office now?", session=rig.session(HISTORY))
    assert proxy.requests("POST", CONTEXTS) == []
    assert [(r, t) for r, t, _ in rig.first_request()] == [
        *HISTORY,
        ("user", "Where is the office now?"),
    ]


async def test_due_compaction_puts_the_context_in_place_of_the_held_history(
    proxy: FaultProxy, rig_for: Any
) -> None:
    proxy.configure(Faults(), STATED_ANSWER)
    rig = rig_for(Turn(user="Where is the office now?", assistant="In Cork."), max_messages=2)
    session = rig.session(HISTORY)
    await rig.agent.run("Where is the office now?", session=session)
    (context_message, person) = rig.first_request()
    assert context_message[0] == "user" and context_message[2] is True
    context = parse_memory_message(context_message[1])
    assert (context.segments, context.turns) == (
        STATED_CONTEXT["segments"],
        STATED_CONTEXT["turns"],
    )
    assert person == ("user", "Where is the office now?", False)
    assert held(session) == [
        ("user", context_message[1]),
        ("user", "Where is the office now?"),
        ("assistant", "In Cork."),
    ]
    (observation,) = rig.memory.observations
    assert [m["content"] for m in observation["messages"]] == [
        "Where is the office now?",
        "In Cork.",
    ]


async def test_compaction_not_yet_due_leaves_the_history(proxy: FaultProxy, rig_for: Any) -> None:
    proxy.configure(Faults(), STATED_ANSWER)
    rig = rig_for(Turn(user="Where is the office now?", assistant="In Cork."), max_messages=4)
    await rig.agent.run("Where is the office now?", session=rig.session(HISTORY))
    assert proxy.requests("POST", CONTEXTS) == []
    assert len(rig.first_request()) == len(HISTORY) + 1


async def test_a_context_failure_keeps_the_history_and_tells_the_hook(
    proxy: FaultProxy, rig_for: Any
) -> None:
    proxy.configure(Faults(context="unavailable"), STATED_ANSWER)
    rig = rig_for(Turn(user="Where is the office now?", assistant="In Cork."), max_messages=2)
    session = rig.session(HISTORY)
    response = await rig.agent.run("Where is the office now?", session=session)
    assert response.text == "In Cork."
    assert [(r, t, u) for r, t, u in rig.first_request()] == [
        *((r, t, False) for r, t in HISTORY),
        ("user", "Where is the office now?", False),
    ]
    assert rig.errors.operations == ["context"]
    assert held(session) == [
        *HISTORY,
        ("user", "Where is the office now?"),
        ("assistant", "In Cork."),
    ]


async def test_an_empty_context_keeps_the_history(proxy: FaultProxy, rig_for: Any) -> None:
    rig = rig_for(Turn(user="Where is the office now?", assistant="In Cork."), max_messages=2)
    await rig.agent.run("Where is the office now?", session=rig.session(HISTORY))
    assert len(proxy.requests("POST", CONTEXTS)) == 1
    assert [(r, t) for r, t, _ in rig.first_request()][:4] == HISTORY
    assert rig.errors.calls == []


async def test_compaction_listed_before_its_history_provider_is_refused(
    proxy: FaultProxy, rig_for: Any
) -> None:
    rig = rig_for(Turn(user="Hello.", assistant="Hello."), max_messages=2)
    providers = rig.agent.context_providers
    providers[0], providers[1] = providers[1], providers[0]
    with pytest.raises(ValueError, match="listed before"):
        await rig.agent.run("Hello.", session=rig.session(HISTORY))


def test_the_driver_passes_every_shipped_case(deployment: Deployment) -> None:
    assert failed_cases("agent-framework", deployment) == {}
