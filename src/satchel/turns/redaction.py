"""The one function that decides what may leave memory: drops opaque state, masks secrets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

OPAQUE_FIELDS = frozenset({"encrypted_content", "signature", "thought_signature"})
SECRET_FIELDS = frozenset({"api_key", "authorization", "access_token", "bearer_token"})
REDACTED = "[redacted]"


def redact(value: Any, opaque_fields: Iterable[str] = ()) -> Any:
    """Return a copy of `value` fit for records, logs and diagnostics.

    Opaque provider state (`encrypted_content`, `signature`, `thought_signature`, the `data` of a
    redacted-thinking block, and any field named in `opaque_fields`) is dropped; secrets
    (`api_key`, `authorization`, `access_token`, `bearer_token`, any case) become `[redacted]`.
    """
    dropped = OPAQUE_FIELDS | frozenset(name.lower() for name in opaque_fields)
    return _redact(value, dropped)


_PLAIN = (str, int, float, bool, type(None))


def _redact(value: Any, dropped: frozenset[str]) -> Any:
    if type(value) in _PLAIN:  # the common leaf, before the slower abstract checks
        return value
    if isinstance(value, Mapping):
        redacted_thinking = value.get("type") == "redacted_thinking"
        out: dict[Any, Any] = {}
        for key, item in value.items():
            name = key.lower() if isinstance(key, str) else key
            if name in dropped or (redacted_thinking and name == "data"):
                continue
            out[key] = REDACTED if name in SECRET_FIELDS else _redact(item, dropped)
        return out
    if isinstance(value, list | tuple):
        return [_redact(item, dropped) for item in value]
    return value
