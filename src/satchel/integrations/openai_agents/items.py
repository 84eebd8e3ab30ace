"""The memory message as a Responses input item, and reading items back as role and text.

A Responses input item has no metadata field, so the untrusted mark rides in the item's
`provider_data`, the SDK's own per-item metadata: `{"taisce.untrusted": true}`. The SDK keeps it
through sessions and filters and strips it before a request leaves for OpenAI (Responses), and the
Chat Completions conversion reads only role and content, so what a provider receives is a plain
user message whose first line (`taisce-memory/v1 untrusted`) still says what it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from agents import TResponseInputItem

from satchel.memory.message import UNTRUSTED_KEY

PROVIDER_DATA = "provider_data"


def memory_item(text: str) -> TResponseInputItem:
    """One user message carrying a memory (or context) message, marked untrusted."""
    item = {
        "type": "message",
        "role": "user",
        "content": text,
        PROVIDER_DATA: {UNTRUSTED_KEY: True},
    }
    return cast(TResponseInputItem, item)


def is_untrusted(item: object) -> bool:
    """Whether an item carries the untrusted mark in its `provider_data`."""
    if not isinstance(item, Mapping):
        return False
    data = item.get(PROVIDER_DATA)
    return isinstance(data, Mapping) and data.get(UNTRUSTED_KEY) is True


def item_role(item: object) -> str:
    """The speaker of an item: its role, `tool` for a tool's answer, else `assistant`."""
    if not isinstance(item, Mapping):
        return "assistant"
    role = item.get("role")
    if isinstance(role, str):
        return role
    return "tool" if str(item.get("type", "")).endswith("_output") else "assistant"


def item_text(item: object) -> str:
    """The text an item carries: message content, a call's name and arguments, or an output."""
    if not isinstance(item, Mapping):
        return str(item)
    if "content" in item:
        return _content_text(item["content"])
    if item.get("type") == "function_call":
        return f"{item.get('name', '')}({item.get('arguments', '')})"
    return _content_text(item.get("output", ""))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content)
