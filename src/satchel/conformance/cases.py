"""The conformance cases: their shape, and loading them from the files shipped with satchel.

A case file is `{"suite", "memory_message_prefix", "cases": [...]}`; each case is one agent turn
and what must be true of it afterwards. The published taisce cases ship unchanged beside ours.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from satchel.integrations.driver import DriverMessage, Turn
from satchel.memory.message import MEMORY_MESSAGE_PREFIX

CASES_DIR = Path(__file__).parent / "cases"
SHIPPED_FILES = (
    CASES_DIR / "taisce-conformance-cases.json",
    CASES_DIR / "satchel-cases.json",
)


class CasesError(ValueError):
    """A case file that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Seed(_Strict):
    """A fact the runner asserts for the case's subject before the turn."""

    subject: str
    predicate: str
    object: str
    statement: str


Fault = Literal["unavailable"]


class Faults(_Strict):
    """The operations the fault proxy refuses during the turn."""

    recall: Fault | None = None
    observe: Fault | None = None
    context: Fault | None = None


class ContextWatermark(_Strict):
    stored: int | None = None
    formed: int | None = None
    parked: int = 0


class ContextSegment(_Strict):
    segment_id: str
    level: int
    from_offset: int
    to_offset: int
    covered: int
    summary: str


class ContextTurn(_Strict):
    log_offset: int
    occurred_at: str
    messages: list[DriverMessage]


class ContextAnswer(_Strict):
    """What the fault proxy answers for `POST /v1/contexts` in place of the deployment."""

    watermark: ContextWatermark
    segments: list[ContextSegment] = Field(default_factory=list)
    turns: list[ContextTurn] = Field(default_factory=list)
    characters: int = 0
    truncated: bool = False


class Expect(_Strict):
    """What the runner checks after the turn; an absent field is not checked."""

    memory_messages: int | None = None
    memory_role: str | None = None
    memory_untrusted: bool | None = None
    memory_carries: list[str] | None = None
    model_carries: list[str] | None = None
    model_lacks: list[str] | None = None
    fatal: bool | None = None
    store_error: bool | None = None
    observed: bool | None = None
    observed_roles: list[str] | None = None
    observed_contents: list[str] | None = None
    stored: int | None = None
    observed_groups: list[int] | None = None
    observe_calls: int | None = None
    observe_keys_equal: bool | None = None


class Case(_Strict):
    """One agent turn, the conditions it runs under, and what must be true afterwards."""

    name: str = Field(min_length=1)
    rule: str
    seed: list[Seed] = Field(default_factory=list)
    faults: Faults = Field(default_factory=Faults)
    context: ContextAnswer | None = None
    turn: Turn
    expect: Expect

    @field_validator("turn", mode="before")
    @classmethod
    def _known_turn_fields(cls, value: Any) -> Any:
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(Turn.model_fields))
            if unknown:
                raise ValueError(f"unknown turn field(s): {', '.join(unknown)}")
        return value


class Suite(_Strict):
    """A case file as loaded."""

    suite: str
    memory_message_prefix: str = MEMORY_MESSAGE_PREFIX
    cases: list[Case]


def _field(location: Sequence[int | str]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(the document)"


def _explain(path: Path, error: ValidationError) -> str:
    lines = [f"{path}: not a valid case file:"]
    for problem in error.errors():
        lines.append(f"  {_field(problem['loc'])}: {problem['msg']}")
    return "\n".join(lines)


def load_suite(path: Path) -> Suite:
    """One case file, validated; any problem raises `CasesError` naming the file and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CasesError(f"{path}: cannot read the case file ({error.strerror})") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise CasesError(f"{path}: not JSON ({error.msg} at {where})") from None
    try:
        suite = Suite.model_validate(document)
    except ValidationError as error:
        raise CasesError(_explain(path, error)) from None
    if suite.memory_message_prefix != MEMORY_MESSAGE_PREFIX:
        raise CasesError(
            f"{path}: memory_message_prefix is {suite.memory_message_prefix!r}; "
            f"this suite judges {MEMORY_MESSAGE_PREFIX!r}"
        )
    return suite


def load_cases(path: Path | None = None) -> list[Case]:
    """The cases of `path`, or by default the shipped ones (the published cases first)."""
    cases: list[Case] = []
    seen: dict[str, Path] = {}
    for source in (path,) if path is not None else SHIPPED_FILES:
        for case in load_suite(source).cases:
            if case.name in seen:
                raise CasesError(
                    f"{source}: case name {case.name!r} is already used in {seen[case.name]}"
                )
            seen[case.name] = source
            cases.append(case)
    return cases
