"""The sift's sticky state (evictions with their receipts, bounded results, stored artifacts, the
cut), copied for trials and saved as JSON so a relaunched agent keeps the same prefix."""

import json
from dataclasses import dataclass, field
from typing import Any

STATE_VERSION = 1


@dataclass(slots=True)
class SiftState:
    """Everything one sift carries to the next."""

    task_id: str | None = None
    receipts: dict[str, str] = field(default_factory=dict)
    """Sticky evictions: receipt text by evicted step id, in eviction order."""
    bounded: set[str] = field(default_factory=set)
    """Call ids of results shown bounded; once bounded, always bounded."""
    limits: dict[str, int] = field(default_factory=dict)
    """Bounded results held to fewer characters than `bounded_chars` so the active step fit."""
    artifacts: set[str] = field(default_factory=set)
    """Ids of the artifacts stored for receipts and bounded results."""
    whole: set[str] = field(default_factory=set)
    """Call ids of long results in the active step that were already sent whole."""
    cut: str | None = None
    """Id of the first message kept after the net's cut, held until the bound is breached again."""
    cut_pinned: list[str] = field(default_factory=list)
    """Ids of tasks before the cut that it keeps, so a new run's task does not move the cut."""
    previous_length: int | None = None
    previous_stable_end: int | None = None
    """The previous request's `stable_end`: after a batch, where its written prefix ends."""
    """How many messages the previous request had before its per-call note."""
    artifact_prefix: str = ""
    children: int = 0

    def copy(self) -> "SiftState":
        """An independent copy, for a trial sift."""
        return SiftState(
            task_id=self.task_id,
            receipts=dict(self.receipts),
            bounded=set(self.bounded),
            limits=dict(self.limits),
            artifacts=set(self.artifacts),
            whole=set(self.whole),
            cut=self.cut,
            cut_pinned=list(self.cut_pinned),
            previous_length=self.previous_length,
            previous_stable_end=self.previous_stable_end,
            artifact_prefix=self.artifact_prefix,
            children=self.children,
        )

    def to_json(self) -> str:
        """The state as a JSON document."""
        return json.dumps(
            {
                "version": STATE_VERSION,
                "task_id": self.task_id,
                "receipts": [[step_id, text] for step_id, text in self.receipts.items()],
                "bounded": sorted(self.bounded),
                "limits": dict(sorted(self.limits.items())),
                "artifacts": sorted(self.artifacts),
                "whole": sorted(self.whole),
                "cut": self.cut,
                "cut_pinned": self.cut_pinned,
                "previous_length": self.previous_length,
                "previous_stable_end": self.previous_stable_end,
                "artifact_prefix": self.artifact_prefix,
                "children": self.children,
            },
            ensure_ascii=False,
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> "SiftState":
        """Read a state written by `to_json`, naming the field that is wrong if it is malformed."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"saved sift state is not JSON: {exc.msg}") from exc
        if not isinstance(data, dict):
            raise ValueError("saved sift state must be a JSON object")
        if data.get("version") != STATE_VERSION:
            raise ValueError(
                f"saved sift state has version {data.get('version')!r}; expected {STATE_VERSION}"
            )
        receipts = _field(data, "receipts", list)
        if not all(_is_pair(item) for item in receipts):
            raise ValueError("saved sift state: `receipts` must be a list of [step id, text] pairs")
        return cls(
            task_id=_optional_str(data, "task_id"),
            receipts={step_id: text for step_id, text in receipts},
            bounded=_str_set(data, "bounded"),
            limits=_limits(data),
            artifacts=_str_set(data, "artifacts"),
            whole=_str_set(data, "whole"),
            cut=_optional_str(data, "cut"),
            cut_pinned=sorted(_str_set(data, "cut_pinned")),
            previous_length=_optional_int(data, "previous_length"),
            previous_stable_end=_optional_int(data, "previous_stable_end"),
            artifact_prefix=_field(data, "artifact_prefix", str),
            children=_field(data, "children", int),
        )


def _field[T](data: dict[str, Any], name: str, kind: type[T]) -> T:
    value = data.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        described = {int: "an integer", str: "a string", list: "a list"}.get(kind, kind.__name__)
        raise ValueError(f"saved sift state: `{name}` must be {described}")
    return value


def _optional_str(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"saved sift state: `{name}` must be a string or null")
    return value


def _optional_int(data: dict[str, Any], name: str) -> int | None:
    value = data.get(name)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"saved sift state: `{name}` must be an integer or null")
    return value


def _limits(data: dict[str, Any]) -> dict[str, int]:
    value = data.get("limits", {})
    if not isinstance(value, dict) or not all(
        isinstance(limit, int) and not isinstance(limit, bool) and limit > 0
        for limit in value.values()
    ):
        raise ValueError("saved sift state: `limits` must map call ids to positive integers")
    return dict(value)


def _str_set(data: dict[str, Any], name: str) -> set[str]:
    values = _field(data, name, list)
    if not all(isinstance(value, str) for value in values):
        raise ValueError(f"saved sift state: `{name}` must be a list of strings")
    return set(values)


def _is_pair(item: object) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], str)
    )
