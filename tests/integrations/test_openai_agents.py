"""The OpenAI Agents SDK integration against a real deployment, with the SDK's scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx2
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    TResponseInputItem,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import SQLiteSession
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from openai import AsyncOpenAI
from pydantic import BaseModel

from conformance_kit import (
    STATED_ANSWER,
    Hook,
    failed_cases,
    observed_bodies,
    seed_marta,
    stored,
)
from satchel.conformance.cases import Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import FaultProxy
from satchel.integrations.core import MemoryStoreFailed
from satchel.integrations.driver import ModelFailure
from satchel.integrations.openai_agents import SessionMemory, compact_at, is_untrusted
from satchel.integrations.openai_agents.items import item_role, item_text
from satchel.memory.client import AsyncMemoryClient
from satchel.memory.message import MEMORY_MESSAGE_PREFIX, parse_memory_message

set_tracing_disabled(True)
QUIET = RunConfig(tracing_disabled=True)


@pytest.fixture
async def via_proxy(
    deployment: Deployment, proxied: tuple[FaultProxy, str], proxy: FaultProxy
) -> AsyncIterator[tuple[FaultProxy, AsyncMemoryClient]]:
    """A client through the fault proxy, which records requests and refuses what it is told."""
    async with AsyncMemoryClient(proxied[1], deployment.token) as memory_client:
        yield proxy, memory_client


@pytest.fixture
async def client(deployment: Deployment) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(deployment.api, deployment.token) as memory_client:
        yield memory_client


def observations(proxy: FaultProxy) -> list[list[tuple[str, str, int]]]:
    """Each observe request's messages as (role, content, group ordinal)."""
    return [
        [(m["role"], m["content"], m["group_ordinal"]) for m in body["messages"]]
        for body in observed_bodies(proxy)
    ]


def agent_for(model: Any, **options: Any) -> Agent[Any]:
    return Agent(name="assistant", instructions="Answer the person.", model=model, **options)


def replying(text: str) -> ScriptedModel:
    return ScriptedModel([ModelStep(output=[assistant_message(text)])])


def first_input(model: ScriptedModel) -> list[Any]:
    assert model.first_call is not None
    return list(model.first_call.input)


async def loaded_session(name: str, *messages: tuple[str, str]) -> SQLiteSession:
    session = SQLiteSession(name)
    await session.add_items(
        [cast(TResponseInputItem, {"role": role, "content": text}) for role, text in messages]
    )
    return session


def plain(items: list[Any]) -> list[tuple[str, str]]:
    return [(item_role(item), item_text(item)) for item in items]


async def test_recall_is_one_untrusted_user_message_before_the_person(
    client: AsyncMemoryClient, subject: str
) -> None:
    await seed_marta(client, subject)
    session = await loaded_session("recall", ("user", "Hello."), ("assistant", "Hi."))
    model = replying("At Ensera.")
    memory = SessionMemory(client, session, data_subject_id=subject)

    result = await memory.run(agent_for(model), "Where does Marta work?", run_config=QUIET)

    sent = first_input(model)
    untrusted = [item for item in sent if is_untrusted(item)]
    assert len(untrusted) == 1
    assert untrusted[0]["role"] == "user"
    assert parse_memory_message(untrusted[0]["content"]).facts
    assert plain(sent)[-1] == ("user", "Where does Marta work?")
    assert is_untrusted(sent[-2])
    assert plain(sent)[:2] == [("user", "Hello."), ("assistant", "Hi.")]
    assert result.final_output == "At Ensera."
    kept = await session.get_items()
    assert not any(is_untrusted(item) for item in kept)
    assert not any(MEMORY_MESSAGE_PREFIX in item_text(item) for item in kept)


async def test_a_streamed_run_gets_memory_and_is_observed(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    await seed_marta(faulted, subject)
    model = replying("At Ensera.")
    memory = SessionMemory(faulted, SQLiteSession("streamed"), data_subject_id=subject)
    user = "Where does Marta work?"

    config = await memory.prepare(user, QUIET)
    streamed = Runner.run_streamed(
        agent_for(model), user, session=memory.session, run_config=config
    )
    async for _ in streamed.stream_events():
        pass
    await memory.observe(user, streamed)

    assert [is_untrusted(item) for item in first_input(model)] == [True, False]
    assert observations(proxy) == [[("user", user, 0), ("assistant", "At Ensera.", 1)]]


async def test_an_empty_recall_injects_nothing(client: AsyncMemoryClient, subject: str) -> None:
    session = SQLiteSession("empty")
    memory = SessionMemory(client, session, data_subject_id=subject)

    config = await memory.prepare("What is my favourite colour?", QUIET)

    assert config.call_model_input_filter is None


async def test_an_application_filter_runs_first_and_memory_is_still_added(
    client: AsyncMemoryClient, subject: str
) -> None:
    await seed_marta(client, subject)
    seen: list[int] = []

    def count(data: Any) -> Any:
        seen.append(len(data.model_data.input))
        return data.model_data

    model = replying("At Ensera.")
    memory = SessionMemory(client, SQLiteSession("filtered"), data_subject_id=subject)
    config = RunConfig(tracing_disabled=True, call_model_input_filter=count)

    await memory.run(agent_for(model), "Where does Marta work?", run_config=config)

    assert seen == [1]
    assert [is_untrusted(item) for item in first_input(model)] == [True, False]


async def test_only_the_person_and_the_final_reply_are_observed(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    await seed_marta(faulted, subject)

    @function_tool
    def lookup(city: str) -> str:
        """Look up the weather.

        Args:
            city: The city.
        """
        return f"{city}: 14C, light rain"

    model = ScriptedModel(
        [
            ModelStep(output=[function_call("lookup", {"city": "Cork"}, call_id="c1")]),
            ModelStep(output=[assistant_message("Light rain in Cork.")]),
        ]
    )
    session = await loaded_session("tools", ("assistant", "Summary: we spoke about Cork."))
    memory = SessionMemory(faulted, session, data_subject_id=subject)
    question = "Where does Marta work? And the weather?"

    await memory.run(agent_for(model, tools=[lookup]), question, run_config=QUIET)

    assert len(model.calls) == 2
    assert sum(is_untrusted(item) for item in model.calls[1].input) == 1
    assert observations(proxy) == [[("user", question, 0), ("assistant", "Light rain in Cork.", 1)]]


class Place(BaseModel):
    city: str


async def test_a_structured_output_is_observed_as_its_text(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    model = replying('{"city":"Cork"}')
    memory = SessionMemory(faulted, SQLiteSession("structured"), data_subject_id=subject)

    result = await memory.run(agent_for(model, output_type=Place), "Where?", run_config=QUIET)

    assert result.final_output == Place(city="Cork")
    assert observations(proxy) == [[("user", "Where?", 0), ("assistant", '{"city":"Cork"}', 1)]]


async def test_recall_failure_runs_without_memory_and_reports_it(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    await seed_marta(faulted, subject)
    proxy.configure(Faults(recall="unavailable"), None)
    hook = Hook()
    model = replying("I do not know.")
    memory = SessionMemory(
        faulted, SQLiteSession("recall-down"), data_subject_id=subject, on_error=hook
    )
    before = await stored(faulted)

    await memory.run(agent_for(model), "Where does Marta work?", run_config=QUIET)

    assert hook.operations == ["recall"]
    assert not any(is_untrusted(item) for item in first_input(model))
    assert await stored(faulted) - before == 1


async def test_compaction_replaces_the_history_with_the_deployments_context(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    proxy.configure(Faults(), STATED_ANSWER)
    session = await loaded_session(
        "compacting",
        ("user", "I moved the office to Cork."),
        ("assistant", "Noted: the office is in Cork."),
    )
    model = replying("In Cork.")
    memory = SessionMemory(
        faulted, session, data_subject_id=subject, should_trigger_compaction=compact_at(1)
    )

    await memory.run(agent_for(model), "Where is the office now?", run_config=QUIET)

    asked = proxy.requests("POST", "/v1/contexts")
    assert [request.body["data_subject_id"] for request in asked] == [subject]
    sent = first_input(model)
    assert plain(sent) == [("user", sent[0]["content"]), ("user", "Where is the office now?")]
    assert is_untrusted(sent[0])
    context = parse_memory_message(sent[0]["content"])
    stated = STATED_ANSWER.model_dump(mode="json", exclude_unset=True)
    assert (context.segments, context.turns) == (stated["segments"], stated["turns"])
    kept = await session.get_items()
    assert is_untrusted(kept[0])
    assert plain(kept)[1:] == [("user", "Where is the office now?"), ("assistant", "In Cork.")]
    assert observations(proxy) == [
        [("user", "Where is the office now?", 0), ("assistant", "In Cork.", 1)]
    ]


async def test_a_context_with_nothing_formed_keeps_the_history(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    session = await loaded_session("unformed", ("user", "Cork."), ("assistant", "Noted."))
    model = replying("In Cork.")
    memory = SessionMemory(
        faulted, session, data_subject_id=subject, should_trigger_compaction=compact_at(1)
    )

    await memory.run(agent_for(model), "Where is the office?", run_config=QUIET)

    assert len(proxy.requests("POST", "/v1/contexts")) == 1
    assert plain(first_input(model)) == [
        ("user", "Cork."),
        ("assistant", "Noted."),
        ("user", "Where is the office?"),
    ]


async def test_compaction_is_off_by_default(client: AsyncMemoryClient, subject: str) -> None:
    history = [("user", f"Note {n}.") if n % 2 == 0 else ("assistant", "Noted.") for n in range(30)]
    session = await loaded_session("long", *history)
    model = replying("Done.")
    memory = SessionMemory(client, session, data_subject_id=subject)

    await memory.run(agent_for(model), "Anything else?", run_config=QUIET)

    assert plain(first_input(model)) == [*history, ("user", "Anything else?")]


async def test_compaction_not_yet_due_keeps_the_history(
    client: AsyncMemoryClient, subject: str
) -> None:
    session = await loaded_session("short", ("user", "Hi."), ("assistant", "Hello."))
    model = replying("Fine.")
    memory = SessionMemory(
        client, session, data_subject_id=subject, should_trigger_compaction=compact_at(5)
    )

    await memory.run(agent_for(model), "How are you?", run_config=QUIET)

    assert plain(first_input(model))[:2] == [("user", "Hi."), ("assistant", "Hello.")]


async def test_context_failure_keeps_the_history_and_reports_it(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    proxy.configure(Faults(context="unavailable"), None)
    hook = Hook()
    session = await loaded_session("context-down", ("user", "Cork."), ("assistant", "Noted."))
    model = replying("In Cork.")
    memory = SessionMemory(
        faulted,
        session,
        data_subject_id=subject,
        on_error=hook,
        should_trigger_compaction=compact_at(1),
    )
    before = await stored(faulted)

    await memory.run(agent_for(model), "Where is the office?", run_config=QUIET)

    assert hook.operations == ["context"]
    assert plain(first_input(model)) == [
        ("user", "Cork."),
        ("assistant", "Noted."),
        ("user", "Where is the office?"),
    ]
    assert await stored(faulted) - before == 1


async def test_a_failed_model_call_is_not_observed(client: AsyncMemoryClient, subject: str) -> None:
    hook = Hook()
    model = ScriptedModel([ModelStep.raise_error(ModelFailure())])
    memory = SessionMemory(client, SQLiteSession("fails"), data_subject_id=subject, on_error=hook)
    before = await stored(client)

    with pytest.raises(ModelFailure):
        await memory.run(agent_for(model), "Remember my notes.", run_config=QUIET)

    assert await stored(client) == before
    assert hook.operations == []


async def test_a_store_failure_is_reported_and_raised(
    via_proxy: tuple[FaultProxy, AsyncMemoryClient], subject: str
) -> None:
    proxy, faulted = via_proxy
    proxy.configure(Faults(observe="unavailable"), None)
    hook = Hook()
    memory = SessionMemory(
        faulted, SQLiteSession("store-down"), data_subject_id=subject, on_error=hook
    )

    with pytest.raises(MemoryStoreFailed) as raised:
        await memory.run(agent_for(replying("Noted.")), "I prefer notes.", run_config=QUIET)

    assert hook.operations == ["observe"]
    assert raised.value.cause.code == "unavailable"
    assert len(observations(proxy)) == 1


async def test_a_retried_turn_is_stored_once(client: AsyncMemoryClient, subject: str) -> None:
    before = await stored(client)
    for _ in range(2):
        memory = SessionMemory(client, SQLiteSession("retried"), data_subject_id=subject)
        await memory.run(agent_for(replying("Noted.")), "I moved to Oslo.", run_config=QUIET)
    assert await stored(client) - before == 1

    other = SessionMemory(client, SQLiteSession("another"), data_subject_id=subject)
    await other.run(agent_for(replying("Noted.")), "I moved to Oslo.", run_config=QUIET)
    assert await stored(client) - before == 2


class Capture:
    """A provider stand-in on the HTTP transport: records the request body, refuses the call."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return httpx2.Response(400, json={"error": {"message": "captured", "type": "test"}})

    def openai(self) -> AsyncOpenAI:
        transport = httpx2.MockTransport(self.handler)
        http = httpx2.AsyncClient(transport=transport)
        return AsyncOpenAI(api_key="unused", max_retries=0, http_client=http)


@pytest.mark.parametrize("flavour", ["responses", "chat"])
async def test_the_memory_message_a_provider_receives_is_a_plain_user_message(
    client: AsyncMemoryClient, subject: str, flavour: str
) -> None:
    await seed_marta(client, subject)
    capture = Capture()
    model: Any = (
        OpenAIResponsesModel("gpt-4.1", capture.openai())
        if flavour == "responses"
        else OpenAIChatCompletionsModel("gpt-4.1", capture.openai())
    )
    memory = SessionMemory(client, SQLiteSession(flavour), data_subject_id=subject)
    config = await memory.prepare("Where does Marta work?", QUIET)

    with pytest.raises(Exception, match="captured"):
        await Runner.run(agent_for(model), "Where does Marta work?", run_config=config)

    sent = capture.bodies[0]["input" if flavour == "responses" else "messages"]
    memory_messages = [m for m in sent if MEMORY_MESSAGE_PREFIX in item_text(m)]
    assert len(memory_messages) == 1
    assert set(memory_messages[0]) <= {"type", "role", "content"}
    assert memory_messages[0]["role"] == "user"
    assert item_text(sent[-1]) == "Where does Marta work?"


def test_the_driver_passes_every_shipped_case(deployment: Deployment) -> None:
    assert failed_cases("openai-agents", deployment) == {}
