"""Frames to text: what the model is shown after each action, and the prompt it plays under."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from satchel.providers.profiles import FrameFormat

COORDINATE_ACTION = 6  # ACTION6 takes x and y in 0..63
GRID_SIZE = 64
RESET = 0
HEX_DIGITS = "0123456789abcdef"  # a compact row's digit for each colour 0..15


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
    frame_format: FrameFormat = "grid",
) -> str:
    """The observation as the model reads it: a state header, up to `max_frames` grids (each row
    a list of numbers, or with `compact` a string of hexadecimal digits), a new-level marker
    after a level advance, and the actions it may take."""
    lines = [
        f"Game: {observation.game_id}",
        f"State: {observation.state}",
        f"Levels completed: {observation.levels_completed} of {observation.win_levels}",
    ]
    if new_level:
        lines.append(f"New Level: {observation.levels_completed + 1}")
    for shown, index in enumerate(sampled(observation.grids, max_frames), start=1):
        lines.append(f"Frame {shown}:")
        lines.extend(frame_rows(observation.grids[index], frame_format))
    lines.append("Available actions:")
    for name in offered(observation, reset_allowed):
        if name == action_name(COORDINATE_ACTION):
            lines.append(f"- {name} x y  (where x and y are integers 0-{GRID_SIZE - 1})")
        else:
            lines.append(f"- {name}")
    return "\n".join(lines)


def observation_record(
    observation: Observation, *, max_frames: int, available: Sequence[str]
) -> dict[str, object]:
    """What a step record keeps of the observation the model was shown: its state, levels, the
    actions offered and the frames `render` showed (at most `max_frames`), each as `hex_rows`."""
    return {
        "state": observation.state,
        "levels_completed": observation.levels_completed,
        "win_levels": observation.win_levels,
        "available_actions": list(available),
        "frames": [hex_rows(observation.grids[i]) for i in sampled(observation.grids, max_frames)],
    }


def hex_rows(grid: Sequence[tuple[int, ...]]) -> list[str | list[int]]:
    """A grid's rows, each a string of one hexadecimal digit a cell; a row holding a colour
    outside 0-15 is kept as its list of numbers instead."""
    return [_hex_row(row) or list(row) for row in grid]


def frame_rows(grid: Sequence[tuple[int, ...]], frame_format: FrameFormat) -> list[str]:
    """A grid's rows as the model reads them, one line each."""
    return list(map(_ROW_WRITERS[frame_format], grid))


# Frames repeat most of their rows: each row's text is built once.
@functools.lru_cache(maxsize=4096)
def _grid_row(row: tuple[int, ...]) -> str:
    """A grid row as a list of numbers: `[0, 5, 12]`."""
    return f"[{', '.join(map(str, row))}]"


@functools.lru_cache(maxsize=4096)
def _hex_row(row: tuple[int, ...]) -> str | None:
    """A grid row as one hexadecimal digit a cell (`05c`); None when a colour is outside 0-15."""
    if not all(0 <= colour < len(HEX_DIGITS) for colour in row):
        return None
    return "".join(HEX_DIGITS[colour] for colour in row)


def _compact_row(row: tuple[int, ...]) -> str:
    """A grid row as one hexadecimal digit a cell: `05c`."""
    written = _hex_row(row)
    if written is None:
        outside = next(colour for colour in row if not 0 <= colour < len(HEX_DIGITS))
        raise ValueError(
            f"a frame holds colour {outside}, outside 0-15: the compact frame format writes "
            "one hexadecimal digit a cell; play this game with agent.FRAME_FORMAT: grid"
        )
    return written


_ROW_WRITERS: dict[FrameFormat, Callable[[tuple[int, ...]], str]] = {
    "grid": _grid_row,
    "compact": _compact_row,
}


ANSWER_FORMAT = (
    'Answer with exactly one action as JSON: {"actions": [{"action_type": "ACTION1"}]}; for '
    'the coordinate action {"actions": [{"action_type": "ACTION6", "x": 12, "y": 40}]}.'
)
COMPACT_ROWS = (
    "Each frame is 64 lines of 64 hexadecimal digits, one digit a cell: 0-9 are colours 0-9 "
    "and a-f are colours 10-15. Line y (the first is y=0, the last y=63) is row y; within a "
    "line, digit x (the first is x=0, the last x=63) is column x. So the cell at x, y is digit "
    "x of line y, and the coordinate action takes that x and y."
)
CARRY_FORWARD = (
    "Only your visible reply is carried forward to your next turn: write down in it whatever you "
    "will need to remember."
)


def system_prompt(carry_forward: bool, frame_format: FrameFormat = "grid") -> str:
    """The instructions of a game; `carry_forward` for profiles whose visible replies are the
    only state carried between turns (manual_rolling); with `compact` frames, how to read them."""
    parts = [
        "You are playing a turn-based game on a 64x64 grid of colours 0-15. After each action "
        "you see the new frames. Work out the rules and win every level in as few actions as "
        "you can.",
    ]
    if frame_format == "compact":
        parts.append(COMPACT_ROWS)
    parts.append(ANSWER_FORMAT)
    if carry_forward:
        parts.append(CARRY_FORWARD)
    return "\n\n".join(parts)
