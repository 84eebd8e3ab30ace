"""PydanticAIMemory on a real agent against a real deployment; a FunctionModel stands in for the
model. Faults come from the conformance fault proxy in front of the deployment."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextContent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from conformance_kit import (
    MARTA,
    STATED_ANSWER,
    STATED_CONTEXT,
    Hook,
    failed_cases,
    observed_bodies,
    seed_marta,
    stored,
)
from satchel.conformance.cases import Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.drivers import driver_command
from satchel.conformance.proxy import CONTEXTS, RECALLS, FaultProxy
from satchel.integrations import MemoryStoreFailed
from satchel.integrations.pydantic_ai import (
    PydanticAIMemory,
    is_untrusted,
    memory_prompt,
    prompt_text,
)
from satchel.memory.client import AsyncMemoryClient
from satchel.memory.message import (
    UNTRUSTED_KEY,
    parse_memory_message,
    render_context_message,
    turn_key,
)


@pytest.fixture
async def client(
    proxied: tuple[FaultProxy, str], deployment: Deployment
) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(proxied[1], deployment.token) as memory_client:
        yield memory_client


@dataclass
class Scripted:
    """A model that answers from a script and keeps every message list it was handed."""

    replies: list[ModelResponse]
    handed: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.handed.append(list(messages))
        return self.replies[len(self.handed) - 1]


def replying(*texts: str) -> Scripted:
    return Scripted([ModelResponse(parts=[TextPart(text)]) for text in texts])


def booking_agent(model: Scripted) -> Agent[None, str]:
    def book_room(day: str) -> str:
        """Book the meeting room."""
        return f"booked: A/{day}"

    return Agent(FunctionModel(model), tools=[book_room])


def user_parts(messages: list[ModelMessage]) -> list[UserPromptPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def texts(messages: list[ModelMessage]) -> list[str]:
    """Every text the model was handed, one per part, in order."""
    out: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                out.append(prompt_text(part.content))
            elif isinstance(part, TextPart | SystemPromptPart):
                out.append(part.content)
    return out


def memory_texts(messages: list[ModelMessage]) -> list[str]:
    return [prompt_text(p.content) for p in user_parts(messages) if is_untrusted(p)]


HISTORY: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart("I moved the office to Cork in March.")]),
    ModelResponse(parts=[TextPart("Noted: the office is in Cork.")]),
    ModelRequest(parts=[UserPromptPart("We hired two engineers in April.")]),
    ModelResponse(parts=[TextPart("Noted: two engineers joined in April.")]),
]
HISTORY_TEXTS = [
    "I moved the office to Cork in March.",
    "Noted: the office is in Cork.",
    "We hired two engineers in April.",
    "Noted: two engineers joined in April.",
]


async def test_recall_is_one_untrusted_user_prompt_just_before_the_persons(
    client: AsyncMemoryClient, subject: str
) -> None:
    await seed_marta(client, subject)
    model = replying("At Ensera.")
    memory = PydanticAIMemory(client, subject)

    result = await Agent(FunctionModel(model), capabilities=[memory]).run(
        "Where does Marta work?", conversation_id="c-recall"
    )

    parts = user_parts(model.handed[0])
    assert [is_untrusted(p) for p in parts] == [True, False]
    assert prompt_text(parts[1].content) == "Where does Marta work?"
    content = parts[0].content
    assert isinstance(content, list) and isinstance(content[0], TextContent)
    assert content[0].metadata == {UNTRUSTED_KEY: True}
    document = parse_memory_message(content[0].content)
    assert set(document.keys) >= {"watermark", "plan", "facts"}
    assert MARTA in content[0].content
    assert result.output == "At Ensera."


async def test_memory_is_in_the_request_only_and_in_each_request_of_the_run(
    client: AsyncMemoryClient, subject: str
) -> None:
    await seed_marta(client, subject)
    model = Scripted(
        [
            ModelResponse(parts=[ToolCallPart("book_room", {"day": "Tuesday"})]),
            ModelResponse(parts=[TextPart("Marta's room is booked.")]),
        ]
    )
    memory = PydanticAIMemory(client, subject)

    result = await booking_agent(model).run(
        "Where does Marta work?", capabilities=[memory], conversation_id="c-only"
    )

    assert [len(memory_texts(handed)) for handed in model.handed] == [1, 1]
    assert memory_texts(model.handed[0]) == memory_texts(model.handed[1])
    kept = result.all_messages()
    assert not any(is_untrusted(p) for p in user_parts(kept))
    assert not any(MARTA in text for text in texts(kept))


async def test_an_empty_recall_injects_nothing(client: AsyncMemoryClient, subject: str) -> None:
    model = replying("You have not said.")
    memory = PydanticAIMemory(client, subject)

    await Agent(FunctionModel(model), capabilities=[memory]).run("What is my favourite colour?")

    assert memory_texts(model.handed[0]) == []
    assert texts(model.handed[0]) == ["What is my favourite colour?"]


async def test_recall_failure_runs_without_memory_and_still_stores(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    await seed_marta(client, subject)
    proxy.configure(Faults(recall="unavailable"), None)
    hook = Hook()
    model = replying("I do not know.")
    before = await stored(client)

    result = await Agent(FunctionModel(model), capabilities=[]).run(
        "Where does Marta work?",
        capabilities=[PydanticAIMemory(client, subject, on_error=hook)],
        conversation_id="c-recall-fails",
    )

    assert result.output == "I do not know."
    assert memory_texts(model.handed[0]) == []
    assert hook.operations == ["recall"]
    assert proxy.requests("POST", RECALLS)
    assert await stored(client) == before + 1


async def test_the_observer_stores_the_prompt_and_the_final_output_only(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    await seed_marta(client, subject)
    model = Scripted(
        [
            ModelResponse(parts=[ToolCallPart("book_room", {"day": "Tuesday"})]),
            ModelResponse(parts=[TextPart("Room A is booked for Tuesday.")]),
        ]
    )
    summary = ModelResponse(parts=[TextPart("Summary of earlier conversation: colleagues.")])
    before = await stored(client)

    await booking_agent(model).run(
        "Book Marta's room for Tuesday.",
        message_history=[summary],
        capabilities=[PydanticAIMemory(client, subject)],
        conversation_id="c-observe",
    )

    assert any(isinstance(p, ToolReturnPart) for m in model.handed[1] for p in m.parts)
    [body] = observed_bodies(proxy)
    assert body["messages"] == [
        {"role": "user", "content": "Book Marta's room for Tuesday.", "group_ordinal": 0},
        {"role": "assistant", "content": "Room A is booked for Tuesday.", "group_ordinal": 1},
    ]
    assert body["data_subject_id"] == subject
    assert body["idempotency_key"] == turn_key(subject, "c-observe", body["messages"])
    assert await stored(client) == before + 1


async def test_structured_output_is_stored_as_its_json(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    class Booking(BaseModel):
        room: str
        day: str

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        [tool] = info.output_tools
        return ModelResponse(parts=[ToolCallPart(tool.name, {"room": "A", "day": "Tuesday"})])

    agent = Agent(FunctionModel(answer), output_type=Booking)
    await agent.run("Book a room.", capabilities=[PydanticAIMemory(client, subject)])

    [body] = observed_bodies(proxy)
    assert body["messages"][1]["content"] == '{"room":"A","day":"Tuesday"}'


async def test_a_store_failure_reaches_the_hook_and_is_raised(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    proxy.configure(Faults(observe="unavailable"), None)
    hook = Hook()
    before = await stored(client)
    agent = Agent(FunctionModel(replying("Noted.")))

    with pytest.raises(MemoryStoreFailed) as raised:
        await agent.run(
            "Remember that I prefer written notes.",
            capabilities=[PydanticAIMemory(client, subject, on_error=hook)],
        )

    assert raised.value.cause.code == "unavailable"
    assert hook.operations == ["observe"]
    assert await stored(client) == before


async def test_a_failed_model_call_stores_nothing(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    def failing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("the provider is down")

    before = await stored(client)
    with pytest.raises(RuntimeError, match="the provider is down"):
        await Agent(FunctionModel(failing)).run(
            "Remember that I prefer written notes.",
            capabilities=[PydanticAIMemory(client, subject)],
        )

    assert observed_bodies(proxy) == []
    assert await stored(client) == before


async def test_a_retried_turn_is_stored_once_under_one_key(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    memory = PydanticAIMemory(client, subject)
    agent = Agent(FunctionModel(replying("Noted.", "Noted.", "Noted.")), capabilities=[memory])
    before = await stored(client)

    for _ in range(2):
        await agent.run("I moved to Oslo last month.", conversation_id="c-retry")
    assert await stored(client) == before + 1

    await agent.run("I moved to Oslo last month.", conversation_id="c-other")
    keys = [body["idempotency_key"] for body in observed_bodies(proxy)]
    assert keys[0] == keys[1] != keys[2]
    assert await stored(client) == before + 2


async def test_compaction_is_off_by_default(client: AsyncMemoryClient, subject: str) -> None:
    model = replying("In Cork.")
    await Agent(FunctionModel(model)).run(
        "Where is the office now?",
        message_history=HISTORY,
        capabilities=[PydanticAIMemory(client, subject)],
    )

    assert texts(model.handed[0]) == [*HISTORY_TEXTS, "Where is the office now?"]


async def test_due_compaction_hands_the_model_the_deployments_context(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    proxy.configure(Faults(), STATED_ANSWER)
    system = ModelRequest(parts=[SystemPromptPart("You keep the office diary.")])
    model = replying("In Cork.")
    memory = PydanticAIMemory(client, subject, compact_after_messages=4)

    result = await Agent(FunctionModel(model), capabilities=[memory]).run(
        "Where is the office now?", message_history=[system, *HISTORY], conversation_id="c-compact"
    )

    handed = model.handed[0]
    [context] = memory_texts(handed)
    assert context == render_context_message(STATED_CONTEXT)
    assert texts(handed) == ["You keep the office diary.", context, "Where is the office now?"]
    kept = texts(result.all_messages())
    assert kept == [
        "You keep the office diary.",
        *HISTORY_TEXTS,
        "Where is the office now?",
        "In Cork.",
    ]
    assert proxy.requests("POST", CONTEXTS)[0].body == {"data_subject_id": subject}
    [body] = observed_bodies(proxy)
    assert [m["content"] for m in body["messages"]] == ["Where is the office now?", "In Cork."]


async def test_compaction_waits_for_its_trigger(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    model = replying("In Cork.")
    memory = PydanticAIMemory(client, subject, compact_after_messages=5)

    await Agent(FunctionModel(model), capabilities=[memory]).run(
        "Where is the office now?", message_history=HISTORY
    )

    assert texts(model.handed[0]) == [*HISTORY_TEXTS, "Where is the office now?"]
    assert proxy.requests("POST", CONTEXTS) == []


async def test_an_empty_context_leaves_the_history_alone(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    model = replying("In Cork.")
    memory = PydanticAIMemory(client, subject, compact_after_messages=2)

    await Agent(FunctionModel(model), capabilities=[memory]).run(
        "Where is the office now?", message_history=HISTORY
    )

    assert len(proxy.requests("POST", CONTEXTS)) == 1
    assert texts(model.handed[0]) == [*HISTORY_TEXTS, "Where is the office now?"]


async def test_context_failure_keeps_the_history_and_is_not_fatal(
    client: AsyncMemoryClient, subject: str, proxy: FaultProxy
) -> None:
    proxy.configure(Faults(context="unavailable"), None)
    hook = Hook()
    model = replying("In Cork.")
    memory = PydanticAIMemory(client, subject, on_error=hook, compact_after_messages=2)
    before = await stored(client)

    result = await Agent(FunctionModel(model), capabilities=[memory]).run(
        "Where is the office now?", message_history=HISTORY
    )

    assert result.output == "In Cork."
    assert texts(model.handed[0]) == [*HISTORY_TEXTS, "Where is the office now?"]
    assert hook.operations == ["context"]
    assert await stored(client) == before + 1


def test_the_mark_lives_on_the_prompts_text_content() -> None:
    marked = memory_prompt("taisce-memory/v1 untrusted\n{}")
    assert is_untrusted(marked)
    assert not is_untrusted(UserPromptPart("taisce-memory/v1 untrusted\n{}"))
    assert not is_untrusted(UserPromptPart([TextContent("x", metadata={UNTRUSTED_KEY: False})]))
    assert prompt_text(["a", TextContent("b")]) == "a\nb"


def test_options_are_checked_up_front() -> None:
    memory_client = AsyncMemoryClient("http://127.0.0.1:9", "token")
    with pytest.raises(ValueError, match="data_subject_id"):
        PydanticAIMemory(memory_client, " ")
    with pytest.raises(ValueError, match="compact_after_messages"):
        PydanticAIMemory(memory_client, "s", compact_after_messages=0)


def test_the_driver_passes_every_shipped_case(deployment: Deployment) -> None:
    assert driver_command("pydantic-ai")[0] == sys.executable
    assert failed_cases("pydantic-ai", deployment) == {}
