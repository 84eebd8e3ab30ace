"""Deterministic tool arguments: keys sorted, numbers kept exactly as the model wrote them."""

import json
import re
from math import isfinite
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


class _Number(str):
    """A JSON number literal, kept as written."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def escape_surrogates(text: str) -> str:
    """`text` with each surrogate (a lone half of a pair, which UTF-8 cannot encode) written as
    its `\\udXXX` escape."""
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys; numbers read by `canonical_arguments` stay as written."""
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return escape_surrogates(json.dumps(value, ensure_ascii=False))
    if isinstance(value, dict):
        items = (
            f"{canonical_json(str(key))}:{canonical_json(value[key])}" for key in sorted(value)
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    return json.dumps(value)


def canonical_arguments(arguments: str) -> str:
    """A call's arguments with sorted keys and its numbers as written; text that is not JSON is
    returned unchanged."""
    try:
        parsed = json.loads(
            arguments, parse_int=_Number, parse_float=_Number, parse_constant=_reject_constant
        )
    except ValueError:
        return arguments
    return canonical_json(parsed)


def tool_input(arguments: str, call_id: str) -> dict[str, Any]:
    """A call's arguments as a JSON object with sorted keys, for providers that take an object.

    A number too large for a float and the literals `NaN` and `Infinity` become strings of their
    literal text; a surrogate in a string becomes the text of its `\\udXXX` escape.
    """
    text = arguments.strip() or "{}"
    try:
        parsed = json.loads(text, parse_float=_finite_float, parse_constant=str)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"tool call {call_id!r} has arguments that are not JSON: {exc.msg}"
        ) from exc
    if not isinstance(parsed, dict):
        raise ValueError(f"tool call {call_id!r} has arguments that are not a JSON object")
    return {escape_surrogates(key): _sorted(parsed[key]) for key in sorted(parsed)}


def _finite_float(literal: str) -> float | str:
    number = float(literal)
    return number if isfinite(number) else literal


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {escape_surrogates(key): _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    if isinstance(value, str):
        return escape_surrogates(value)
    return value
