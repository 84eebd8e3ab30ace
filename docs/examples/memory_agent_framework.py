"""Long-term memory for a Microsoft Agent Framework agent: recall in, turns stored, compaction on.

Needs a running deployment and a token. Start the deployment first (on a fresh data directory
the token commands refuse until `satchel serve` has run there), then create the token:
    .venv/bin/satchel serve &
    until curl -sf localhost:8080/ready >/dev/null; do sleep 0.5; done
    export SATCHEL_TOKEN=$(.venv/bin/satchel tokens create --project demo)
    .venv/bin/python docs/examples/memory_agent_framework.py
SATCHEL_MEMORY_URL names another deployment (default http://127.0.0.1:8080).
With OPENAI_API_KEY set the agent talks to OpenAI (`pip install agent-framework-openai`; the model
comes from OPENAI_MODEL). Without it a scripted client answers, so the example runs anywhere.
The fact asserted below is recallable at once. Observed turns can come back as recall's passages
as soon as they are stored, and as facts once a worker with a formation model has formed them.
"""

import asyncio
import os
import uuid
from collections.abc import Sequence
from typing import Any

from _deployment import deployment
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    FunctionInvocationLayer,
    InMemoryHistoryProvider,
    Message,
)

from satchel.integrations.agent_framework import ContextCompactionProvider, MemoryProvider
from satchel.memory.client import AsyncMemoryClient
from satchel.memory.message import UNTRUSTED_KEY


class ScriptedClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """Stands in for a model: says how many messages it read and how many came from memory."""

    async def _inner_get_response(self, *, messages: Sequence[Message], **_: Any) -> ChatResponse:
        recalled = sum(1 for m in messages if m.additional_properties.get(UNTRUSTED_KEY))
        reply = f"(messages read: {len(messages)}, from memory: {recalled})"
        return ChatResponse(messages=[Message("assistant", [reply])])


def chat_client() -> Any:
    if not os.environ.get("OPENAI_API_KEY"):
        return ScriptedClient()
    from agent_framework.openai import OpenAIChatClient

    os.environ.setdefault("OPENAI_MODEL", "gpt-4o-mini")
    return OpenAIChatClient()


def errors(operation: str, error: Exception) -> None:
    print(f"memory {operation} failed: {error}")


async def main() -> None:
    url, token = deployment()
    async with AsyncMemoryClient(url, token) as memory:
        person = f"person-{uuid.uuid4()}"
        marta = {"subject": "Marta", "predicate": "works_at", "object": "Ensera"}
        statement = {"statement": "Marta works at Ensera.", "data_subject_id": person}
        await memory.assert_records([{"idempotency_key": str(uuid.uuid4()), **marta, **statement}])
        agent = Agent(
            client=chat_client(),
            instructions="You are a helpful assistant.",
            default_options={"store": False},
            context_providers=[
                InMemoryHistoryProvider(),
                ContextCompactionProvider(
                    memory, data_subject_id=person, max_messages=40, on_error=errors
                ),
                MemoryProvider(memory, data_subject_id=person, on_error=errors),
            ],
        )
        session = agent.create_session(session_id="conversation-1")
        for question in ("I moved to Oslo last month.", "Where does Marta work?"):
            print(">", question)
            print(await agent.run(question, session=session))


if __name__ == "__main__":
    asyncio.run(main())
