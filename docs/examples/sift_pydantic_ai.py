"""ContextSift on a PydanticAI agent: each model request is sifted; the run keeps its whole history.

A function model stands in for a real one so the example runs offline.
Run: .venv/bin/python docs/examples/sift_pydantic_ai.py
"""

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from satchel.sift import ArtifactTools, ContextSift, SiftSettings
from satchel.sift.pydantic_ai import PydanticAISift

STEPS = 15
sent_sizes: list[int] = []


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Reads one module per call, then answers."""
    sent_sizes.append(len(messages))
    step = len(sent_sizes)
    if step > STEPS:
        return ModelResponse(parts=[TextPart("Fixed: the writer now flushes every page.")])
    call = ToolCallPart("read_module", {"name": f"export_{step}"}, tool_call_id=f"call_{step}")
    return ModelResponse(parts=[TextPart(f"Reading export_{step}."), call])


sift = ContextSift(SiftSettings(budget=3000))
artifacts = ArtifactTools(sift.store)
agent = Agent(
    FunctionModel(scripted),
    system_prompt="You fix bugs in the export package.",
    capabilities=[PydanticAISift(sift).capability()],
)


@agent.tool_plain
def read_module(name: str) -> str:
    """Read one module of the export package."""
    return f"# {name}.py\n" + "def write(page):\n    return page\n" * 120


@agent.tool_plain
def artifact_read(id: str, offset: int = 0, limit: int = 2000) -> str:
    """Read a stored full output named by a receipt."""
    return artifacts.read(id, offset, limit)


def main() -> None:
    result = agent.run_sync("Pages after the first go missing from the export. Fix it.")
    print(result.output)
    print(f"messages sent per call: {sent_sizes}")
    print(f"messages in the run's history: {len(result.all_messages())}")
    print(f"full outputs stored: {len(sift.store.infos())}")


if __name__ == "__main__":
    main()
