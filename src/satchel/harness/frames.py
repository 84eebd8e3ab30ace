"""Frames to text: what the model is shown after each action, and the prompt it plays under."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

COORDINATE_ACTION = 6  # ACTION6 takes x and y in 0..63
GRID_SIZE = 64
RESET = 0


@dataclass(frozen=True, slots=True)
class Observation:
    """One answer of the game: its state, levels, the actions it takes now and its grids."""

    game_id: str
    state: str  # NOT_PLAYED, NOT_FINISHED, WIN, GAME_OVER
    levels_completed: int
    win_levels: int
    available_actions: tuple[int, ...]
    grids: tuple[tuple[tuple[int, ...], ...], ...]  # each GRID_SIZE x GRID_SIZE, colours 0..15

    @property
    def over(self) -> bool:
        """The game must be reset before it can be played on."""
        return self.state in ("GAME_OVER", "NOT_PLAYED")


def action_name(action_id: int) -> str:
    return "RESET" if action_id == RESET else f"ACTION{action_id}"


def sampled(grids: Sequence[object], limit: int) -> list[int]:
    """Indexes of at most `limit` grids, evenly spread, the first and the last always kept."""
    count = len(grids)
    if count <= limit:
        return list(range(count))
    if limit == 1:
        return [count - 1]
    step = (count - 1) / (limit - 1)
    return sorted({round(i * step) for i in range(limit)})


def offered(observation: Observation, reset_allowed: bool) -> list[str]:
    """The actions the model may answer with now, as it names them."""
    names = [action_name(a) for a in observation.available_actions if a != RESET]
    if reset_allowed:
        names.append("RESET")
    return names


def render(
    observation: Observation,
    *,
    max_frames: int,
    new_level: bool,
    reset_allowed: bool,
) -> str:
    """The observation as the model reads it: a state header, up to `max_frames` grids (rows as
    lists), a new-level marker after a level advance, and the actions it may take."""
    lines = [
        f"Game: {observation.game_id}",
        f"State: {observation.state}",
        f"Levels completed: {observation.levels_completed} of {observation.win_levels}",
    ]
    if new_level:
        lines.append(f"New Level: {observation.levels_completed + 1}")
    for shown, index in enumerate(sampled(observation.grids, max_frames), start=1):
        lines.append(f"Frame {shown}:")
        lines.extend(map(_row, observation.grids[index]))
    lines.append("Available actions:")
    for name in offered(observation, reset_allowed):
        if name == action_name(COORDINATE_ACTION):
            lines.append(f"- {name} x y  (where x and y are integers 0-{GRID_SIZE - 1})")
        else:
            lines.append(f"- {name}")
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def _row(row: tuple[int, ...]) -> str:
    """A grid row as the model reads it (frames repeat most of their rows: each is built once)."""
    return f"[{', '.join(map(str, row))}]"


ANSWER_FORMAT = (
    'Answer with exactly one action as JSON: {"actions": [{"action_type": "ACTION1"}]}; for '
    'the coordinate action {"actions": [{"action_type": "ACTION6", "x": 12, "y": 40}]}.'
)
CARRY_FORWARD = (
    "Only your visible reply is carried forward to your next turn: write down in it whatever you "
    "will need to remember."
)


def system_prompt(carry_forward: bool) -> str:
    """The instructions of a game; `carry_forward` for profiles whose visible replies are the
    only state carried between turns (manual_rolling)."""
    parts = [
        "You are playing a turn-based game on a 64x64 grid of colours 0-15. After each action "
        "you see the new frames. Work out the rules and win every level in as few actions as "
        "you can.",
        ANSWER_FORMAT,
    ]
    if carry_forward:
        parts.append(CARRY_FORWARD)
    return "\n\n".join(parts)
