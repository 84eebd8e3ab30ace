"""Normalized messages: the provider-neutral shape callers send and records show."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.turns.errors import ConfigurationError

NeutralMessage = dict[str, Any]
"""`{"role": "system" | "user" | "assistant", "content": str | list[content part]}`."""

INPUT_ROLES = frozenset({"system", "user"})
INPUT_FIELDS = frozenset({"role", "content", "name"})


def check_input_messages(messages: Sequence[NeutralMessage], what: str = "new_messages") -> None:
    """Refuse input messages that are not `{"role": "system"|"user", "content": ...}` dicts."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise ConfigurationError(
            f"{what} must be a list of messages, got {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
        where = f"{what}[{index}]"
        if not isinstance(message, dict):
            raise ConfigurationError(f"{where} must be a dict, got {type(message).__name__}")
        unknown = sorted(set(message) - INPUT_FIELDS)
        if unknown:
            raise ConfigurationError(
                f"{where}.{unknown[0]}: unknown field (messages carry role, content and name)"
            )
        role = message.get("role")
        if role not in INPUT_ROLES:
            raise ConfigurationError(f"{where}.role must be 'system' or 'user', got {role!r}")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise ConfigurationError(
                f"{where}.content must be a string or a list of parts, got {type(content).__name__}"
            )
