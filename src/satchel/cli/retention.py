"""`satchel retention`: set, show and clear projects' retention policies, sweep now, and list the
sweeps' receipts."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from satchel.cli.conventions import Command, group
from satchel.cli.extras import require
from satchel.cli.memory import DatabaseUrl, DataDir, _deployment, _memory_settings
from satchel.cli.output import console, fail
from satchel.cli.tables import fitted

if TYPE_CHECKING:
    from satchel.memory.store.retention import Policy, Sweep

retention_app = group("Keep each project's turns for a number of days, then delete them.")

Project = Annotated[str, typer.Option(metavar="PROJECT", help="The project.")]
OnlyProject = Annotated[str | None, typer.Option(metavar="PROJECT", help="Only this project.")]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else ""


def _policy_json(policy: Policy) -> dict[str, Any]:
    return {
        "project": policy.project,
        "days": policy.keep_days,
        "inactive_after": policy.inactive_after_days,
        "updated_at": policy.updated_at.isoformat(),
    }


def _sweep_json(receipt: Sweep) -> dict[str, Any]:
    return {
        "id": str(receipt.id),
        "project": receipt.project,
        "swept_at": receipt.swept_at.isoformat(),
        "now": receipt.now_used.isoformat(),
        "deadline": receipt.deadline.isoformat() if receipt.deadline else None,
        "deleted": receipt.deleted,
        "residual": receipt.residual,
        "clean": receipt.clean,
        "inactive_after": receipt.inactive,
    }


def _counts(counts: dict[str, int]) -> str:
    return " ".join(f"{name}={count}" for name, count in sorted(counts.items()) if count) or "0"


def _print_receipts(receipts: list[Sweep], as_json: bool) -> None:
    if as_json:
        for receipt in receipts:
            typer.echo(json.dumps(_sweep_json(receipt)))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("project", "now", "deadline", "deleted", "residual", "inactive"):
        table.add_column(column)
    for receipt in receipts:
        cells = (
            receipt.project,
            _when(receipt.now_used),
            _when(receipt.deadline),
            _counts(receipt.deleted),
            _counts(receipt.residual),
            str(len(receipt.inactive)),
        )
        table.add_row(*(Text(cell) for cell in cells))
    console.print(fitted(table, console))


@retention_app.command("set", cls=Command)
def retention_set(
    project: Project,
    days: Annotated[
        int, typer.Option(metavar="N", help="Days a turn is kept after it was stored.")
    ],
    inactive_after: Annotated[
        int | None,
        typer.Option(
            metavar="DAYS", help="Report subjects with no turn stored for this many days."
        ),
    ] = None,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Set a project's policy: its turns stop being served, and are deleted, N days after
    they were stored. What the policy expires at once is swept before the command ends, so no
    read has to wait for it."""
    require("server", "retention set")
    from satchel.memory.service.retention import set_policy, sweep_now

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        try:
            set_policy(url, project, days, inactive_after)
        except ValueError as exc:
            fail(str(exc), 2)
        console.print(f"project {project!r} keeps its turns {days} day(s) after they are stored")
        receipts = sweep_now(url, project, None)
    _print_receipts(receipts, as_json=False)


@retention_app.command("show", cls=Command)
def retention_show(
    project: OnlyProject = None,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """List the projects' policies (a project not listed keeps its turns) and their last sweep."""
    require("server", "retention show")
    from satchel.memory.service.retention import list_receipts, show_policies

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        try:
            policies = show_policies(url, project)
            last = {receipt.project: receipt for receipt in list_receipts(url, project, 1)}
        except ValueError as exc:
            fail(str(exc), 2)
    if as_json:
        for policy in policies:
            typer.echo(json.dumps(_policy_json(policy)))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("project", "days", "inactive after", "updated", "last sweep"):
        table.add_column(column)
    for policy in policies:
        swept = last.get(policy.project)
        cells = (
            policy.project,
            str(policy.keep_days),
            str(policy.inactive_after_days or ""),
            _when(policy.updated_at),
            _when(swept.swept_at) if swept else "",
        )
        table.add_row(*(Text(cell) for cell in cells))
    console.print(fitted(table, console))


@retention_app.command("clear", cls=Command)
def retention_clear(
    project: Project, data_dir: DataDir = None, database_url: DatabaseUrl = None
) -> None:
    """Remove a project's policy: its turns are kept until erased."""
    require("server", "retention clear")
    from satchel.memory.service.retention import clear_policy

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        try:
            had = clear_policy(url, project)
        except ValueError as exc:
            fail(str(exc), 2)
    console.print(f"project {project!r} keeps its turns" + ("" if had else " (it had no policy)"))


def _moment(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        fail(
            f"--now must be an ISO 8601 time with its zone, like 2030-01-31T00:00:00+00:00,"
            f" not {text!r}",
            2,
        )
    return moment


@retention_app.command("sweep", cls=Command)
def retention_sweep(
    project: OnlyProject = None,
    now: Annotated[
        str | None,
        typer.Option(
            metavar="ISO", help="Sweep as if it were this time. Default: the database's clock."
        ),
    ] = None,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Sweep now, as the worker does on its own every SATCHEL_RETENTION_INTERVAL seconds:
    delete expired turns with everything derived from them, and expired artifacts."""
    require("server", "retention sweep")
    from satchel.memory.service.retention import sweep_now

    moment = _moment(now)
    with _deployment(_memory_settings(data_dir, database_url)) as url:
        try:
            receipts = sweep_now(url, project, moment)
        except ValueError as exc:
            fail(str(exc), 2)
    _print_receipts(receipts, as_json)


@retention_app.command("receipts", cls=Command)
def retention_receipts(
    project: OnlyProject = None,
    limit: Annotated[int, typer.Option(metavar="N", min=1, help="At most N receipts.")] = 20,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """List the latest sweeps' receipts, newest first: what each deleted and left."""
    require("server", "retention receipts")
    from satchel.memory.service.retention import list_receipts

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        try:
            receipts = list_receipts(url, project, limit)
        except ValueError as exc:
            fail(str(exc), 2)
    _print_receipts(receipts, as_json)
