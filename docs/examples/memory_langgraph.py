"""A LangChain agent with satchel memory: recall before each model call, turns stored after.

With OPENAI_API_KEY set (and langchain-openai installed) a real model answers; otherwise a
scripted one does, so the example runs anywhere.
Needs a running deployment and a token. Start the deployment first (on a fresh data directory
the token commands refuse until `satchel serve` has run there), then create the token:
    .venv/bin/satchel serve &
    until curl -sf localhost:8080/ready >/dev/null; do sleep 0.5; done
    export SATCHEL_TOKEN=$(.venv/bin/satchel tokens create --project demo)
    .venv/bin/python docs/examples/memory_langgraph.py
SATCHEL_MEMORY_URL names another deployment (default http://127.0.0.1:8080).
"""

import os
import sys
import uuid

from _deployment import deployment
from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel, FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from satchel.integrations.langgraph import MemoryMiddleware
from satchel.memory.client import MemoryClient


def chat_model() -> BaseChatModel:
    if os.environ.get("OPENAI_API_KEY"):
        return init_chat_model("openai:gpt-4.1-mini")
    return FakeMessagesListChatModel(
        responses=[AIMessage("Noted: you prefer written notes."), AIMessage("Written notes.")]
    )


def main() -> None:
    url, token = deployment()
    subject = str(uuid.uuid4())
    with MemoryClient(url, token) as client:
        memory = MemoryMiddleware(
            client=client,
            data_subject_id=subject,
            on_error=lambda operation, error: print(f"{operation}: {error}", file=sys.stderr),
            compact_trigger=("messages", 40),
        )
        agent = create_agent(chat_model(), middleware=[memory], checkpointer=InMemorySaver())
        config: RunnableConfig = {"configurable": {"thread_id": "example"}}
        for said in ("I prefer written notes to calls.", "How should you reach me?"):
            state = agent.invoke({"messages": [{"role": "user", "content": said}]}, config)
            print(f"> {said}\n{state['messages'][-1].text}")
        print(f"stored: the log's newest offset is {client.freshness().stored}")


if __name__ == "__main__":
    main()
