"""The README's turn-state example with no model server and no network.

The same profile, adapter and `Session`, and the real `openai` SDK, but the SDK's HTTP client
sends every request to an `httpx.MockTransport` that streams Chat Completions chunks the way an
OpenAI-compatible open-weight server does (reasoning in `reasoning_content`, a usage chunk
last). The first answer names no action, so the parser rejects it and the turn is retried from
the last accepted state.
Run: .venv/bin/python docs/examples/turns_offline.py
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx

from satchel.providers import Profile, build_adapter, example_profiles
from satchel.turns import InvalidAnswer, ModelResponse, ProviderAdapter, Session

ANSWERS = [  # (visible text, reasoning), one per request, in order
    ("Let me look at the frame first.", "No action named yet."),
    ("ACTION1", "The path upward is clear."),
    ("ACTION3", "The goal lies to the right."),
]
requests: list[dict[str, Any]] = []


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-offline",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "Qwen/Qwen3-32B",
        "choices": [choice],
    }


def events(text: str, reasoning: str) -> Iterator[bytes]:
    """One streamed answer as server-sent events: reasoning, text, finish, usage, [DONE]."""
    usage = chunk({})
    usage["choices"] = []
    usage["usage"] = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    for event in (
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": reasoning}),
        chunk({"content": text}),
        chunk({}, "stop"),
        usage,
    ):
        yield f"data: {json.dumps(event)}\n\n".encode()
    yield b"data: [DONE]\n\n"


class Events(httpx.SyncByteStream):
    def __init__(self, body: Iterator[bytes]) -> None:
        self.body = body

    def __iter__(self) -> Iterator[bytes]:
        yield from self.body


def model_server(request: httpx.Request) -> httpx.Response:
    """Stands in for the server at the profile's base URL: the next scripted answer."""
    assert request.url.path == "/v1/chat/completions"
    body = json.loads(request.content)
    requests.append(body)
    text, reasoning = ANSWERS[len(requests) - 1]
    headers = {"content-type": "text/event-stream", "x-request-id": f"req_{len(requests)}"}
    return httpx.Response(200, stream=Events(events(text, reasoning)), headers=headers)


def offline_adapter(profile: Profile) -> ProviderAdapter:
    """The profile's adapter, its `openai` client sending every request to `model_server`."""
    return build_adapter(
        profile,
        http_client=httpx.Client(transport=httpx.MockTransport(model_server)),
        env={"OPEN_WEIGHT_API_KEY": "offline"},  # the profile's client.api_key_env
    )


def parse(response: ModelResponse) -> str:
    if "ACTION" not in response.text:
        raise InvalidAnswer("no action")  # retried from the last accepted state
    return response.text.strip()


def main() -> None:
    session = Session(offline_adapter(example_profiles()["qwen3-open-weight-continuous"]))
    for frame in (1, 2):
        turn = session.turn([{"role": "user", "content": f"frame {frame} ..."}], parse)
        print(
            f"turn {turn.step}: {turn.action} after {turn.attempts} attempt(s),"
            f" billed for {turn.usage.requests} request(s)"
        )
    total = session.total_usage
    print(
        f"session total: {total.requests} requests, {total.input_tokens} input and"
        f" {total.output_tokens} output tokens"
    )
    sent = json.dumps(requests[-1]["messages"])
    print("turn 2 carried turn 1's reasoning:", json.dumps(ANSWERS[1][1]) in sent)
    print("the rejected answer reached a later request:", json.dumps(ANSWERS[0][0]) in sent)


if __name__ == "__main__":
    main()
