"""The shipped games, played through the real toolkit (`arc_agi.Arcade`, offline)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from arc_agi import Arcade, EnvironmentWrapper, OperationMode
from arcengine import FrameDataRaw, GameAction, GameState

from satchel.harness.games import GAMES_DIR

Move = tuple[GameAction, dict[str, Any]]

TITLES = {"maze-0001": "Maze", "tapx-0001": "Tap the targets", "lamp-0001": "Lamps"}
BASELINES = {"maze-0001": [10, 25, 38], "tapx-0001": [2, 3], "lamp-0001": [3, 4]}
ACTIONS = {"maze-0001": [1, 2, 3, 4], "tapx-0001": [6], "lamp-0001": [1, 2, 3, 4, 5]}

KEYS = {
    "U": GameAction.ACTION1,
    "D": GameAction.ACTION2,
    "L": GameAction.ACTION3,
    "R": GameAction.ACTION4,
}
MAZE_PATHS = [
    "RDDRDRRDDR",
    "RRRRRDDLLLDDRRRRRDDDDDRRU",
    "DRDDLDDRRRUUUUURRRRRRRRDDRRDDDDDDDDDDD",
]


def keys(path: str) -> list[Move]:
    return [(KEYS[key], {}) for key in path]


def click(x: int, y: int) -> Move:
    return GameAction.ACTION6, {"x": x, "y": y}


def press(*numbers: int) -> list[Move]:
    return [(GameAction.from_id(n), {}) for n in numbers]


PERFECT: dict[str, list[Move]] = {
    "maze-0001": [move for path in MAZE_PATHS for move in keys(path)],
    # Target centres: level 1 at cells (3, 5), (10, 9); level 2 at (2, 10), (7, 4), (12, 11);
    # targets are 3x3 cells of 4x4 pixels, so a centre is at 4 * cell + 5.
    "tapx-0001": [click(17, 25), click(45, 41), click(13, 45), click(33, 21), click(53, 49)],
    # Level 1: 0000 -> 1010; level 2: 1100 -> 0111; then submit.
    "lamp-0001": press(1, 3, 5, 1, 3, 4, 5),
}


@pytest.fixture(scope="module")
def arcade() -> Arcade:
    logger = logging.getLogger("tests.harness.arcade")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return Arcade(
        operation_mode=OperationMode.OFFLINE, environments_dir=str(GAMES_DIR), logger=logger
    )


def started(arcade: Arcade, game_id: str) -> tuple[EnvironmentWrapper, FrameDataRaw]:
    env = arcade.make(game_id)
    assert env is not None, game_id
    first = env.reset()
    assert first is not None, game_id
    assert first.state is GameState.NOT_FINISHED
    assert first.levels_completed == 0
    return env, first


def play(env: EnvironmentWrapper, moves: list[Move]) -> Iterator[FrameDataRaw]:
    for action, data in moves:
        frame = env.step(action, data=data)
        assert frame is not None, (action, data)
        yield frame


def test_the_scanner_finds_exactly_the_three_games(arcade: Arcade) -> None:
    found = {env.game_id: env for env in arcade.get_environments()}
    assert set(found) == set(TITLES)
    for game_id, env in found.items():
        assert env.title == TITLES[game_id]
        assert env.baseline_actions == BASELINES[game_id]
        assert env.local_dir is not None and env.class_name == game_id[:4].capitalize()


@pytest.mark.parametrize("game_id", sorted(PERFECT))
def test_a_perfect_player_wins_in_the_baseline_number_of_actions(
    arcade: Arcade, game_id: str
) -> None:
    env, _ = started(arcade, game_id)
    moves = PERFECT[game_id]
    assert len(moves) == sum(BASELINES[game_id])
    frames = list(play(env, moves))
    *before, last = frames
    assert all(frame.state is GameState.NOT_FINISHED for frame in before)
    assert last.state is GameState.WIN
    assert last.levels_completed == last.win_levels == len(BASELINES[game_id])
    # Levels are completed at exactly the baseline boundaries.
    ends = np.cumsum(BASELINES[game_id])
    for level, end in enumerate(ends[:-1], start=1):
        assert frames[end - 2].levels_completed == level - 1
        assert frames[end - 1].levels_completed == level


def test_a_maze_player_bumping_into_a_wall_never_finishes(arcade: Arcade) -> None:
    env, _ = started(arcade, "maze-0001")
    budget = math.ceil(sum(BASELINES["maze-0001"]) * 5)
    frames = list(play(env, [(GameAction.ACTION1, {})] * budget))
    assert len(frames) == budget
    assert all(frame.state is GameState.NOT_FINISHED for frame in frames)
    assert frames[-1].levels_completed == 0
    assert np.array_equal(frames[0].frame[-1], frames[-1].frame[-1])  # the player never moved


def test_three_misses_lose_tapx(arcade: Arcade) -> None:
    env, _ = started(arcade, "tapx-0001")
    # A hit first, then three misses (the field's corner, a pip, the bottom edge).
    frames = list(play(env, [click(17, 25), click(63, 0), click(5, 5), click(30, 63)]))
    states = [frame.state for frame in frames]
    assert states == [GameState.NOT_FINISHED] * 3 + [GameState.GAME_OVER]
    assert frames[-1].levels_completed == 0


@pytest.mark.parametrize("moves", [press(5), press(1, 2, 5)], ids=["submit", "wrong-toggles"])
def test_a_wrong_submission_loses_lamp(arcade: Arcade, moves: list[Move]) -> None:
    env, _ = started(arcade, "lamp-0001")
    frames = list(play(env, moves))
    assert frames[-1].state is GameState.GAME_OVER
    assert frames[-1].levels_completed == 0


@pytest.mark.parametrize("game_id", sorted(PERFECT))
def test_frames_are_64x64_grids_of_colours(arcade: Arcade, game_id: str) -> None:
    env, first = started(arcade, game_id)
    for frame in [first, *play(env, PERFECT[game_id])]:
        assert frame.available_actions == ACTIONS[game_id]
        assert frame.frame, "every action renders at least one frame"
        for layer in frame.frame:
            grid = layer.tolist()
            assert len(grid) == 64 and all(len(row) == 64 for row in grid)
            assert all(isinstance(v, int) and 0 <= v <= 15 for row in grid for v in row)
    assert env.action_space == [GameAction.from_id(n) for n in ACTIONS[game_id]]
