"""`satchel report`: a comparison of the configs of a runs directory, as tables, JSON or a page."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from satchel.cli.output import console, fail, say, say_error
from satchel.cli.tables import fitted


def report(
    runs_dir: Annotated[
        Path, typer.Argument(help="A runs directory of `satchel run` (its --runs-dir).")
    ],
    html: Annotated[
        Path | None,
        typer.Option("--html", metavar="FILE", help="Also write the report as one HTML page."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the figures as one JSON object instead.")
    ] = False,
) -> None:
    """Compare the configs of a runs directory: per config, then per game by config.

    Figures come from the run records; a folder that is not a run is skipped with one line.
    """
    from satchel.harness.report import (
        COLUMNS,
        by_config,
        by_game,
        formatted,
        json_report,
        read_runs,
    )
    from satchel.harness.report_html import report_page

    if not runs_dir.is_dir():
        fail(f"no runs directory '{runs_dir}': give the --runs-dir of a `satchel run`", 2)
    try:
        runs = read_runs(runs_dir)
    except OSError as exc:
        fail(f"cannot read '{runs_dir}': {exc.strerror}: give a runs directory you can read", 2)
    for line in runs.skipped:
        say_error(line)
    if not runs.runs:
        fail(f"no run folder in '{runs_dir}': give the --runs-dir of a `satchel run`", 2)
    if as_json:
        typer.echo(json.dumps(json_report(runs)))
    else:
        configs = _table("per config", ["config"], COLUMNS)
        for config, row in by_config(runs).items():
            configs.add_row(Text(config), *(Text(formatted(c, row[c])) for c in COLUMNS))
        games = _table("per game", ["game", "config"], COLUMNS)
        for game, rows in by_game(runs).items():
            for config, row in rows.items():
                games.add_row(
                    Text(game), Text(config), *(Text(formatted(c, row[c])) for c in COLUMNS)
                )
        console.print(fitted(configs, console))
        console.print(fitted(games, console))
    if html is not None:
        try:
            html.write_text(report_page(runs), encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write '{html}': {exc.strerror}: give --html a file you can write", 1)
        if not as_json:
            say(f"report page: {html}")


def _table(title: str, names: Sequence[str], columns: Sequence[str]) -> Table:
    table = Table(title=title)
    for name in names:
        table.add_column(name)
    for column in columns:
        table.add_column(column, justify="right")
    return table
