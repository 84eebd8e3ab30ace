"""Receipts: the one assistant message that stands in place of an evicted step.

It keeps the step's own text, then one bracketed line per call: call id, tool, a short argument
hint, OK or ERROR, a one-line summary that keeps head and tail, and the artifact holding the output.
Surrogates (which UTF-8 cannot encode) are written as their `\\udXXX` escapes.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from satchel.sift.canonical import escape_surrogates

HINT_VALUE_CHARS = 48
HINT_CHARS = 96
ERROR_PREFIXES = ("error", "traceback", "exception", "fatal")


@dataclass(frozen=True, slots=True)
class CallRecord:
    """What a receipt line says about one call of an evicted step."""

    call_id: str
    tool: str
    arguments: str
    output: str
    images: int
    error: bool
    artifact_id: str | None
    """Where the full output is kept; None when it is not stored (a retrieval tool's result)."""


def looks_like_error(message: Mapping[str, object], text: str) -> bool:
    """Whether a tool result reports a failure: `is_error` set, or text that opens with an error."""
    flag = message.get("is_error")
    if isinstance(flag, bool):
        return flag
    head = text.lstrip()[:16].lower()
    return head.startswith(ERROR_PREFIXES)


def receipt_text(step_text: str, calls: Sequence[CallRecord], summary_chars: int) -> str:
    """The content of the receipt message for one evicted step."""
    lines = [_call_line(call, summary_chars) for call in calls]
    block = "\n".join(lines)
    return f"{escape_surrogates(step_text)}\n\n{block}" if step_text.strip() else block


def argument_hint(arguments: str) -> str:
    """A short, stable hint of a call's arguments: `key=value` pairs in key order."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return _clip(" ".join(escape_surrogates(arguments).split()), HINT_CHARS)
    if not isinstance(parsed, dict):
        return _clip(escape_surrogates(json.dumps(parsed, ensure_ascii=False)), HINT_CHARS)
    pairs = []
    for key in sorted(parsed):
        value = parsed[key]
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        flat = " ".join(escape_surrogates(shown).split())
        pairs.append(f"{escape_surrogates(key)}={_clip(flat, HINT_VALUE_CHARS)}")
    return _clip(", ".join(pairs), HINT_CHARS)


def summary(text: str, limit: int) -> str:
    """One line of at most `limit` characters; when cut, the head and the tail are both kept."""
    if len(text) <= 3 * limit:
        line = " ".join(text.split())
        if len(line) <= limit:
            return line
        head_text, tail_text = line, line
    else:
        head_text = " ".join(text[: 2 * limit].split())
        tail_text = " ".join(text[-2 * limit :].split())
    room = max(limit - 3, 2)
    head = room * 2 // 3
    tail = room - head
    return f"{head_text[:head].rstrip()} … {tail_text[-tail:].lstrip()}"


def _call_line(call: CallRecord, summary_chars: int) -> str:
    status = "ERROR" if call.error else "OK"
    said = summary(escape_surrogates(call.output), summary_chars) or "(empty)"
    if call.images:
        said += f" (+{call.images} image{'s' if call.images > 1 else ''} not kept)"
    where = (
        f"full output: artifact {call.artifact_id}, {len(call.output)} chars"
        if call.artifact_id is not None
        else "not stored"
    )
    head = f"{call.call_id}: {call.tool}({argument_hint(call.arguments)}) {status}"
    return f"[receipt {head}: {said} — {where}]"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
