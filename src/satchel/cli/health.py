"""`satchel health` and `satchel formation parked`: what an operator reads of a deployment.

`satchel health` exits 0 when the deployment is healthy, 1 when it names a problem (turns wait
and no worker runs, turns wait too long, turns are parked), 2 when there is no deployment to
read. They need the `server` extra; each imports the deployment only once it is installed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from satchel.cli.conventions import Command
from satchel.cli.extras import require
from satchel.cli.memory import DatabaseUrl, DataDir, _deployment, _memory_settings, formation_app
from satchel.cli.output import console, plain, say
from satchel.cli.tables import fitted

PARKED_SHOWN = 1000  # the most parked turns one listing shows


def health(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    stale_after: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="A worker that has not reported in for this long is not live. Default: "
            "SATCHEL_REQUIRE_WORKER's age, else 300.",
        ),
    ] = None,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Report the deployment's health: turns stored, formed, waiting and parked, the oldest
    waiting, workers' heartbeats and last failure, connections, per project.

    Exit 0 when healthy, 1 when a problem is named, 2 when no deployment is found.
    """
    require("server", "health")
    from satchel.memory.config import DEFAULT_WORKER_AGE
    from satchel.memory.operator import health as read

    settings = _memory_settings(data_dir, database_url)
    window = stale_after or settings.require_worker or DEFAULT_WORKER_AGE
    with _deployment(settings) as url:
        report = read(url, window)
    if as_json:
        body = plain(dataclasses.asdict(report))
        slots = report.connections
        body["connections"] = {
            "in_use": slots.in_use,
            "max": slots.limit,
            "reserved": slots.reserved,
            "free": slots.free,
        }
        typer.echo(json.dumps({"healthy": report.healthy, **body}))
    else:
        _show(report)
    if not report.healthy:
        raise typer.Exit(1)


def _show(report: Any) -> None:
    waited = report.oldest_pending_age_seconds
    slots = report.connections
    say(f"{'healthy' if report.healthy else 'NOT healthy'}")
    say(
        f"turns: {report.stored} stored, {report.formed} formed, {report.pending} waiting,"
        f" {report.parked} parked"
        + (f"; the oldest waiting for {waited:.0f} s" if waited is not None else "")
    )
    say(f"workers: {report.live_workers} live")
    for worker in report.workers:
        state = "stopped" if worker.stopped_at else f"beat {worker.beat_age:.0f} s ago"
        say(
            f"  {worker.host} pid {worker.pid}: {state}; formed {worker.formed}, failed"
            f" {worker.failed}, embedded {worker.embedded}"
        )
    if report.last_failure is not None:
        say(f"last failure: {report.last_failure} at {report.last_failure_at.isoformat()}")
    say(
        f"connections: {slots.in_use} in use of {slots.limit} ({slots.reserved} reserved,"
        f" {slots.free} free)"
    )
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("project", "stored", "formed", "waiting", "parked", "oldest waiting since"):
        table.add_column(column)
    for row in report.projects:
        oldest = (
            row.oldest_pending_at.isoformat(timespec="seconds") if row.oldest_pending_at else ""
        )
        cells = (row.project, row.stored, row.formed, row.pending, row.parked, oldest)
        table.add_row(*(Text(str(cell)) for cell in cells))
    console.print(fitted(table, console))
    for problem in report.problems:
        say(f"problem {problem.code}: {problem.message}")


@formation_app.command("parked", cls=Command)
def formation_parked(
    project: Annotated[
        str | None, typer.Option(metavar="PROJECT", help="Only this project.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per turn.")] = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """List parked turns, longest parked first: id, project, kind, log offset, attempts, when
    stored and parked, and the kind of the last failure. Never a turn's messages or subject.

    `satchel formation unpark --id ID` puts one back in line.
    """
    require("server", "formation parked")
    from satchel.memory.operator import parked_turns

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        turns = parked_turns(url, project, PARKED_SHOWN)
    if as_json:
        for turn in turns:
            typer.echo(json.dumps(plain(dataclasses.asdict(turn))))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ("id", "project", "failure", "attempts", "parked", "offset", "kind", "stored")
    for column in columns:
        table.add_column(column)
    for turn in turns:
        cells = (
            str(turn.id),
            turn.project,
            turn.failure or "",
            str(turn.attempts),
            turn.parked_at.isoformat(timespec="seconds"),
            str(turn.log_offset),
            turn.kind,
            turn.stored_at.isoformat(timespec="seconds"),
        )
        table.add_row(*(Text(cell) for cell in cells))
    console.print(fitted(table, console))
