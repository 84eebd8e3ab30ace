"""`satchel rebuild facts|project|status|cancel|reports`: re-form stored turns' facts under the
current extraction setup, or write missing theme reports now. They need the `server` extra;
`facts` and `project` need the formation model (SATCHEL_FORMATION_MODEL and
SATCHEL_FORMATION_BASE_URL), `status` and `cancel` do not; `reports` uses it when it is set."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress

from satchel.cli.conventions import Command, group
from satchel.cli.extras import require
from satchel.cli.memory import DatabaseUrl, DataDir, _deployment, _memory_settings
from satchel.cli.output import fail, plain, say

if TYPE_CHECKING:
    from satchel.memory.config import MemorySettings, ModelClientSettings
    from satchel.memory.store.rebuilds import Job

rebuild_app = group("Re-form stored turns' facts under the current model and prompt.")

Project = Annotated[str, typer.Option(metavar="PROJECT", help="The project, by name.")]
Key = Annotated[
    str,
    typer.Option(
        metavar="UUID", help="A UUID you choose and keep: the same key again repeats no work."
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON object.")]


def _key(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        fail(f"--key must be a UUID you choose (e.g. from uuidgen), not {text!r}", 2)


def _run[T](job: Coroutine[Any, Any, T]) -> T:
    """Run one rebuild step; a refusal exits 1 with its message."""
    from satchel.memory.service.rebuilds import RebuildRefused

    try:
        return asyncio.run(job)
    except RebuildRefused as exc:
        fail(str(exc), 1)


def _model(settings: MemorySettings) -> ModelClientSettings:
    if settings.formation is None:
        fail(
            "a rebuild asks the formation model: set SATCHEL_FORMATION_MODEL and"
            " SATCHEL_FORMATION_BASE_URL to the setup to re-form under",
            2,
        )
    return settings.formation


def _show(job: Job, as_json: bool) -> None:
    fields = plain(dataclasses.asdict(job))
    fields["job_id"] = fields.pop("id")
    _print(fields, as_json)


def _print(fields: dict[str, Any], as_json: bool) -> None:
    """`fields` as one JSON object, or one `name: value` line each."""
    if as_json:
        typer.echo(json.dumps(fields))
        return
    for name, value in fields.items():
        say(f"{name}: {value}")


@rebuild_app.command("facts", cls=Command)
def rebuild_facts(
    project: Project,
    source: Annotated[str, typer.Option(metavar="ID", help="The stored turn's id.")],
    key: Key,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Re-form one stored turn and swap its facts in one transaction (old ones stay in history)."""
    require("server", "rebuild facts")
    from satchel.memory.formation.rebuild import rebuild_source

    try:
        source_id = uuid.UUID(source)
    except ValueError:
        fail(f"--source must be a stored turn's id, not {source!r}", 2)
    settings = _memory_settings(data_dir, database_url)
    model = _model(settings)
    with _deployment(settings) as url:
        done = _run(rebuild_source(url, model, project, source_id, _key(key)))
    _print(plain(dataclasses.asdict(done)), as_json)


@rebuild_app.command("project", cls=Command)
def rebuild_project(
    project: Project,
    key: Key,
    limit: Annotated[
        int, typer.Option(metavar="N", help="The most sources this run re-forms (1 to 100).")
    ] = 10,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Re-form the project's stored turns, up to --limit per run: run it again with the same key
    until its status is completed. One job per project."""
    require("server", "rebuild project")
    from satchel.memory.formation.rebuild import rebuild_project as run

    job_key = _key(key)
    settings = _memory_settings(data_dir, database_url)
    model = _model(settings)
    shown = Console(stderr=True)
    with (
        _deployment(settings) as url,
        Progress(console=shown, disable=not shown.is_terminal) as bar,
    ):
        task = bar.add_task("rebuilding", total=None)

        def told(job: Job) -> None:
            # Offsets, not sources: an erased turn leaves a gap in the log.
            done = -1 if job.after_offset is None else job.after_offset
            bar.update(task, completed=done + 1, total=(job.through_offset or 0) + 1)

        job = _run(run(url, model, project, job_key, limit, told))
    _show(job, as_json)


@rebuild_app.command("status", cls=Command)
def rebuild_status(
    project: Project,
    key: Annotated[
        str | None,
        typer.Option(
            metavar="UUID", help="The job's key. Default: the active job, else the latest."
        ),
    ] = None,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Show a project rebuild: its cursor, counts and status (no model needed)."""
    require("server", "rebuild status")
    from satchel.memory.formation.rebuild import status

    job_key = None if key is None else _key(key)
    with _deployment(_memory_settings(data_dir, database_url)) as url:
        job = _run(status(url, project, job_key))
    _show(job, as_json)


@rebuild_app.command("cancel", cls=Command)
def rebuild_cancel(
    project: Project,
    key: Key,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Stop a project rebuild after the source at hand; with no runner, at once (no model)."""
    require("server", "rebuild cancel")
    from satchel.memory.formation.rebuild import cancel

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        job = _run(cancel(url, project, _key(key)))
    _show(job, as_json)


@rebuild_app.command("reports", cls=Command)
def rebuild_reports(
    project: Project,
    limit: Annotated[
        int, typer.Option(metavar="N", help="The most reports this run writes (1 to 100).")
    ] = 10,
    as_json: AsJson = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Write the project's missing theme reports now, as the worker's pass does, up to --limit:
    by the formation model when one is set, else extractively."""
    require("server", "rebuild reports")
    from satchel.memory.formation.reports import rebuild_reports as run

    if not 1 <= limit <= 100:
        fail(f"--limit must be 1 to 100, not {limit}", 2)
    settings = _memory_settings(data_dir, database_url)
    with _deployment(settings) as url:
        try:
            written = asyncio.run(run(url, settings.formation, project, limit))
        except LookupError as exc:
            fail(str(exc), 1)
    shown = [plain(dataclasses.asdict(report)) for report in written]
    if as_json:
        typer.echo(json.dumps({"written": shown}))
        return
    say(f"written: {len(shown)}")
    for report in shown:
        say(f"{report['community_id']} level {report['level']}: {report['title']}")
