"""What a run shows: a live table of the games in play, and a summary when they have ended."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from satchel.harness.play import Progress
from satchel.harness.runner import PlayedGame

PROGRESS_COLUMNS = ("game", "levels", "actions", "retries", "tokens", "cost", "status")
RESULT_COLUMNS = ("game", "exit", "levels", "actions", "score", "records")
# Narrower and narrower choices of the results' columns: the least important go first.
_NARROWER = (
    RESULT_COLUMNS,
    ("game", "exit", "levels", "score", "records"),
    ("game", "exit", "levels", "records"),
    ("game", "exit", "records"),
    ("game", "records"),
)
_MEASURING = Console(file=io.StringIO(), width=100_000)


def levels_cell(levels_completed: int, win_levels: int) -> str:
    """Levels completed of the game's levels, as both tables show them."""
    return f"{levels_completed}/{win_levels}" if win_levels else str(levels_completed)


def progress_table(boards: Sequence[Progress]) -> Table:
    """Per game: levels completed, actions of the level's budget, retries, tokens, cost, status;
    and its config when several play."""
    table = Table(title="satchel run", expand=False)
    columns = _with_config(PROGRESS_COLUMNS, [board.config for board in boards])
    for column in columns:
        table.add_column(
            column,
            justify="left" if column in ("game", "config", "status") else "right",
            no_wrap=column in ("game", "config"),
            overflow="fold",
        )
    for board in boards:
        cells = {
            "game": board.game_id,
            "config": board.config,
            "levels": levels_cell(board.levels_completed, board.win_levels),
            "actions": f"{board.actions} (budget {board.budget})"
            if board.budget
            else str(board.actions),
            "retries": str(board.retries),
            "tokens": f"{board.tokens:,}",
            "cost": f"${board.cost:.4f}" if board.cost is not None else "-",
            "status": board.status,
        }
        table.add_row(*(cells[column] for column in columns))
    return table


def _with_config(columns: Sequence[str], configs: Sequence[str]) -> tuple[str, ...]:
    """`columns` with `config` after `game` when more than one config plays."""
    if len(set(configs)) < 2 or "game" not in columns:
        return tuple(columns)
    at = columns.index("game") + 1
    return (*columns[:at], "config", *columns[at:])


def summary_table(played: Sequence[PlayedGame], width: int) -> Table:
    """Per game: how it ended, levels, actions, score and its run folder, within `width`
    columns where it can be.

    A run folder is a value to copy, so it is never wrapped or cut: at a narrow width the least
    important columns are dropped, and the borders where that is enough; a folder wider than
    `width` alone keeps the table wider (print it with `crop=False`). With several configs each
    row names its config too.
    """
    configs = [game.config for game in played]
    table = _results(played, RESULT_COLUMNS, boxed=True)
    for narrower in _NARROWER:
        columns = _with_config(narrower, configs)
        for boxed in (True, False):
            table = _results(played, columns, boxed=boxed)
            needed = Measurement.get(_MEASURING, _MEASURING.options, table).maximum
            if needed <= width:
                return table
    table.width = needed
    return table


def _results(played: Sequence[PlayedGame], columns: Sequence[str], *, boxed: bool) -> Table:
    table = Table(title="results") if boxed else Table(title="results", box=None, pad_edge=False)
    for column in columns:
        table.add_column(
            column, justify="right" if column in ("actions", "score") else "left", no_wrap=True
        )
    for game in played:
        result = game.result
        cells = {
            "game": result.game_id,
            "config": game.config,
            "exit": result.exit_reason,
            "levels": levels_cell(result.levels_completed, result.win_levels),
            "actions": str(result.actions),
            "score": f"{result.score:.2f}" if result.score is not None else "-",
            "records": str(game.run_dir) if game.run_dir is not None else "-",
        }
        table.add_row(*(cells[column] for column in columns))
    return table
