"""The LangGraph middleware in real `create_agent` agents against a real deployment."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from conformance_kit import failed_cases, marta
from satchel.conformance.cases import ContextAnswer, ContextTurn, ContextWatermark, Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import FaultProxy
from satchel.integrations.core import MemoryStoreFailed, observed_messages
from satchel.integrations.driver import DriverMessage, ModelFailure
from satchel.integrations.langgraph import MemoryMiddleware, is_untrusted, memory_message
from satchel.integrations.langgraph.driver import ScriptedChatModel
from satchel.memory.client import AsyncMemoryClient, MemoryClient, MemoryServiceError
from satchel.memory.message import UNTRUSTED_KEY, parse_memory_message, turn_key

QUESTION = "Where does Marta work?"
HISTORY: list[BaseMessage] = [
    HumanMessage("I moved the office to Cork in March."),
    AIMessage("Noted: the office is in Cork."),
]


@tool
def room_status(room: str) -> str:
    """Whether a meeting room is free."""
    return f"room {room}: free"


ASK_ROOM = AIMessage(
    content="", tool_calls=[{"name": "room_status", "args": {"room": "A"}, "id": "call_0"}]
)


class CountingClient(MemoryClient):
    """The sync client, counting recalls."""

    recalls = 0

    def recall(
        self, *, question: str, data_subject_id: str | None = None, **controls: Any
    ) -> dict[str, Any]:
        self.recalls += 1
        return super().recall(question=question, data_subject_id=data_subject_id, **controls)


@pytest.fixture
def client(deployment: Deployment) -> Iterator[MemoryClient]:
    with MemoryClient(deployment.api, deployment.token) as memory:
        yield memory


def seed(client: MemoryClient, subject: str) -> None:
    client.assert_records([marta(subject)])


def stored(client: MemoryClient) -> int:
    """The project's highest stored offset; -1 before its first turn (offsets start at 0)."""
    offset = client.freshness().stored
    return -1 if offset is None else offset


def build(
    middleware: MemoryMiddleware, *replies: AIMessage, fail: bool = False
) -> tuple[CompiledStateGraph[Any, Any, Any, Any], ScriptedChatModel]:
    model = ScriptedChatModel(replies=list(replies) or [AIMessage("At Ensera.")], fail=fail)
    agent = create_agent(
        model, tools=[room_status], middleware=[middleware], checkpointer=InMemorySaver()
    )
    return agent, model


def thread(name: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def said(text: str) -> dict[str, list[HumanMessage]]:
    return {"messages": [HumanMessage(text)]}


def texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def test_recall_reaches_the_model_as_one_untrusted_user_message_in_the_request_only(
    client: MemoryClient, subject: str
) -> None:
    seed(client, subject)
    agent, model = build(MemoryMiddleware(client=client, data_subject_id=subject))
    state = agent.invoke(said(QUESTION), thread())
    memory, person = model.calls[0]
    assert isinstance(memory, HumanMessage)
    assert is_untrusted(memory)
    assert "Ensera" in str(parse_memory_message(memory.text).facts)
    assert person.text == QUESTION
    assert texts(state["messages"]) == [QUESTION, "At Ensera."]


async def test_ainvoke_recalls_and_observes_through_the_async_client(
    deployment: Deployment, client: MemoryClient, subject: str
) -> None:
    seed(client, subject)
    before = stored(client)
    async with AsyncMemoryClient(deployment.api, deployment.token) as memory:
        agent, model = build(MemoryMiddleware(async_client=memory, data_subject_id=subject))
        await agent.ainvoke(said(QUESTION), thread())
    assert [is_untrusted(m) for m in model.calls[0]] == [True, False]
    assert stored(client) == before + 1


def test_every_model_call_of_a_run_carries_the_one_recall(
    deployment: Deployment, subject: str
) -> None:
    counting = CountingClient(deployment.api, deployment.token)
    with counting:
        seed(counting, subject)
        middleware = MemoryMiddleware(client=counting, data_subject_id=subject)
        agent, model = build(middleware, ASK_ROOM, AIMessage("Room A is free."))
        agent.invoke(said("Is room A free? " + QUESTION), thread())
    first, second = model.calls
    assert is_untrusted(first[0]) and is_untrusted(second[0])
    assert first[0].text == second[0].text
    assert counting.recalls == 1


def test_an_empty_recall_injects_nothing(client: MemoryClient, subject: str) -> None:
    agent, model = build(MemoryMiddleware(client=client, data_subject_id=subject))
    agent.invoke(said(QUESTION), thread())
    assert texts(model.calls[0]) == [QUESTION]


def test_a_recall_failure_runs_without_memory_and_reaches_the_hook(
    client: MemoryClient, subject: str
) -> None:
    seed(client, subject)
    errors: list[tuple[str, Exception]] = []
    middleware = MemoryMiddleware(
        client=client,
        data_subject_id=subject,
        on_error=lambda operation, error: errors.append((operation, error)),
        recall_controls={"max_characters": 0},
    )
    before = stored(client)
    agent, model = build(middleware)
    agent.invoke(said(QUESTION), thread())
    assert texts(model.calls[0]) == [QUESTION]
    assert [operation for operation, _ in errors] == ["recall"]
    assert isinstance(errors[0][1], MemoryServiceError)
    assert stored(client) == before + 1


def test_only_the_person_and_the_final_reply_are_observed_under_the_thread_turn_key(
    client: MemoryClient, subject: str
) -> None:
    agent, _ = build(
        MemoryMiddleware(client=client, data_subject_id=subject),
        ASK_ROOM,
        AIMessage("Room A is free."),
    )
    before = stored(client)
    agent.invoke(said("Is room A free?"), thread("t7"))
    assert stored(client) == before + 1
    expected = observed_messages("Is room A free?", "Room A is free.")
    client.observe(
        idempotency_key=turn_key(subject, "t7", expected),
        messages=expected,
        data_subject_id=subject,
    )
    assert stored(client) == before + 1


def test_a_retried_turn_on_its_thread_is_stored_once_and_another_thread_is_another_turn(
    client: MemoryClient, subject: str
) -> None:
    middleware = MemoryMiddleware(client=client, data_subject_id=subject)
    before = stored(client)
    for name in ("t1", "t1", "t2"):
        agent, _ = build(middleware, AIMessage("Noted."))
        agent.invoke(said("I moved to Oslo last month."), thread(name))
    assert stored(client) == before + 2


def test_a_failed_model_call_is_not_observed(client: MemoryClient, subject: str) -> None:
    before = stored(client)
    agent, _ = build(MemoryMiddleware(client=client, data_subject_id=subject), fail=True)
    with pytest.raises(ModelFailure):
        agent.invoke(said(QUESTION), thread())
    assert stored(client) == before


def test_a_store_failure_reaches_the_hook_is_raised_and_the_store_step_can_be_resumed(
    deployment: Deployment, client: MemoryClient, subject: str
) -> None:
    errors: list[str] = []
    before = stored(client)
    with MemoryClient(deployment.api, "not-a-token") as refused:
        middleware = MemoryMiddleware(
            client=refused,
            data_subject_id=subject,
            on_error=lambda operation, error: errors.append(operation),
        )
        agent, _ = build(middleware)
        with pytest.raises(MemoryStoreFailed):
            agent.invoke(said(QUESTION), thread())
    assert errors == ["recall", "observe"]
    assert stored(client) == before
    middleware.client = client
    state = agent.invoke(None, thread())
    assert texts(state["messages"]) == [QUESTION, "At Ensera."]
    assert stored(client) == before + 1


def test_compaction_replaces_the_history_with_the_deployments_context(
    deployment: Deployment, proxied: tuple[FaultProxy, str], proxy: FaultProxy, subject: str
) -> None:
    earlier = DriverMessage(role="user", content="Book the all-hands for Friday.")
    answer = ContextAnswer(
        watermark=ContextWatermark(stored=9, formed=9),
        turns=[ContextTurn(log_offset=9, occurred_at="2026-09-01T09:00:00Z", messages=[earlier])],
        characters=30,
    )
    proxy.configure(Faults(), answer)
    with MemoryClient(proxied[1], deployment.token) as client:
        middleware = MemoryMiddleware(
            client=client, data_subject_id=subject, compact_trigger=("messages", 3)
        )
        agent, model = build(middleware, AIMessage("In Cork."))
        agent.update_state(thread(), {"messages": HISTORY})
        state = agent.invoke(said("Where is the office now?"), thread())
    context, person = model.calls[0]
    assert is_untrusted(context)
    document = parse_memory_message(context.text)
    assert document.turns == [answer.turns[0].model_dump(mode="json", exclude_defaults=True)]
    assert person.text == "Where is the office now?"
    assert texts(state["messages"]) == [context.text, "Where is the office now?", "In Cork."]
    assert is_untrusted(state["messages"][0])


def test_compaction_waits_for_its_trigger(client: MemoryClient, subject: str) -> None:
    middleware = MemoryMiddleware(
        client=client, data_subject_id=subject, compact_trigger=("messages", 50)
    )
    agent, model = build(middleware)
    agent.update_state(thread(), {"messages": HISTORY})
    agent.invoke(said(QUESTION), thread())
    assert texts(model.calls[0]) == [*texts(HISTORY), QUESTION]


@pytest.mark.parametrize("characters", [-1, None], ids=["context_refused", "context_empty"])
def test_a_failed_or_empty_context_keeps_the_history(
    client: MemoryClient, subject: str, characters: int | None
) -> None:
    errors: list[str] = []
    middleware = MemoryMiddleware(
        client=client,
        data_subject_id=subject,
        on_error=lambda operation, error: errors.append(operation),
        context_characters=characters,
        compact_trigger=("tokens", 1),
    )
    agent, model = build(middleware)
    agent.update_state(thread(), {"messages": HISTORY})
    state = agent.invoke(said(QUESTION), thread())
    assert texts(model.calls[0]) == [*texts(HISTORY), QUESTION]
    assert texts(state["messages"]) == [*texts(HISTORY), QUESTION, "At Ensera."]
    assert errors == (["context"] if characters is not None else [])


def test_the_subject_can_come_from_the_run_config(client: MemoryClient, subject: str) -> None:
    seed(client, subject)
    agent, model = build(MemoryMiddleware(client=client))
    config: RunnableConfig = {"configurable": {"thread_id": "t1", "data_subject_id": subject}}
    agent.invoke(said(QUESTION), config)
    assert is_untrusted(model.calls[0][0])


def test_the_untrusted_mark_stays_out_of_a_provider_request() -> None:
    message = memory_message("taisce-memory/v1 untrusted\n{}")
    assert message.additional_kwargs == {UNTRUSTED_KEY: True}
    assert convert_to_openai_messages([message]) == [
        {"role": "user", "content": "taisce-memory/v1 untrusted\n{}"}
    ]


def test_the_options_are_checked_when_the_middleware_is_made(client: MemoryClient) -> None:
    with pytest.raises(ValueError, match="MemoryClient"):
        MemoryMiddleware()
    with pytest.raises(ValueError, match="compact_trigger"):
        MemoryMiddleware(client=client, compact_trigger=("messages", 0))


def test_the_driver_passes_every_shipped_case(deployment: Deployment) -> None:
    assert failed_cases("langgraph", deployment) == {}
