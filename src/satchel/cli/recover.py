"""`satchel recover facts`: put back lost facts from formation receipts, with no model call."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer

from satchel.cli.conventions import Command, group
from satchel.cli.extras import require
from satchel.cli.memory import DatabaseUrl, DataDir, _deployment, _memory_settings
from satchel.cli.output import fail, say

if TYPE_CHECKING:
    from satchel.memory.service.recovery import Recovered

recover_app = group("Put back what was lost from the records formation kept.")


def _source(text: str | None) -> uuid.UUID | None:
    if text is None:
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        fail(f"--source must be a turn's id (an observation id), not {text!r}", 2)


def _json(found: Recovered, dry_run: bool) -> dict[str, Any]:
    return {
        "sources": found.sources,
        "restored": found.restored,
        "present": found.present,
        "withdrawn": found.withdrawn,
        "refused": [str(source) for source in found.refused],
        "dry_run": dry_run,
    }


@recover_app.command("facts", cls=Command)
def recover_facts(
    project: Annotated[str, typer.Option(metavar="PROJECT", help="The project.")],
    source: Annotated[
        str | None,
        typer.Option(metavar="ID", help="Only the facts formed from this turn (observation id)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would come back; change nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Put back the facts formation admitted that are gone (deleted by hand or by mistake),
    exactly as they were, from each turn's newest formation receipt, with no model call.
    Retracted, corrected and withdrawn facts stay gone, and so does anything erased or expired."""
    require("server", "recover facts")
    from satchel.memory.service.recovery import NoReceipt, recover_facts

    chosen = _source(source)
    with _deployment(_memory_settings(data_dir, database_url)) as url:
        try:
            found = recover_facts(url, project, chosen, dry_run=dry_run)
        except NoReceipt as exc:
            fail(str(exc), 1)
        except ValueError as exc:
            fail(str(exc), 2)
    if as_json:
        typer.echo(json.dumps(_json(found, dry_run)))
        return
    verb = "would restore" if dry_run else "restored"
    say(
        f"{verb} {found.restored} fact(s) from {found.sources} turn(s)' receipts;"
        f" {found.present} still there, {found.withdrawn} withdrawn (not restored)"
    )
    for refused in found.refused:
        say(f"refused turn {refused}: its facts conflict with facts now there; left as they are")
