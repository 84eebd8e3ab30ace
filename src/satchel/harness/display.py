"""What a run shows: a live table of the games in play, and a summary when they have ended."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from satchel.harness.play import Progress
from satchel.harness.runner import PlayedGame


def progress_table(boards: Sequence[Progress]) -> Table:
    """Per game: level, actions of the level's budget, retries, tokens, cost, status."""
    table = Table(title="satchel run", expand=False)
    for column in ("game", "level", "actions", "retries", "tokens", "cost", "status"):
        table.add_column(
            column,
            justify="left" if column in ("game", "status") else "right",
            no_wrap=column == "game",
            overflow="fold",
        )
    for board in boards:
        levels = f"{board.level}/{board.win_levels}" if board.win_levels else str(board.level)
        cost = f"${board.cost:.4f}" if board.cost is not None else "-"
        table.add_row(
            board.game_id,
            levels,
            f"{board.actions} (budget {board.budget})" if board.budget else str(board.actions),
            str(board.retries),
            f"{board.tokens:,}",
            cost,
            board.status,
        )
    return table


def summary_table(played: Sequence[PlayedGame]) -> Table:
    """Per game: how it ended, levels, actions, score and its run folder."""
    table = Table(title="results")
    for column in ("game", "exit", "levels", "actions", "score", "records"):
        table.add_column(
            column,
            justify="right" if column in ("actions", "score") else "left",
            no_wrap=column == "game",
            overflow="fold",
        )
    for game in played:
        result = game.result
        table.add_row(
            result.game_id,
            result.exit_reason,
            f"{result.levels_completed}/{result.win_levels}",
            str(result.actions),
            f"{result.score:.2f}" if result.score is not None else "-",
            str(game.run_dir),
        )
    return table
