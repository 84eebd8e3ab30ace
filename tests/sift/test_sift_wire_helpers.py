"""Wire rendering helpers: canonical arguments, OpenAI fields, Anthropic entries and breakpoints."""

import json

import pytest

from satchel.sift import (
    anthropic_request,
    anthropic_tools,
    canonical_arguments,
    openai_chat_request,
    openai_messages,
    tool_input,
)

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "grep", "arguments": '{"b": 1, "a": 2}'},
}


def test_canonical_arguments_sort_keys_and_keep_numbers_as_written() -> None:
    written = '{ "z": 1.50, "a": {"y": 1e3, "b": [-0, 12345678901234567890, 2.0]}, "é": "ü" }'
    assert canonical_arguments(written) == (
        '{"a":{"b":[-0,12345678901234567890,2.0],"y":1e3},"z":1.50,"é":"ü"}'
    )
    assert canonical_arguments('{"a": NaN}') == '{"a": NaN}'
    assert canonical_arguments("not json") == "not json"


def test_tool_input_is_an_object_with_sorted_keys() -> None:
    parsed = tool_input('{"b": {"d": 1, "c": 2}, "a": [3]}', "c1")
    assert json.dumps(parsed) == '{"a": [3], "b": {"c": 2, "d": 1}}'
    assert tool_input("", "c1") == {}
    with pytest.raises(ValueError, match="tool call 'c1' has arguments that are not JSON"):
        tool_input("{", "c1")
    with pytest.raises(ValueError, match="tool call 'c2' has arguments that are not a JSON object"):
        tool_input("[1]", "c2")


def test_openai_messages_carry_only_wire_fields_in_a_fixed_order() -> None:
    messages = [
        {"content": "hi", "role": "user", "id": "m1"},
        {"tool_calls": [CALL], "role": "assistant", "content": None, "reasoning": "x"},
        {"content": "out", "tool_call_id": "c1", "role": "tool", "is_error": False},
    ]
    rendered = openai_messages(messages)
    assert rendered == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"a":2,"b":1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]
    assert [list(message) for message in rendered] == [
        ["role", "content"],
        ["role", "content", "tool_calls"],
        ["role", "tool_call_id", "content"],
    ]
    tools = [{"type": "function", "function": {"name": n}} for n in ("b", "a")]
    request = openai_chat_request(messages, tools=tools)
    assert [tool["function"]["name"] for tool in request["tools"]] == ["a", "b"]


def test_anthropic_entries_merge_same_roles_and_convert_images_and_results() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    remote = {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}}
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, remote]},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "shot"}, image],
            "is_error": True,
        },
        {"role": "user", "content": "note"},
    ]
    request = anthropic_request(messages, note=True)
    assert request["system"] == [
        {"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}
    ]
    assert request["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "url", "url": "https://example.test/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "grep", "input": {"a": 2, "b": 1}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [
                        {"type": "text", "text": "shot"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                        },
                    ],
                    "is_error": True,
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "note"},
            ],
        },
    ]


def test_anthropic_breakpoints_sit_on_tools_system_previous_end_and_last_message() -> None:
    messages = [{"role": "system", "content": "s"}]
    for turn in range(4):
        messages.append({"role": "user", "content": f"u{turn}"})
        messages.append({"role": "assistant", "content": f"a{turn}"})
    tools = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in "ba"]
    request = anthropic_request(messages, tools=tools, previous_end=4)
    marked = [
        block["text"]
        for entry in request["messages"]
        for block in entry["content"]
        if "cache_control" in block
    ]
    assert marked == ["a1", "a3"]
    assert [tool["name"] for tool in request["tools"]] == ["a", "b"]
    assert "cache_control" in request["tools"][-1] and "cache_control" not in request["tools"][0]
    assert json.dumps(request).count("cache_control") == 4


def test_anthropic_tools_convert_function_tools_and_keep_native_ones() -> None:
    converted = anthropic_tools(
        [
            {"type": "function", "function": {"name": "grep", "description": "search"}},
            {"name": "bash", "type": "bash_20250124"},
        ]
    )
    assert converted == [
        {"name": "bash", "type": "bash_20250124"},
        {"name": "grep", "description": "search", "input_schema": {"type": "object"}},
    ]
