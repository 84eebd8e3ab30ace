"""Long-term memory for an OpenAI Agents SDK agent: recall in, turns stored, compaction on.

Needs a running deployment and a token. Start the deployment first (on a fresh data directory
the token commands refuse until `satchel serve` has run there), then create the token:
    .venv/bin/satchel serve &
    until curl -sf localhost:8080/ready >/dev/null; do sleep 0.5; done
    export SATCHEL_TOKEN=$(.venv/bin/satchel tokens create --project demo)
    .venv/bin/python docs/examples/memory_openai_agents.py
SATCHEL_MEMORY_URL names another deployment (default http://127.0.0.1:8080).
With OPENAI_API_KEY set the agent talks to OpenAI (model from OPENAI_MODEL, default gpt-4o-mini).
Without it a scripted model answers, so the example runs anywhere. The fact asserted below is
recallable at once; observed turns can come back as recall's passages as soon as they are
stored, and as facts once a worker with a formation model has formed them.
"""

import asyncio
import os
import uuid
from typing import Any

from _deployment import deployment
from agents import Agent, RunConfig
from agents.memory import SQLiteSession
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message

from satchel.integrations.openai_agents import SessionMemory, compact_at, is_untrusted
from satchel.memory.client import AsyncMemoryClient

QUESTIONS = ("I moved to Oslo last month.", "Where does Marta work?")


def scripted_reply(call: ModelCall) -> Any:
    """Stands in for a model: says how many items it read and how many came from memory."""
    recalled = sum(1 for item in call.input if is_untrusted(item))
    return [assistant_message(f"(items read: {len(call.input)}, from memory: {recalled})")]


def model() -> Any:
    if os.environ.get("OPENAI_API_KEY"):
        return os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    return ScriptedModel([ModelStep.respond(scripted_reply) for _ in QUESTIONS])


def errors(operation: str, error: Exception) -> None:
    print(f"memory {operation} failed: {error}")


async def main() -> None:
    url, token = deployment()
    async with AsyncMemoryClient(url, token) as client:
        person = f"person-{uuid.uuid4()}"
        fact = {"subject": "Marta", "predicate": "works_at", "object": "Ensera"}
        record = {"statement": "Marta works at Ensera.", "data_subject_id": person, **fact}
        await client.assert_records([{"idempotency_key": str(uuid.uuid4()), **record}])
        agent = Agent(name="assistant", instructions="You are a helpful assistant.", model=model())
        memory = SessionMemory(
            client,
            SQLiteSession("conversation-1"),
            data_subject_id=person,
            on_error=errors,
            should_trigger_compaction=compact_at(20),
        )
        config = RunConfig(tracing_disabled=not os.environ.get("OPENAI_API_KEY"))
        for question in QUESTIONS:
            print(">", question)
            result = await memory.run(agent, question, run_config=config)
            print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
