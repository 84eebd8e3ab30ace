"""The LangChain and PydanticAI integrations apply the same sift to their own message types."""

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sift_runs import output

from satchel.sift import ContextSift, SiftSettings
from satchel.sift.langchain import LangChainSift, sift_messages
from satchel.sift.pydantic_ai import PydanticAISift


def langchain_history(steps: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [
        SystemMessage("You fix bugs."),
        HumanMessage("Fix the export.", id="task-1"),
    ]
    for step in range(steps):
        call = {"id": f"call_{step}", "name": "grep", "args": {"q": f"row {step}"}}
        history.append(AIMessage(f"Looking at {step}.", tool_calls=[call]))
        status = "error" if step == 1 else "success"
        content = output(step, 12000 if step == steps - 1 else 2500, error=step == 1)
        history.append(ToolMessage(content, tool_call_id=f"call_{step}", status=status))
    return history


def test_langchain_messages_are_sifted_in_place() -> None:
    messages = langchain_history(8)
    sifter = LangChainSift(ContextSift(SiftSettings(budget=3000)))
    assert sifter.begin_run(messages) == "task-1"
    sifter(messages[:-2])
    sifted = sifter(messages, note="progress: 8 of 20")
    assert sifted[0] is messages[0] and sifted[1] is messages[1]
    receipts = [m for m in sifted if isinstance(m, AIMessage) and not m.tool_calls]
    assert receipts and all(m.content.startswith("Looking at") for m in receipts)
    assert "[receipt call_1: grep(q=row 1) ERROR:" in str(receipts[1].content)
    bounded = sifted[-2]
    assert isinstance(bounded, ToolMessage) and bounded is not messages[-1]
    assert bounded.tool_call_id == "call_7" and bounded.status == "success"
    assert len(str(bounded.content)) <= 8000 < len(str(messages[-1].content))
    assert sifted[-3] is messages[-2]
    assert isinstance(sifted[-1], HumanMessage) and sifted[-1].content == "progress: 8 of 20"
    kept = [m for m in sifted if any(m is original for original in messages)]
    assert len(kept) + len(receipts) + 2 == len(sifted)


def test_sift_messages_works_like_trim_messages_and_as_a_runnable() -> None:
    messages = langchain_history(8)
    settings = SiftSettings(budget=3000)
    once = sift_messages(messages, ContextSift(settings))
    runnable = LangChainSift(ContextSift(settings)).runnable()
    assert [m.content for m in runnable.invoke(messages)] == [m.content for m in once]
    assert len(once) < len(messages)


def test_langchain_messages_the_sift_cannot_read_are_named() -> None:
    with pytest.raises(ValueError, match="message 1 is a ChatMessage"):
        sift_messages(
            [HumanMessage("hi"), ChatMessage("x", role="critic")],
            ContextSift(SiftSettings(budget=10)),
        )


def scripted_model(calls: int) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    seen: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        step = len(seen)
        if step <= calls:
            call = ToolCallPart("read", {"path": f"src/{step}.py"}, tool_call_id=f"c{step}")
            return ModelResponse(parts=[TextPart(f"Reading {step}."), call])
        return ModelResponse(parts=[TextPart("Fixed.")])

    return FunctionModel(respond), seen


def test_the_pydantic_ai_capability_sifts_requests_and_keeps_the_run_history_whole() -> None:
    sift = ContextSift(SiftSettings(budget=2500))
    model, seen = scripted_model(10)
    agent = Agent(
        model, system_prompt="Fix bugs.", capabilities=[PydanticAISift(sift).capability()]
    )

    @agent.tool_plain
    def read(path: str) -> str:
        return f"# {path}\n" + output(len(path), 3000)

    result = agent.run_sync("Fix the export.")
    returns = [
        part
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert len(returns) == 10 and all(len(str(part.content)) > 3000 for part in returns)
    last = seen[-1]
    texts = [
        p.content
        for m in last
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, TextPart)
    ]
    assert any("[receipt c1: read(path=src/1.py) OK:" in text for text in texts)
    assert isinstance(last[0], ModelRequest) and isinstance(last[0].parts[1], UserPromptPart)
    assert last[0].parts[1].content == "Fix the export."
    assert sift.store.get("c1") is not None


def test_the_task_is_recorded_again_when_a_new_run_starts() -> None:
    sift = ContextSift(SiftSettings(budget=100_000))
    model, _ = scripted_model(1)
    agent = Agent(model, capabilities=[PydanticAISift(sift).capability()])

    @agent.tool_plain
    def read(path: str) -> str:
        return path

    first = agent.run_sync("First task.")
    first_task = sift.task_id
    agent.run_sync("Second task.", message_history=first.all_messages())
    assert first_task is not None and sift.task_id != first_task


def test_the_history_processor_returns_the_original_messages_where_unchanged() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("Fix bugs."), UserPromptPart("Fix the export.")])
    ]
    for step in range(6):
        call = ToolCallPart("read", {"path": f"{step}.py"}, tool_call_id=f"c{step}")
        history.append(ModelResponse(parts=[TextPart(f"Reading {step}."), call]))
        back = ToolReturnPart("read", output(step, 3000), tool_call_id=f"c{step}")
        history.append(ModelRequest(parts=[back, UserPromptPart(f"nudge {step}")]))
    processor = PydanticAISift(ContextSift(SiftSettings(budget=2000)))
    sifted = processor.apply(history, note="progress")
    assert sifted[0] is history[0]
    assert sifted[-2] is history[-2]
    last = sifted[-1]
    assert isinstance(last, ModelRequest)
    assert last.parts[:2] == history[-1].parts
    assert last.parts[2] == UserPromptPart("progress", timestamp=last.parts[2].timestamp)
    receipt = sifted[1]
    assert isinstance(receipt, ModelResponse) and receipt.parts[0].content.startswith("Reading 0.")
    nudge_only = sifted[2]
    assert isinstance(nudge_only, ModelRequest)
    assert [type(part) for part in nudge_only.parts] == [UserPromptPart]
    assert processor(history)[0] is history[0]


def test_the_capability_counts_the_agents_tool_definitions() -> None:
    model, seen = scripted_model(6)
    settings = SiftSettings(budget=6000, window=6000)
    plain = Agent(model, capabilities=[PydanticAISift(ContextSift(settings)).capability()])
    bulky, bulky_seen = scripted_model(6)
    described = Agent(bulky, capabilities=[PydanticAISift(ContextSift(settings)).capability()])

    for agent, description in ((plain, "Reads a file."), (described, "Reads a file. " * 300)):

        @agent.tool_plain(description=description)
        def read(path: str) -> str:
            return output(len(path), 2000)

    plain.run_sync("Fix the export.")
    described.run_sync("Fix the export.")
    assert len(seen[-1]) > len(bulky_seen[-1])
