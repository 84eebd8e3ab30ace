"""Frames to text: sampling, rendering and the system prompt."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from satchel.harness.frames import (
    Observation,
    hex_rows,
    offered,
    render,
    sampled,
    system_prompt,
)


@given(st.integers(min_value=0, max_value=300), st.integers(min_value=1, max_value=64))
def test_sampled_keeps_at_most_limit_indexes_evenly_with_the_ends(count: int, limit: int) -> None:
    indexes = sampled(range(count), limit)
    assert len(indexes) == min(count, limit)
    assert indexes == sorted(set(indexes))  # sorted and unique
    assert all(0 <= index < count for index in indexes)
    if count <= limit:
        assert indexes == list(range(count))
    if count > 0:
        assert indexes[-1] == count - 1
        if limit >= 2:
            assert indexes[0] == 0
    if len(indexes) >= 3:  # evenly spread: the gaps differ by at most one
        gaps = [b - a for a, b in pairwise(indexes)]
        assert max(gaps) - min(gaps) <= 1


def test_sampled_with_room_for_one_keeps_the_last() -> None:
    assert sampled(list("abcde"), 1) == [4]
    assert sampled(list("a"), 1) == [0]
    assert sampled([], 3) == []


def grid(fill: int, rows: int = 3, columns: int = 4) -> tuple[tuple[int, ...], ...]:
    """A small grid whose first cell names it (`fill`), so a test can tell frames apart."""
    return tuple(
        tuple(fill if (r, c) == (0, 0) else (r * columns + c) % 16 for c in range(columns))
        for r in range(rows)
    )


def observation(
    *,
    frames: int = 1,
    actions: tuple[int, ...] = (1, 2, 3, 4),
    state: str = "NOT_FINISHED",
    levels: int = 1,
) -> Observation:
    return Observation(
        game_id="demo-0001",
        state=state,
        levels_completed=levels,
        win_levels=3,
        available_actions=actions,
        grids=tuple(grid(index % 16) for index in range(frames)),
    )


def frame_blocks(text: str) -> list[list[list[int]]]:
    """The grids a rendering shows, each row read back as a JSON list."""
    blocks: list[list[list[int]]] = []
    for line in text.splitlines():
        if line.startswith("Frame "):
            blocks.append([])
        elif line.startswith("[") and blocks:
            blocks[-1].append(json.loads(line))
    return blocks


def action_lines(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[lines.index("Available actions:") + 1 :]


def test_render_shows_the_state_header() -> None:
    text = render(
        observation(state="GAME_OVER", levels=2), max_frames=3, new_level=False, reset_allowed=True
    )
    lines = text.splitlines()
    assert lines[:3] == ["Game: demo-0001", "State: GAME_OVER", "Levels completed: 2 of 3"]


def test_render_marks_a_new_level_only_when_asked() -> None:
    shown = render(observation(levels=1), max_frames=3, new_level=True, reset_allowed=False)
    assert "New Level: 2" in shown.splitlines()
    hidden = render(observation(levels=1), max_frames=3, new_level=False, reset_allowed=False)
    assert "New Level" not in hidden


def test_render_offers_reset_only_when_it_is_allowed() -> None:
    game = observation(actions=(0, 1, 2))  # the toolkit lists RESET (0) itself here
    allowed = render(game, max_frames=1, new_level=False, reset_allowed=True)
    assert action_lines(allowed) == ["- ACTION1", "- ACTION2", "- RESET"]
    refused = render(game, max_frames=1, new_level=False, reset_allowed=False)
    assert action_lines(refused) == ["- ACTION1", "- ACTION2"]
    assert "RESET" not in refused
    assert offered(game, reset_allowed=False) == ["ACTION1", "ACTION2"]
    assert offered(game, reset_allowed=True) == ["ACTION1", "ACTION2", "RESET"]


def test_render_shows_the_coordinate_action_with_its_hint() -> None:
    text = render(
        observation(actions=(1, 6, 7)), max_frames=1, new_level=False, reset_allowed=False
    )
    lines = action_lines(text)
    assert lines[0] == "- ACTION1"
    assert lines[1].startswith("- ACTION6 x y")
    assert "0-63" in lines[1] and "integers" in lines[1]
    assert lines[2] == "- ACTION7"
    assert len(lines) == 3


def test_render_shows_each_row_as_a_list_of_ints() -> None:
    game = observation(frames=2)
    text = render(game, max_frames=5, new_level=False, reset_allowed=False)
    assert frame_blocks(text) == [[list(row) for row in g] for g in game.grids]
    assert "Frame 1:" in text and "Frame 2:" in text


def test_render_shows_a_full_size_grid() -> None:
    big = tuple(tuple((r + c) % 16 for c in range(64)) for r in range(64))
    game = Observation("demo-0001", "NOT_FINISHED", 0, 1, (1,), (big,))
    text = render(game, max_frames=1, new_level=False, reset_allowed=False)
    [shown] = frame_blocks(text)
    assert shown == [list(row) for row in big]
    assert len(shown) == 64 and all(len(row) == 64 for row in shown)


@pytest.mark.parametrize(("frames", "limit"), [(1, 1), (3, 7), (7, 7), (12, 7), (40, 3), (9, 1)])
def test_render_shows_at_most_max_frames_the_sampled_ones(frames: int, limit: int) -> None:
    game = observation(frames=frames)
    text = render(game, max_frames=limit, new_level=False, reset_allowed=False)
    blocks = frame_blocks(text)
    assert len(blocks) == min(frames, limit)
    assert [f"Frame {n}:" for n in range(1, len(blocks) + 1)] == [
        line for line in text.splitlines() if line.startswith("Frame ")
    ]
    shown = [block[0][0] for block in blocks]  # each grid's first cell names it
    assert shown == [index % 16 for index in sampled(game.grids, limit)]
    assert shown[-1] == (frames - 1) % 16  # the last frame is always shown


@given(st.integers(min_value=1, max_value=30), st.integers(min_value=1, max_value=10))
def test_render_never_shows_more_than_max_frames(frames: int, limit: int) -> None:
    text = render(observation(frames=frames), max_frames=limit, new_level=False, reset_allowed=True)
    assert len(frame_blocks(text)) == min(frames, limit)


CARRY_FORWARD_PHRASE = "Only your visible reply is carried forward"


def test_the_carry_forward_instruction_is_given_only_when_asked() -> None:
    rolling = system_prompt(carry_forward=True)
    continuous = system_prompt(carry_forward=False)
    assert CARRY_FORWARD_PHRASE in rolling
    assert "visible reply" not in continuous and "carried forward" not in continuous
    for prompt in (rolling, continuous):  # both explain the answer format
        assert '{"actions": [{"action_type": "ACTION1"}]}' in prompt
        assert '"x": 12, "y": 40' in prompt
    assert rolling.startswith(continuous)


KNOWN_GRID = (
    tuple(range(16)),
    tuple(range(15, -1, -1)),
    (5,) * 16,
)
KNOWN = Observation("demo-0001", "NOT_FINISHED", 0, 1, (1, 6), (KNOWN_GRID,))


def test_the_default_rendering_is_the_grid_of_lists() -> None:
    expected = "\n".join(
        [
            "Game: demo-0001",
            "State: NOT_FINISHED",
            "Levels completed: 0 of 1",
            "Frame 1:",
            "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]",
            "[15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]",
            "[5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]",
            "Available actions:",
            "- ACTION1",
            "- ACTION6 x y  (where x and y are integers 0-63)",
        ]
    )
    assert render(KNOWN, max_frames=1, new_level=False, reset_allowed=False) == expected
    grid = render(KNOWN, max_frames=1, new_level=False, reset_allowed=False, frame_format="grid")
    assert grid == expected


def test_the_compact_rendering_writes_each_row_as_one_hexadecimal_digit_a_cell() -> None:
    text = render(KNOWN, max_frames=1, new_level=True, reset_allowed=True, frame_format="compact")
    assert text == "\n".join(
        [
            "Game: demo-0001",
            "State: NOT_FINISHED",
            "Levels completed: 0 of 1",
            "New Level: 1",
            "Frame 1:",
            "0123456789abcdef",
            "fedcba9876543210",
            "5555555555555555",
            "Available actions:",
            "- ACTION1",
            "- ACTION6 x y  (where x and y are integers 0-63)",
            "- RESET",
        ]
    )


def compact_blocks(text: str) -> list[list[str]]:
    """The grids a compact rendering shows, each as its lines of digits."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("Frame "):
            blocks.append([])
        elif line == "Available actions:":
            break
        elif blocks:
            blocks[-1].append(line)
    return blocks


@given(st.binary(min_size=64 * 64, max_size=64 * 64))
def test_a_compact_frame_reads_back_as_digit_x_of_line_y(cells: bytes) -> None:
    big = tuple(tuple(cell % 16 for cell in cells[y * 64 : (y + 1) * 64]) for y in range(64))
    game = Observation("demo-0001", "NOT_FINISHED", 0, 1, (6,), (big,))
    text = render(game, max_frames=1, new_level=False, reset_allowed=False, frame_format="compact")
    [lines] = compact_blocks(text)
    assert len(lines) == 64 and all(len(line) == 64 for line in lines)
    assert all(int(lines[y][x], 16) == big[y][x] for y in range(64) for x in range(64))


@pytest.mark.parametrize("frames", [1, 3, 12])
def test_compact_frames_are_sampled_as_grids_are(frames: int) -> None:
    game = observation(frames=frames)
    grid = render(game, max_frames=7, new_level=False, reset_allowed=False)
    compact = render(
        game, max_frames=7, new_level=False, reset_allowed=False, frame_format="compact"
    )
    read_back = [
        [[int(digit, 16) for digit in line] for line in block] for block in compact_blocks(compact)
    ]
    assert read_back == frame_blocks(grid)


@pytest.mark.parametrize("colour", [16, -1])
def test_a_colour_a_digit_cannot_write_is_refused_naming_it(colour: int) -> None:
    game = Observation("demo-0001", "NOT_FINISHED", 0, 1, (1,), (((0, colour),),))
    with pytest.raises(ValueError, match=rf"colour {colour}, outside 0-15.*FRAME_FORMAT: grid"):
        render(game, max_frames=1, new_level=False, reset_allowed=False, frame_format="compact")


GRID_PROMPT = (
    "You are playing a turn-based game on a 64x64 grid of colours 0-15. After each action you "
    "see the new frames. Work out the rules and win every level in as few actions as you can."
    '\n\nAnswer with exactly one action as JSON: {"actions": [{"action_type": "ACTION1"}]}; for '
    'the coordinate action {"actions": [{"action_type": "ACTION6", "x": 12, "y": 40}]}.'
)


def test_the_grid_instructions_are_unchanged_and_say_nothing_of_digits() -> None:
    assert system_prompt(carry_forward=False) == GRID_PROMPT
    assert system_prompt(carry_forward=False, frame_format="grid") == GRID_PROMPT
    assert "hexadecimal" not in system_prompt(carry_forward=True)


@pytest.mark.parametrize("carry_forward", [False, True])
def test_the_compact_instructions_say_once_how_to_read_a_row(carry_forward: bool) -> None:
    prompt = system_prompt(carry_forward, frame_format="compact")
    assert prompt.count("hexadecimal") == 1
    assert "0-9 are colours 0-9 and a-f are colours 10-15" in prompt
    assert "the cell at x, y is digit x of line y" in prompt
    assert "first is y=0" in prompt and "first is x=0" in prompt
    assert '"x": 12, "y": 40' in prompt  # the answer format is the same
    assert (CARRY_FORWARD_PHRASE in prompt) is carry_forward


def test_a_recorded_frame_is_hexadecimal_rows_and_a_row_outside_the_palette_its_numbers() -> None:
    grid = ((0, 9, 10, 15), (3, 16, -1, 2))
    assert hex_rows(grid) == ["09af", [3, 16, -1, 2]]
