"""Reading a stored history as a transcript: the system prompt, then units (steps and single
messages), the pinned task and the active step. Malformed histories are refused with the reason.

The history is append-only, so a reader resumes where its previous read ended when the history
still starts with the messages it read.
"""

import json
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from satchel.sift.messages import ROLES, ChatMessage, call_arguments, call_name, tool_calls

SYSTEM_ROLES = ("system", "developer")

ReadKey = tuple[str, str]
"""A read's identity: the tool name and the target it reads."""


@dataclass(frozen=True, slots=True)
class Step:
    """One assistant message with tool calls plus the tool results that follow it."""

    id: str
    """The step's first call id: steps are remembered by it."""
    call_ids: tuple[str, ...]
    reads: tuple[tuple[ReadKey, str], ...] = ()
    """The step's reads: each read's identity and call id."""


@dataclass(frozen=True, slots=True)
class Unit:
    """A run of history messages `[start, end)` that is kept or left out whole."""

    start: int
    end: int
    step: Step | None


@dataclass(frozen=True, slots=True)
class Transcript:
    """A parsed history: messages `[0, system_end)` are the system prompt, the rest are units."""

    messages: Sequence[ChatMessage]
    system_end: int
    units: tuple[Unit, ...]
    task: int | None
    """Unit index of the task, the run's pinned first user message."""
    active: int | None
    """Unit index of the active step, the one the model is answering."""
    awaited: int
    """Units from this index on are what the model waits on: the active step and its nudges."""
    newest_reads: Mapping[ReadKey, int]
    """Unit index of the newest read of each target."""


def message_id(messages: Sequence[Mapping[str, Any]], index: int) -> str:
    """A message's id: its own `id` field when it has one, else `#index` in the stored history."""
    own = messages[index].get("id")
    return own if isinstance(own, str) else f"#{index}"


def last_user_message(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the newest user message, or None."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def find_message(messages: Sequence[Mapping[str, Any]], wanted: str) -> int | None:
    """Index of the message whose id is `wanted`, or None."""
    if wanted.startswith("#") and wanted[1:].isdigit():
        index = int(wanted[1:])
        if index < len(messages) and "id" not in messages[index]:
            return index
    for index, message in enumerate(messages):
        if message.get("id") == wanted:
            return index
    return None


class TranscriptReader:
    """Parses histories, resuming from the previous read when the history only grew."""

    def __init__(self, read_targets: Mapping[str, str]) -> None:
        self.read_targets = read_targets
        self._read: list[ChatMessage] = []
        self._system_end = 0
        self._units: list[Unit] = []
        self._calls: set[str] = set()
        self._last_step: int | None = None
        self._newest_reads: dict[ReadKey, int] = {}

    def read(self, messages: Sequence[ChatMessage], task_id: str | None) -> Transcript:
        """Parse `messages`, refusing tool results without their call and calls without results."""
        if not self._extends_previous(messages):
            self._reset(messages)
        try:
            self._read_units(messages)
            self._refuse_unanswered(messages)
        except (TypeError, ValueError):
            self._read, self._units = [], []
            raise
        self._read = list(messages)
        units = self._units
        return Transcript(
            messages=messages,
            system_end=self._system_end,
            units=tuple(units),
            task=_task_unit(messages, units, task_id),
            active=self._active(messages),
            awaited=self._awaited(messages),
            newest_reads=dict(self._newest_reads),
        )

    def _read_units(self, messages: Sequence[ChatMessage]) -> None:
        """Append the units of the messages after the last unit read."""
        index = self._units[-1].end if self._units else self._system_end
        count = len(messages)
        units = self._units
        while index < count:
            message = messages[index]
            role = _role(messages, index)
            calls = tool_calls(message) if role == "assistant" else ()
            if calls:
                step = self._read_step(messages, index, calls)
                units.append(Unit(index, _results_end(messages, index, step), step))
                self._last_step = len(units) - 1
                for key, _ in step.reads:
                    self._newest_reads[key] = self._last_step
                index = units[-1].end
            elif role == "tool":
                raise ValueError(
                    f"message {index} is a tool result for call {message.get('tool_call_id')!r} "
                    "with no matching tool call right before it"
                )
            else:
                units.append(Unit(index, index + 1, None))
                index += 1

    def _refuse_unanswered(self, messages: Sequence[ChatMessage]) -> None:
        """Refuse a history whose last step still lacks results: providers refuse such calls."""
        last = self._units[-1] if self._units else None
        if last is None or last.step is None:
            return
        answered = {
            messages[index].get("tool_call_id") for index in range(last.start + 1, last.end)
        }
        missing = [call_id for call_id in last.step.call_ids if call_id not in answered]
        if missing:
            named = ", ".join(repr(call_id) for call_id in missing)
            raise ValueError(
                f"tool call {named} of message {last.start} has no result at the end of the "
                "history; append the results before sifting"
            )

    def _extends_previous(self, messages: Sequence[ChatMessage]) -> bool:
        """Whether `messages` starts with the previous read and its last unit cannot grow."""
        done = len(self._read)
        if not self._units or len(messages) < done:
            return False
        last = self._units[-1]
        if last.step is not None and last.end - last.start - 1 < len(last.step.call_ids):
            return False
        return list(messages[:done]) == self._read

    def _reset(self, messages: Sequence[ChatMessage]) -> None:
        index = 0
        while index < len(messages) and _role(messages, index) in SYSTEM_ROLES:
            index += 1
        self._system_end = index
        self._units = []
        self._calls = set()
        self._last_step = None
        self._newest_reads = {}

    def _read_step(
        self, messages: Sequence[ChatMessage], index: int, calls: Sequence[Mapping[str, Any]]
    ) -> Step:
        ids: list[str] = []
        reads: list[tuple[ReadKey, str]] = []
        for call in calls:
            call_id = call.get("id")
            if not isinstance(call_id, str) or not call_id:
                raise ValueError(f"message {index} has a tool call without an id")
            if call_id in self._calls:
                raise ValueError(f"message {index} repeats tool call id {call_id!r}")
            self._calls.add(call_id)
            ids.append(call_id)
            name = call_name(call)
            argument = self.read_targets.get(name)
            if argument is not None:
                target = _argument(call_arguments(call), argument)
                if target is not None:
                    reads.append(((name, target), call_id))
        return Step(id=ids[0], call_ids=tuple(ids), reads=tuple(reads))

    def _active(self, messages: Sequence[ChatMessage]) -> int | None:
        last = self._last_step
        if last is None:
            return None
        after = self._units[last + 1 :]
        return last if all(messages[unit.start].get("role") == "user" for unit in after) else None

    def _awaited(self, messages: Sequence[ChatMessage]) -> int:
        active = self._active(messages)
        if active is not None:
            return active
        units = self._units
        awaited = len(units)
        while awaited > 0 and messages[units[awaited - 1].start].get("role") == "user":
            awaited -= 1
        if awaited == len(units) and units:
            return len(units) - 1
        return awaited


def _role(messages: Sequence[ChatMessage], index: int) -> str:
    message = messages[index]
    if not isinstance(message, dict):
        raise TypeError(f"message {index} is a {type(message).__name__}, not a dict")
    role = message.get("role")
    if role not in ROLES:
        raise ValueError(f"message {index} has role {role!r}; expected one of {', '.join(ROLES)}")
    return str(role)


def _results_end(messages: Sequence[ChatMessage], index: int, step: Step) -> int:
    expected = set(step.call_ids)
    end = index + 1
    count = len(messages)
    while end < count and _role(messages, end) == "tool":
        call_id = messages[end].get("tool_call_id")
        if call_id not in expected:
            raise ValueError(
                f"message {end} is a tool result for call {call_id!r}, which is not an open call "
                f"of the assistant message {index} before it"
            )
        expected.discard(call_id)
        end += 1
    if expected and end < count:
        missing = ", ".join(repr(call_id) for call_id in step.call_ids if call_id in expected)
        raise ValueError(
            f"tool call {missing} of message {index} has no result before message {end}"
        )
    return end


def _task_unit(
    messages: Sequence[ChatMessage], units: list[Unit], task_id: str | None
) -> int | None:
    if task_id is None:
        for unit_index, unit in enumerate(units):
            if messages[unit.start].get("role") == "user":
                return unit_index
        return None
    index = find_message(messages, task_id)
    if index is None:
        raise ValueError(
            f"the task {task_id!r} recorded at run start is not in the history; "
            "record the task again with begin_run()"
        )
    if messages[index].get("role") != "user":
        raise ValueError(f"the task {task_id!r} is message {index}, which is not a user message")
    return bisect_right(units, index, key=lambda unit: unit.start) - 1


def _argument(arguments: str, name: str) -> str | None:
    """One argument of a call as stable text, or None when absent or unreadable."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return None
    if not isinstance(parsed, dict) or name not in parsed:
        return None
    value = parsed[name]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
