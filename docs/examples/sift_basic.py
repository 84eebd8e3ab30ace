"""A tool-using loop with ContextSift: what each request sends, and why the prefix holds.

The model is scripted so the example runs offline; swap `scripted_model` for
`client.chat.completions.create(model=..., **openai_chat_request(result, tools=tools))`.
Run: .venv/bin/python docs/examples/sift_basic.py
"""

import json

from satchel.sift import ArtifactTools, ChatMessage, ContextSift, SiftSettings, openai_chat_request

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def scripted_model(step: int) -> ChatMessage:
    """The assistant message a model might answer with at this step."""
    if step == 24:
        return {"role": "assistant", "content": "The export now writes every row."}
    call = {
        "id": f"call_{step}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/{step % 7}.py"})},
    }
    return {"role": "assistant", "content": f"Reading module {step % 7}.", "tool_calls": [call]}


def read_file(path: str, step: int) -> str:
    return f"# {path}\n" + f"def handler_{step}(row):\n    return row\n" * (40 + 90 * (step % 4))


def main() -> None:
    sift = ContextSift(SiftSettings(budget=12000, window=24000, read_targets={"read_file": "path"}))
    artifacts = ArtifactTools(sift.store)
    tools = TOOLS + artifacts.definitions
    history: list[ChatMessage] = [
        {"role": "system", "content": "You fix bugs in a Python repository."},
        {"role": "user", "content": "The CSV export drops rows past 500. Fix it."},
    ]
    sift.begin_run(history)
    previous: list[ChatMessage] = []
    for step in range(25):
        note = f"Progress: step {step + 1} of 25." if step % 5 == 4 else None
        result = sift.sift(history, tools=tools, note=note)
        request = openai_chat_request(result, tools=tools)["messages"]
        stored = previous[:-1] if previous and previous[-1].get("role") == "user" else previous
        extends = request[: len(stored)] == stored
        trims = ", ".join(f"{e.reason} from message {e.first}" for e in result.events) or "-"
        print(
            f"call {step:2d}: {len(request):3d} messages, {result.tokens:5d} tokens, "
            f"extends the previous request: {extends}, trims: {trims}"
        )
        previous = request
        reply = scripted_model(step)
        history.append(reply)
        for call in reply.get("tool_calls", []):
            path = json.loads(call["function"]["arguments"])["path"]
            history.append(
                {"role": "tool", "tool_call_id": call["id"], "content": read_file(path, step)}
            )
    print(artifacts.call("artifact_list", "{}").splitlines()[0])
    print(artifacts.call("artifact_read", '{"id": "call_0", "limit": 60}'))


if __name__ == "__main__":
    main()
