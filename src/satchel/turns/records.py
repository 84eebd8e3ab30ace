"""The records of a run: `step_NNN.json`, `compaction_NNN.json`, `lesson.json` and
`run_meta.json`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from satchel.turns.contract import AdapterDescriptor
from satchel.turns.redaction import redact

METADATA_LIMIT_BYTES = 16 * 1024
_SHA = re.compile(r"[0-9a-fA-F]{7,64}")


def fit_text(text: str, limit: int = METADATA_LIMIT_BYTES) -> str:
    """Fit `text` into `limit` UTF-8 bytes, keeping its head and tail around a marker."""
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f"\n[... {len(data)} bytes, middle omitted ...]\n"
    room = max(0, limit - len(marker.encode()))
    head = data[: room // 2].decode(errors="ignore")
    tail = data[len(data) - (room - room // 2) :].decode(errors="ignore")
    return head + marker + tail


def action_record(action: object) -> Any:
    """A JSON-able form of a parsed action."""
    if dataclasses.is_dataclass(action) and not isinstance(action, type):
        return dataclasses.asdict(action)
    try:
        json.dumps(action, allow_nan=False)
    except (TypeError, ValueError):
        return repr(action)
    return action


def runtime_metadata(
    descriptor: AdapterDescriptor,
    *,
    strategy: str,
    config_id: str | None,
    settings: dict[str, Any],
    compaction_policy: dict[str, Any],
    compactions: int,
) -> dict[str, Any]:
    """The `runtime` block of `run_meta.json`; the commit comes from `SATCHEL_COMMIT_SHA` or,
    as the public benchmarking harness names it, `ARC_HARNESS_COMMIT_SHA`."""
    sha = os.environ.get("SATCHEL_COMMIT_SHA") or os.environ.get("ARC_HARNESS_COMMIT_SHA", "")
    commit = sha if _SHA.fullmatch(sha) else None
    source = os.environ.get("SATCHEL_SOURCE_URL", "").rstrip("/")
    permalink = (
        f"{source}/blob/{commit}/{descriptor.implementation_path}" if commit and source else None
    )
    return {
        "adapter_id": descriptor.adapter_id,
        "strategy": strategy,
        "config_id": config_id,
        "settings": settings,
        "provider": descriptor.provider,
        "api_surface": descriptor.api_surface,
        "implementation_path": descriptor.implementation_path,
        "adapter_version": descriptor.version,
        "review_status": descriptor.review_status,
        "commit_sha": commit,
        "source_permalink": permalink,
        "compaction": {**compaction_policy, "count": compactions},
    }


class RecordsWriter:
    """Writes redacted JSON records into one run directory.

    A step's `messages_sent` repeats every earlier message of a continuous conversation, so each
    message is redacted and rendered once and its text reused by the steps after it.
    """

    def __init__(self, run_dir: str | Path, opaque_fields: Iterable[str] = ()) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.opaque_fields = frozenset(opaque_fields)
        self._rendered: dict[tuple[tuple[str, Any], ...], bytes] = {}

    def write_step(self, step: int, record: dict[str, Any]) -> Path:
        return self._write(f"step_{step:03d}.json", record)

    def write_compaction(self, number: int, record: dict[str, Any]) -> Path:
        return self._write(f"compaction_{number:03d}.json", record)

    def write_lesson(self, record: dict[str, Any]) -> Path:
        return self._write("lesson.json", record)

    def write_run_meta(self, record: dict[str, Any]) -> Path:
        return self._write("run_meta.json", record)

    def _write(self, name: str, record: dict[str, Any]) -> Path:
        path = self.run_dir / name
        tmp = path.with_suffix(".json.tmp")
        rest = {key: value for key, value in record.items() if key != SENT}
        text = json.dumps(redact(rest, self.opaque_fields), indent=2, ensure_ascii=False)
        if SENT not in record:
            data = (text + "\n").encode()
        else:  # most of the list is reused from the step before: joined from rendered pieces
            head = f"{text[:-2]},\n  " if rest else "{\n  "
            sent = b",\n    ".join(map(self._message, record[SENT]))
            tail = b"\n  ]\n}\n" if sent else b"]\n}\n"
            data = b"".join((f'{head}"{SENT}": ['.encode(), b"\n    " if sent else b"", sent, tail))
        tmp.write_bytes(data)
        tmp.replace(path)
        return path

    def _message(self, message: Any) -> bytes:
        """One message of `messages_sent`, redacted, as one line of UTF-8 JSON (rendered once)."""
        key = _hashable(message)
        rendered = self._rendered.get(key) if key is not None else None
        if rendered is None:
            rendered = json.dumps(redact(message, self.opaque_fields), ensure_ascii=False).encode()
            if key is not None:
                self._rendered[key] = rendered
        return rendered


SENT = "messages_sent"


def _hashable(message: Any) -> tuple[tuple[str, Any], ...] | None:
    """A message's items as a key, when they are all plain strings (the common case)."""
    if not isinstance(message, dict):
        return None
    items = tuple(message.items())
    if all(type(k) is str and (type(v) is str or v is None) for k, v in items):
        return items
    return None
