"""ContextSift in front of a LangChain chat model, the way `trim_messages` is used.

A fake chat model stands in for a real one so the example runs offline; the history keeps every
message, and only what is sent each call is sifted.
Run: .venv/bin/python docs/examples/sift_langchain.py
"""

from langchain_core.language_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from satchel.sift import ContextSift, SiftSettings
from satchel.sift.langchain import LangChainSift

STEPS = 20


def replies() -> list[BaseMessage]:
    """What the scripted model answers, call after call."""
    calls: list[BaseMessage] = [
        AIMessage(
            f"Checking log {n}.",
            tool_calls=[{"id": f"call_{n}", "name": "read_log", "args": {"day": n}}],
        )
        for n in range(STEPS)
    ]
    return [*calls, AIMessage("The nightly job fails on the 500th row; fixed.")]


def read_log(day: int) -> str:
    return "\n".join(f"day {day} line {i}: job ok" for i in range(60 + 40 * (day % 5)))


def main() -> None:
    model = FakeMessagesListChatModel(responses=replies())
    sifter = LangChainSift(ContextSift(SiftSettings(budget=4000)))
    prepare = sifter.runnable()
    history: list[BaseMessage] = [
        SystemMessage("You look after the nightly jobs."),
        HumanMessage("Why did last night's export fail?"),
    ]
    sifter.begin_run(history)
    while True:
        sent = prepare.invoke(history)
        reply = model.invoke(sent)
        history.append(reply)
        print(f"sent {len(sent):2d} of {len(history) - 1:2d} stored messages")
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            break
        for call in reply.tool_calls:
            history.append(ToolMessage(read_log(call["args"]["day"]), tool_call_id=call["id"]))
    receipt = next(m for m in sent if isinstance(m, AIMessage) and not m.tool_calls)
    print("a receipt as the model sees it:\n" + str(receipt.content))


if __name__ == "__main__":
    main()
