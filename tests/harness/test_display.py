"""The live table and the results of a run, rendered for the same games: they agree on levels, and
a run folder is shown whole on one line at any width; rows name their config when several play."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from harness.test_player import LAMP_LEVELS, act, play
from satchel.harness.display import progress_table, summary_table
from satchel.harness.environments import Arena
from satchel.harness.play import GameResult, Limits, Progress
from satchel.harness.runner import PlayedGame

FOLDER = Path("runs/lamp-0001.qwen3-open-weight-continuous.20261201T184206Z.4ecd30")
LAMP = [name for level in LAMP_LEVELS for name in level]


@pytest.fixture(scope="module")
def arena() -> Iterator[Arena]:
    games = Arena(online=False)
    yield games
    games.close()


def rendered(table: Table, width: int = 300) -> list[str]:
    console = Console(file=io.StringIO(), width=width)
    console.print(table, crop=False)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return [line for line in str(text).splitlines() if line.strip()]


def cell(table: Table, header: str) -> str:
    """The one row's cell under `header`, as the table is printed."""
    lines = rendered(table)
    headers = next(line for line in lines if "┃" in line).split("┃")
    row = next(line for line in lines if "│" in line).split("│")
    return row[[part.strip() for part in headers].index(header)].strip()


@pytest.mark.parametrize(
    ("replies", "exit_reason", "levels"),
    [
        ([act(name) for name in LAMP], "WIN", "2/2"),
        ([act(name) for name in LAMP_LEVELS[0]], "API_ERROR", "1/2"),  # then the script is out
        ([act("ACTION1")], "API_ERROR", "0/2"),
    ],
)
def test_the_live_table_and_the_results_agree_on_levels(
    arena: Arena, replies: list[dict[str, Any]], exit_reason: str, levels: str
) -> None:
    played = play(arena, "lamp-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    assert played.result.exit_reason == exit_reason
    live = cell(progress_table([played.player.progress]), "levels")
    results = cell(summary_table([PlayedGame(played.result, FOLDER)], 300), "levels")
    assert live == results == levels


@pytest.mark.parametrize("width", [200, 100, 80, 70, 40])
def test_a_run_folder_is_never_wrapped_or_cut(width: int) -> None:
    result = GameResult("lamp-0001", "GAME_OVER_BUDGET", 1, 2, 9, 9, 12.5)
    lines = rendered(summary_table([PlayedGame(result, FOLDER)], width), width)
    assert any(str(FOLDER) in line for line in lines), lines
    if len(str(FOLDER)) + 20 < width:
        assert all(len(line) <= width for line in lines), lines


def test_a_game_without_records_names_no_folder() -> None:
    result = GameResult("lamp-0001", "AGENT_ERROR", 0, 0, 0, 0, None, error="no key")
    assert cell(summary_table([PlayedGame(result, None)], 300), "records") == "-"


def test_both_tables_name_the_config_only_when_several_play() -> None:
    result = GameResult("lamp-0001", "WIN", 2, 2, 7, 7, 100.0)
    for configs, shown in ((["model-a"], False), (["model-a", "model-b"], True)):
        boards = [Progress("lamp-0001", config=config) for config in configs]
        played = [PlayedGame(result, FOLDER, config) for config in configs]
        for table in (progress_table(boards), summary_table(played, 300)):
            text = "\n".join(rendered(table))
            assert ("config" in text) is shown and ("model-b" in text) is shown, text
