"""Long-term memory for a PydanticAI agent: recall in before the model, each turn stored after it.

Needs a running deployment and a token. Start the deployment first (on a fresh data directory
the token commands refuse until `satchel serve` has run there), then create the token:
    .venv/bin/satchel serve &
    until curl -sf localhost:8080/ready >/dev/null; do sleep 0.5; done
    export SATCHEL_TOKEN=$(.venv/bin/satchel tokens create --project demo)
    .venv/bin/python docs/examples/memory_pydantic_ai.py
SATCHEL_MEMORY_URL names another deployment (default http://127.0.0.1:8080).
With OPENAI_API_KEY set the agent talks to OpenAI (model from OPENAI_MODEL, default gpt-4o-mini);
without it a scripted model answers, so the example runs anywhere. The fact asserted below is
recallable at once; observed turns can come back as recall's passages as soon as they are
stored, and as facts once a worker with a formation model has formed them.
"""

import asyncio
import os
import uuid

from _deployment import deployment
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from satchel.integrations.pydantic_ai import PydanticAIMemory, is_untrusted
from satchel.memory.client import AsyncMemoryClient


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stands in for a model: says how many parts it read and how many came from memory."""
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
    recalled = sum(1 for p in parts if is_untrusted(p))
    return ModelResponse(parts=[TextPart(f"(parts read: {len(parts)}, from memory: {recalled})")])


def model() -> Model | str:
    if os.environ.get("OPENAI_API_KEY"):
        return "openai:" + os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    return FunctionModel(scripted)


def errors(operation: str, error: Exception) -> None:
    print(f"memory {operation} failed: {error}")


async def main() -> None:
    url, token = deployment()
    async with AsyncMemoryClient(url, token) as client:
        person = f"person-{uuid.uuid4()}"
        fact = {"subject": "Marta", "predicate": "works_at", "object": "Ensera"}
        about = {"statement": "Marta works at Ensera.", "data_subject_id": person}
        await client.assert_records([{"idempotency_key": str(uuid.uuid4()), **fact, **about}])
        memory = PydanticAIMemory(client, person, on_error=errors, compact_after_messages=40)
        agent = Agent(model(), instructions="You are a helpful assistant.", capabilities=[memory])
        conversation, history = str(uuid.uuid4()), list[ModelMessage]()
        for prompt in ("I moved to Oslo last month.", "Where does Marta work?"):
            result = await agent.run(prompt, message_history=history, conversation_id=conversation)
            history = result.all_messages()
            print(">", prompt)
            print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
