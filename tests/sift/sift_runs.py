"""Scripted tool-using runs, and request bodies built by the real OpenAI and Anthropic SDKs over
a mock transport (both SDKs send through httpx2)."""

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2
import openai

from satchel.sift import (
    ChatMessage,
    ContextSift,
    SiftResult,
    anthropic_request,
    artifact_tool_definitions,
    openai_chat_request,
)

SYSTEM = "You are a careful engineer. Use the tools; keep changes small."
TASK = "Find why the export writes an empty file and fix it."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "grep", "run_tests")
] + artifact_tool_definitions()

OPENAI_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "stop",
        }
    ],
}
ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


class Wire:
    """Builds request bodies through the SDKs, capturing the bytes they would send."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.openai = openai.OpenAI(
            api_key="test-key",
            base_url="http://provider.test/v1",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self._openai)),
        )
        self.anthropic = anthropic.Anthropic(
            api_key="test-key",
            base_url="http://provider.test",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self._anthropic)),
        )

    def _openai(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request.content)
        return httpx2.Response(200, json=OPENAI_REPLY)

    def _anthropic(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request.content)
        return httpx2.Response(200, json=ANTHROPIC_REPLY)

    def openai_body(self, result: SiftResult, tools: list[dict[str, Any]] = TOOLS) -> bytes:
        self.openai.chat.completions.create(
            model="gpt-test", **openai_chat_request(result, tools=tools)
        )
        return self.sent[-1]

    def anthropic_body(self, result: SiftResult, tools: list[dict[str, Any]] = TOOLS) -> bytes:
        self.anthropic.messages.create(
            model="claude-test", max_tokens=256, **anthropic_request(result, tools=tools)
        )
        return self.sent[-1]


WIRE = Wire()


def encoded(message: Any) -> bytes:
    """One JSON value as the SDKs encode it."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def messages_prefix(body: bytes, count: int, key: str = "messages") -> bytes:
    """The bytes of `body` up to the end of its first `count` messages."""
    messages = json.loads(body)[key]
    start = body.index(f'"{key}":['.encode()) + len(key) + 4
    length = sum(len(encoded(message)) for message in messages[:count]) + max(count - 1, 0)
    return body[: start + length]


def without_cache_control(value: Any) -> Any:
    """A JSON value with every `cache_control` removed (breakpoints move with the tail)."""
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(item) for item in value]
    return value


def output(seed: int, chars: int, *, error: bool = False) -> str:
    """A deterministic tool output of exactly `chars` characters."""
    rng = random.Random(seed)
    lines = []
    total = 0
    while total < chars:
        line = f"{rng.choice(('ok', 'row', 'file', 'value'))} {rng.randrange(10**6)} {seed}"
        lines.append(line)
        total += len(line) + 1
    text = ("Error: the command failed\n" if error else "") + "\n".join(lines)
    return text[:chars]


@dataclass
class Run:
    """A history built step by step, the way an agent loop appends to it."""

    history: list[ChatMessage] = field(default_factory=list)
    steps: int = 0

    @classmethod
    def start(cls, system: str = SYSTEM, task: str = TASK) -> "Run":
        run = cls()
        run.history += [{"role": "system", "content": system}, {"role": "user", "content": task}]
        return run

    def step(
        self,
        chars: int | list[int] = 1000,
        *,
        tool: str = "grep",
        path: str | None = None,
        text: str | None = None,
        error: bool = False,
        content: Any = None,
    ) -> str:
        """Append one step: an assistant call message and its results. Returns the step id."""
        sizes = chars if isinstance(chars, list) else [chars]
        self.steps += 1
        calls = []
        results: list[ChatMessage] = []
        for part, size in enumerate(sizes):
            call_id = f"call_{self.steps}_{part}"
            arguments = {"path": path if path is not None else f"src/m{self.steps}.py"}
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(arguments)},
                }
            )
            body = content
            if body is None:
                body = output(self.steps * 10 + part, size, error=error)
            results.append({"role": "tool", "tool_call_id": call_id, "content": body})
        said = text if text is not None else f"Step {self.steps}: looking further."
        self.history.append({"role": "assistant", "content": said, "tool_calls": calls})
        self.history.extend(results)
        return calls[0]["id"]

    def nudge(self, text: str = "Keep going; stay on the task.") -> None:
        self.history.append({"role": "user", "content": text})

    def answer(self, text: str = "Done.") -> None:
        self.history.append({"role": "assistant", "content": text})


def script(steps: int, *, seed: int = 7) -> Iterator[tuple[Run, str | None]]:
    """A seeded run of `steps` calls (mixed result sizes, nudges), each with its per-call note."""
    rng = random.Random(seed)
    run = Run.start()
    for number in range(steps):
        run.step(rng.choice((300, 900, 2500, 12000)), tool=rng.choice(("grep", "run_tests")))
        if number % 5 == 4:
            run.nudge(f"Nudge {number}: keep going.")
        yield run, (f"progress: call {number}" if number % 3 == 2 else None)


def replay(sift: ContextSift, steps: int, *, seed: int = 7) -> Iterator[tuple[Run, SiftResult]]:
    """The scripted run sifted call by call, the task recorded at its start."""
    for number, (run, note) in enumerate(script(steps, seed=seed)):
        if number == 0:
            sift.begin_run(run.history)
        yield run, sift.sift(run.history, tools=TOOLS, note=note)
