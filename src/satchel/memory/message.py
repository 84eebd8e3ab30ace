"""The memory message and the turn key: what every integration renders the same way.

The bytes match the published taisce clients, so a message any of them injected parses here and a
turn stored by two integrations carries one idempotency key.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MEMORY_MESSAGE_PREFIX = "taisce-memory/v1 untrusted"
UNTRUSTED_KEY = "taisce.untrusted"


class NotAMemoryMessage(ValueError):
    """Raised by `parse_memory_message` for text no integration injected."""

    def __init__(self, why: str) -> None:
        super().__init__(f"not a memory message: {why}")


@dataclass(frozen=True)
class MemoryMessage:
    """The document under the prefix line; `segments` and `turns` mark a context's form."""

    watermark: dict[str, Any]
    plan: dict[str, Any]
    facts: list[Any] = field(default_factory=list)
    reports: list[Any] = field(default_factory=list)
    passages: list[Any] = field(default_factory=list)
    segments: list[Any] | None = None
    turns: list[Any] | None = None
    keys: tuple[str, ...] = ()

    @property
    def is_context(self) -> bool:
        return self.segments is not None or self.turns is not None


def _watermark(source: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "stored": source.get("stored"),
        "formed": source.get("formed"),
        "parked": source.get("parked", 0),
    }


def _render(document: Mapping[str, Any]) -> str:
    return MEMORY_MESSAGE_PREFIX + "\n" + json.dumps(document, separators=(",", ":"))


def render_memory_message(watermark: Mapping[str, Any], recall: Mapping[str, Any]) -> str:
    """A recall's form: the watermark, the plan (what the recall did) and its arrays unchanged."""
    return _render(
        {
            "watermark": _watermark(watermark),
            "plan": {
                "controls": recall.get("controls"),
                "degraded": recall.get("degraded") or [],
                "reach": recall.get("reach"),
            },
            "facts": recall.get("facts") or [],
            "reports": recall.get("reports") or [],
            "passages": recall.get("passages") or [],
        }
    )


def render_context_message(context: Mapping[str, Any]) -> str:
    """A context's form: the watermark, the assembly's cost as the plan, segments and turns."""
    watermark = context.get("watermark")
    return _render(
        {
            "watermark": _watermark(watermark if isinstance(watermark, Mapping) else {}),
            "plan": {
                "characters": context.get("characters") or 0,
                "truncated": bool(context.get("truncated")),
            },
            "segments": context.get("segments") or [],
            "turns": context.get("turns") or [],
        }
    )


def is_memory_text(text: str | None) -> bool:
    """Whether a message's text is one an integration injected, judged by its first line."""
    return bool(text) and text is not None and text.startswith(MEMORY_MESSAGE_PREFIX)


def recall_is_empty(recall: Mapping[str, Any]) -> bool:
    """True when a recall returned no facts, reports or passages: nothing is injected then."""
    return not (recall.get("facts") or recall.get("reports") or recall.get("passages"))


def parse_memory_message(content: str) -> MemoryMessage:
    """Read a message an integration injected, in either form, or raise `NotAMemoryMessage`."""
    head, newline, body = content.partition("\n")
    if head != MEMORY_MESSAGE_PREFIX or not newline:
        raise NotAMemoryMessage(f"the first line is not {MEMORY_MESSAGE_PREFIX!r}")
    try:
        document = json.loads(body)
    except json.JSONDecodeError as error:
        raise NotAMemoryMessage(f"the document is not JSON ({error.msg})") from None
    if not isinstance(document, dict):
        raise NotAMemoryMessage("the document is not a JSON object")
    for name in ("watermark", "plan"):
        if not isinstance(document.get(name), dict):
            raise NotAMemoryMessage(f"{name!r} is missing or not an object")
    arrays: dict[str, list[Any] | None] = {}
    for name in ("facts", "reports", "passages", "segments", "turns"):
        value = document.get(name)
        if value is not None and not isinstance(value, list):
            raise NotAMemoryMessage(f"{name!r} is not an array")
        arrays[name] = value
    return MemoryMessage(
        watermark=document["watermark"],
        plan=document["plan"],
        facts=arrays["facts"] or [],
        reports=arrays["reports"] or [],
        passages=arrays["passages"] or [],
        segments=arrays["segments"],
        turns=arrays["turns"],
        keys=tuple(document),
    )


def turn_key(
    data_subject_id: str | None, run_id: str | None, messages: Sequence[Mapping[str, str]]
) -> str:
    """A turn's idempotency key: a version-5 UUID over subject, run and observed messages."""
    text = (data_subject_id or "") + "\n" + (run_id or "") + "\n"
    text += "".join(m["role"] + "\n" + m["content"] + "\n" for m in messages)
    raw = bytearray(hashlib.sha256(text.encode("utf-8")).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))
