"""The OpenAI Responses and Gemini renderers: bodies the real SDKs send, prefix stability over
sifted runs, and the shapes of text, images, tool calls, results, notes and receipts."""

import copy
import json
import re
from typing import Any

import httpx
import httpx2
import openai
import pydantic
import pytest
from google import genai
from google.genai import types as genai_types
from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from openai.types.responses import FunctionToolParam, ResponseInputParam
from sift_runs import TOOLS, Run, encoded, messages_prefix, replay

from satchel.sift import ChatMessage, ContextSift, SiftResult, SiftSettings
from satchel.sift.wire_gemini import gemini_contents, gemini_request, gemini_tools
from satchel.sift.wire_responses import responses_input, responses_request, responses_tools

PNG = "data:image/png;base64,iVBORw0KGgo="
WEB = "https://example.test/shots/screen.PNG?size=2"

RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "gpt-test",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
GEMINI_REPLY = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
}
GEMINI_KEYS = {
    "systemInstruction": "system_instruction",
    "functionDeclarations": "function_declarations",
    "inlineData": "inline_data",
    "fileData": "file_data",
    "functionCall": "function_call",
    "functionResponse": "function_response",
}
"""The keys the google-genai SDK writes in camel case (the API takes either spelling)."""


class Wire:
    """Bodies built by the OpenAI and google-genai SDKs over mock transports."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.openai = openai.OpenAI(
            api_key="test-key",
            base_url="http://provider.test/v1",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self._responses)),
        )
        options = genai_types.HttpOptions(
            base_url="https://gemini.test",
            retry_options=genai_types.HttpRetryOptions(attempts=1),
            httpx_client=httpx.Client(transport=httpx.MockTransport(self._gemini)),
        )
        self.genai = genai.Client(api_key="g-test-key", http_options=options)

    def _responses(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/responses"
        self.sent.append(request.content)
        return httpx2.Response(200, json=RESPONSES_REPLY)

    def _gemini(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/models/gemini-test:generateContent")
        self.sent.append(request.content)
        return httpx.Response(200, json=GEMINI_REPLY)

    def responses_body(
        self, request: SiftResult | list[ChatMessage], tools: list[dict[str, Any]] = TOOLS
    ) -> bytes:
        reply = self.openai.responses.create(
            model="gpt-test", **responses_request(request, tools=tools)
        )
        assert reply.output_text == "ok"
        return self.sent[-1]

    def gemini_body(
        self, request: SiftResult | list[ChatMessage], tools: list[dict[str, Any]] = TOOLS
    ) -> bytes:
        fields = gemini_request(request, tools=tools)
        reply = self.genai.models.generate_content(model="gemini-test", **fields)
        assert reply.text == "ok"
        return self.sent[-1]


WIRE = Wire()


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


SHAPES: list[ChatMessage] = [
    {"role": "system", "content": "You are careful."},
    {"role": "developer", "content": [{"type": "text", "text": "Keep changes small."}]},
    {
        "role": "user",
        "content": [{"type": "text", "text": "What do these show?"}, image(PNG), image(WEB)],
    },
    {
        "role": "assistant",
        "content": "Looking at both.",
        "tool_calls": [
            call("call_a", "read_file", '{"path": "a.py", "limit": 1.50, "mode": "text"}'),
            call("call_b", "grep", '{"pattern": "x", "flags": {"z": 1, "i": true}}'),
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "print('a')"},
    {
        "role": "tool",
        "tool_call_id": "call_b",
        "content": [{"type": "text", "text": "a.py:1 x"}, image(PNG)],
    },
    {"role": "user", "content": "Note: the tests are slow."},
    {"role": "assistant", "content": "[receipt call_0: read_file path=b.py OK, 12 lines]"},
    {"role": "assistant", "content": "Done."},
]


def gemini_json(value: Any) -> Any:
    """A google-genai request body with the SDK's camel-case keys spelled as rendered."""
    if isinstance(value, dict):
        return {GEMINI_KEYS.get(key, key): gemini_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [gemini_json(item) for item in value]
    return value


def gemini_parts(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """Every part of the contents with its role, as JSON text: merging entries regroups parts,
    it never changes them."""
    return [
        (entry["role"], json.dumps(part, ensure_ascii=False))
        for entry in fields["contents"]
        for part in entry["parts"]
    ]


# --- (a) the bodies the SDKs send ---------------------------------------------------------------


def test_the_openai_sdk_sends_the_responses_items_as_rendered() -> None:
    fields = responses_request(SHAPES, tools=TOOLS)
    body = WIRE.responses_body(SHAPES)
    assert encoded(fields["input"]) in body
    assert encoded(fields["tools"]) in body
    assert json.loads(body) == {"model": "gpt-test", **fields}
    assert WIRE.responses_body(copy.deepcopy(SHAPES)) == body
    # The SDK's own param types take every item and tool as rendered.
    pydantic.TypeAdapter(ResponseInputParam).validate_python(fields["input"])
    pydantic.TypeAdapter(list[FunctionToolParam]).validate_python(fields["tools"])


def test_assistant_output_text_parts_would_need_an_item_id() -> None:
    with pytest.raises(pydantic.ValidationError):
        pydantic.TypeAdapter(ResponseInputParam).validate_python(
            [{"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}]
        )


def test_the_genai_sdk_sends_the_gemini_contents_as_rendered() -> None:
    fields = gemini_request(SHAPES, tools=TOOLS)
    body = json.loads(WIRE.gemini_body(SHAPES))
    sent = gemini_json(body)
    assert sent["contents"] == fields["contents"]
    assert sent["system_instruction"] == fields["config"]["system_instruction"]
    assert sent["tools"] == fields["config"]["tools"]
    # Arguments reach the wire with their keys in the rendered (sorted) order.
    calls = [
        p["function_call"] for e in sent["contents"] for p in e["parts"] if "function_call" in p
    ]
    assert [list(c["args"]) for c in calls] == [["limit", "mode", "path"], ["flags", "pattern"]]
    assert list(calls[1]["args"]["flags"]) == ["i", "z"]
    assert WIRE.gemini_body(copy.deepcopy(SHAPES)) == WIRE.gemini_body(SHAPES)


def test_the_genai_types_take_every_rendered_entry_unchanged() -> None:
    system, contents = gemini_contents(SHAPES)
    for entry in [system, *contents]:
        model = genai_types.Content.model_validate(entry)
        assert model.model_dump(mode="json", exclude_none=True) == entry
    for tool in gemini_tools(TOOLS):
        model_tool = genai_types.Tool.model_validate(tool)
        assert model_tool.model_dump(mode="json", exclude_none=True) == tool
    blob = genai_types.Content.model_validate(contents[0]).parts[1].inline_data  # type: ignore[index]
    assert blob is not None and blob.data == b"\x89PNG\r\n\x1a\n"


def test_between_batches_the_sdk_bodies_only_append() -> None:
    sift = ContextSift(SiftSettings(budget=4000))
    previous: tuple[SiftResult, bytes, list[tuple[str, str]]] | None = None
    appended = batches = 0
    for _, result in replay(sift, 36):
        body = WIRE.responses_body(result)
        sent = gemini_json(json.loads(WIRE.gemini_body(result)))
        parts = gemini_parts(sent)
        assert sent["contents"] == gemini_request(result)["contents"]
        if previous is not None:
            before, before_body, before_parts = previous
            if result.events:
                batches += 1
            else:
                stored = len(json.loads(before_body)["input"]) - int(before.note)
                assert body.startswith(messages_prefix(before_body, stored, key="input"))
                kept = before_parts[: len(before_parts) - int(before.note)]
                assert parts[: len(kept)] == kept
                appended += 1
        previous = (result, body, parts)
    assert appended >= 20 and batches >= 3


# --- (b) determinism over sifted runs -------------------------------------------------------------

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("step"),
            st.lists(st.integers(0, 3000) | st.integers(3000, 12000), min_size=1, max_size=3),
            st.sampled_from(("grep", "read_file", "run_tests")),
            st.booleans(),
        ),
        st.tuples(st.just("nudge"), st.text(min_size=1, max_size=30)),
        st.tuples(st.just("answer"), st.text(max_size=30)),
        st.tuples(st.just("call"), st.none() | st.text(min_size=1, max_size=20)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    operations=OPERATIONS,
    budget=st.integers(500, 6000),
    window=st.none() | st.integers(4000, 16000),
)
def test_sifted_runs_render_to_growing_prefixes(
    operations: list[tuple[Any, ...]], budget: int, window: int | None
) -> None:
    budget = budget if window is None else min(budget, window)
    sift = ContextSift(SiftSettings(budget=budget, window=window))
    run = Run.start()
    sift.begin_run(run.history)
    previous: tuple[SiftResult, list[Any], dict[str, Any]] | None = None
    for operation in operations:
        kind = operation[0]
        if kind == "step":
            _, sizes, tool, error = operation
            run.step(sizes, tool=tool, error=error)
        elif kind == "nudge":
            run.nudge(operation[1])
        elif kind == "answer":
            run.answer(operation[1])
        if kind != "call" and kind != "step":
            continue
        note = operation[1] if kind == "call" else None
        result = sift.sift(run.history, tools=TOOLS, note=note)
        items = responses_request(result, tools=TOOLS)
        gemini = gemini_request(result, tools=TOOLS)

        # Equal message lists render to the same bytes.
        again = copy.deepcopy(result.messages)
        assert json.dumps(responses_request(again, tools=TOOLS)) == json.dumps(items)
        assert json.dumps(gemini_request(again, tools=TOOLS)) == json.dumps(gemini)
        assert responses_input(result.messages) == items["input"]

        if previous is not None and not result.events:
            hypothesis_event("compared with the previous request")
            before, before_items, before_gemini = previous
            stored = before_items[: len(before_items) - int(before.note)]
            assert json.dumps(items["input"][: len(stored)]) == json.dumps(stored)
            parts = gemini_parts(before_gemini)
            stored_parts = parts[: len(parts) - int(before.note)]
            assert gemini_parts(gemini)[: len(stored_parts)] == stored_parts
            assert json.dumps(gemini["config"]) == json.dumps(before_gemini["config"])
        previous = (result, items["input"], gemini)


# --- (c) shapes -----------------------------------------------------------------------------------


def test_responses_shapes() -> None:
    assert responses_input(SHAPES) == [
        {
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "You are careful."}],
        },
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Keep changes small."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What do these show?"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
                {"type": "input_image", "image_url": WEB, "detail": "auto"},
            ],
        },
        {"type": "message", "role": "assistant", "content": "Looking at both."},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "read_file",
            "arguments": '{"limit":1.50,"mode":"text","path":"a.py"}',
        },
        {
            "type": "function_call",
            "call_id": "call_b",
            "name": "grep",
            "arguments": '{"flags":{"i":true,"z":1},"pattern":"x"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "print('a')"},
        {
            "type": "function_call_output",
            "call_id": "call_b",
            "output": [
                {"type": "input_text", "text": "a.py:1 x"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Note: the tests are slow."}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": "[receipt call_0: read_file path=b.py OK, 12 lines]",
        },
        {"type": "message", "role": "assistant", "content": "Done."},
    ]


def test_responses_tools_are_flat_non_strict_and_in_name_order() -> None:
    tools = responses_tools(TOOLS)
    assert [tool["name"] for tool in tools] == sorted(tool["function"]["name"] for tool in TOOLS)
    grep = next(tool for tool in tools if tool["name"] == "grep")
    assert list(grep) == ["type", "name", "description", "parameters", "strict"]
    assert grep["strict"] is False
    strict = {"type": "function", "function": {"name": "s", "parameters": {}, "strict": True}}
    assert responses_tools([strict]) == [
        {"type": "function", "name": "s", "parameters": {"type": "object"}, "strict": True}
    ]


def test_responses_detail_and_empty_messages() -> None:
    messages: list[ChatMessage] = [
        {"role": "user", "content": ""},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": WEB, "detail": "low"}}],
        },
        {"role": "assistant", "content": None, "tool_calls": [call("c", "grep", "")]},
        {"role": "tool", "tool_call_id": "c", "content": ""},
    ]
    assert responses_input(messages) == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_image", "image_url": WEB, "detail": "low"}],
        },
        {"type": "function_call", "call_id": "c", "name": "grep", "arguments": ""},
        {"type": "function_call_output", "call_id": "c", "output": ""},
    ]


def test_gemini_shapes() -> None:
    system, contents = gemini_contents(SHAPES)
    assert system == {"parts": [{"text": "You are careful.\n\nKeep changes small."}]}
    assert contents == [
        {
            "role": "user",
            "parts": [
                {"text": "What do these show?"},
                {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}},
                {"file_data": {"file_uri": WEB, "mime_type": "image/png"}},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "Looking at both."},
                {
                    "function_call": {
                        "id": "call_a",
                        "name": "read_file",
                        "args": {"limit": 1.5, "mode": "text", "path": "a.py"},
                    }
                },
                {
                    "function_call": {
                        "id": "call_b",
                        "name": "grep",
                        "args": {"flags": {"i": True, "z": 1}, "pattern": "x"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "id": "call_a",
                        "name": "read_file",
                        "response": {"output": "print('a')"},
                    }
                },
                {
                    "function_response": {
                        "id": "call_b",
                        "name": "grep",
                        "response": {"output": "a.py:1 x"},
                        "parts": [
                            {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}
                        ],
                    }
                },
                {"text": "Note: the tests are slow."},
            ],
        },
        {
            "role": "model",
            "parts": [
                {"text": "[receipt call_0: read_file path=b.py OK, 12 lines]"},
                {"text": "Done."},
            ],
        },
    ]


def test_gemini_declarations_keep_the_json_schema_in_name_order() -> None:
    (tool,) = gemini_tools(TOOLS)
    declarations = tool["function_declarations"]
    assert [d["name"] for d in declarations] == sorted(t["function"]["name"] for t in TOOLS)
    grep = next(d for d in declarations if d["name"] == "grep")
    assert grep == {
        "name": "grep",
        "description": "grep tool",
        "parameters_json_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    assert gemini_request([{"role": "user", "content": "hi"}]) == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "config": {},
    }


def test_gemini_errors_late_system_messages_and_unnamed_results() -> None:
    messages: list[ChatMessage] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("c", "run_tests", "  ")]},
        {"role": "tool", "tool_call_id": "c", "content": "Error: 2 failed", "is_error": True},
        {"role": "developer", "content": "Stay on the task."},
    ]
    _, contents = gemini_contents(messages)
    assert contents[1:] == [
        {
            "role": "model",
            "parts": [{"function_call": {"id": "c", "name": "run_tests", "args": {}}}],
        },
        {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "id": "c",
                        "name": "run_tests",
                        "response": {"error": "Error: 2 failed"},
                    }
                },
                {"text": "Stay on the task."},
            ],
        },
    ]
    with pytest.raises(ValueError, match="follows no call"):
        gemini_contents([{"role": "tool", "tool_call_id": "gone", "content": "x"}])


def test_arguments_that_are_not_json() -> None:
    messages: list[ChatMessage] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("c", "grep", "path=a.py {")]},
        {"role": "tool", "tool_call_id": "c", "content": "x"},
    ]
    # Responses takes arguments as text: they are sent as the model wrote them.
    assert responses_input(messages)[1]["arguments"] == "path=a.py {"
    # Gemini takes an object: the renderer refuses, as `anthropic_request` does.
    with pytest.raises(ValueError, match="not JSON"):
        gemini_contents(messages)
    with pytest.raises(ValueError, match="not a JSON object"):
        gemini_contents([messages[0], {**messages[1], "tool_calls": [call("c", "grep", "[1]")]}])


def test_receipts_render_as_plain_assistant_text() -> None:
    sift = ContextSift(SiftSettings(budget=2000))
    receipt: SiftResult | None = None
    for _, result in replay(sift, 20):
        if result.events:
            receipt = result
            break
    assert receipt is not None
    first = receipt.events[0].first
    message = receipt.messages[first]
    assert message["role"] == "assistant" and "tool_calls" not in message
    items = responses_input(receipt.messages)
    assert {"type": "message", "role": "assistant", "content": message["content"]} in items
    (evicted,) = re.findall(r"\[receipt (\S+):", message["content"])[:1]
    assert [item for item in items if item.get("call_id") == evicted] == []
    parts = [part for _, part in gemini_parts(gemini_request(receipt))]
    assert json.dumps({"text": message["content"]}, ensure_ascii=False) in parts
    assert WIRE.responses_body(receipt) == WIRE.responses_body(copy.deepcopy(receipt.messages))
