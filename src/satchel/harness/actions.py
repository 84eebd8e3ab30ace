"""The model's answer to one action: strict JSON, else the last available action named in text.

Anything else is `InvalidAnswer`, which the session retries from the accepted state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from satchel.harness.frames import COORDINATE_ACTION, GRID_SIZE, action_name
from satchel.turns import InvalidAnswer

COORDINATE = action_name(COORDINATE_ACTION)
_NAMED = re.compile(
    r"\b(RESET|ACTION[1-7])\b(?:[ \t]+(-?[0-9]{1,9})[ \t,]+(-?[0-9]{1,9})\b)?", re.ASCII
)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Action:
    """One action: `RESET` or `ACTION1`..`ACTION7`; x and y only for the coordinate action."""

    name: str
    x: int | None = None
    y: int | None = None

    def to_dict(self) -> dict[str, object]:
        found: dict[str, object] = {"action_type": self.name}
        if self.x is not None:
            found |= {"x": self.x, "y": self.y}
        return found


def parse_action(text: str, available: Sequence[str]) -> Action:
    """The action `text` answers, among the `available` names; `InvalidAnswer` otherwise."""
    document = _json_document(text)
    if document is not None:
        return _strict(document, available)
    return _named(text, available)


def _json_document(text: str) -> object | None:
    stripped = text.strip()
    fenced = _FENCED.findall(stripped)
    candidate = fenced[-1] if fenced else stripped
    if not candidate.startswith("{"):
        return None
    try:
        document: object = json.loads(candidate)
    except (ValueError, RecursionError):  # not JSON, a number too long, nesting too deep
        return None
    return document


def _strict(document: object, available: Sequence[str]) -> Action:
    if not isinstance(document, dict) or set(document) != {"actions"}:
        raise InvalidAnswer('the JSON answer must be {"actions": [...]} and nothing else')
    actions = document["actions"]
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise InvalidAnswer("the JSON answer must hold exactly one action")
    entry = actions[0]
    name = entry.get("action_type")
    if not isinstance(name, str):
        raise InvalidAnswer("the action needs an action_type")
    wanted = {"action_type", "x", "y"} if name == COORDINATE else {"action_type"}
    if set(entry) != wanted:
        raise InvalidAnswer(f"{name} takes exactly the keys {', '.join(sorted(wanted))}")
    if name == COORDINATE:
        return _available(Action(name, _coordinate(entry["x"]), _coordinate(entry["y"])), available)
    return _available(Action(name), available)


def _coordinate(value: object) -> int:
    if type(value) is not int or not 0 <= value < GRID_SIZE:
        raise InvalidAnswer(f"coordinates must be integers 0-{GRID_SIZE - 1}, got {value!r}")
    return value


def _available(action: Action, available: Sequence[str]) -> Action:
    if action.name not in available:
        raise InvalidAnswer(f"{action.name} is not available now ({', '.join(available)})")
    return action


def _named(text: str, available: Sequence[str]) -> Action:
    for match in reversed(list(_NAMED.finditer(text))):
        name, x, y = match.groups()
        if name not in available:
            continue
        if name != COORDINATE:
            return Action(name)
        if x is None or y is None:
            raise InvalidAnswer(f"{COORDINATE} needs x and y")
        return Action(name, _coordinate(int(x)), _coordinate(int(y)))
    raise InvalidAnswer("the answer names no available action")
