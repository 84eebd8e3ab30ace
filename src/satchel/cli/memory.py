"""`satchel serve`, `worker`, `formation` and `tokens`: the memory deployment's commands.

They need the `server` extra; each imports the deployment only once it is known to be installed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.table import Table
from rich.text import Text

from satchel.cli.conventions import Command, group
from satchel.cli.extras import require
from satchel.cli.output import console, fail, say
from satchel.cli.tables import fitted

if TYPE_CHECKING:
    from satchel.memory.config import MemorySettings

tokens_app = group("Create, list and revoke bearer tokens of the memory deployment.")
formation_app = group("Operate the formation of stored turns.")

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="Where the embedded database lives. Default: SATCHEL_DATA_DIR, else "
        "~/.local/share/satchel. Ignored when SATCHEL_DATABASE_URL is set.",
    ),
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        metavar="URL",
        help="The deployment's database (an administrator's or the login role's URL); overrides"
        " SATCHEL_DATABASE_URL and --data-dir.",
    ),
]


def _memory_settings(data_dir: Path | None, database_url: str | None = None) -> MemorySettings:
    from satchel.memory.config import MemorySettings, SettingError

    env = {**os.environ, "SATCHEL_DATABASE_URL": database_url} if database_url else None
    try:
        return MemorySettings.from_env(env, data_dir=data_dir)
    except SettingError as exc:
        fail(str(exc), 2)


def serve(
    host: Annotated[str, typer.Option(metavar="HOST", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port to listen on.")] = 8080,
    data_dir: DataDir = None,
    role: Annotated[
        Literal["all", "api", "worker"],
        typer.Option(
            help="all: API and a worker process beside it; api: HTTP only; worker: formation only."
        ),
    ] = "all",
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log/--no-access-log",
            envvar="SATCHEL_ACCESS_LOG",
            help="One line per request on stderr (env SATCHEL_ACCESS_LOG=0 turns it off).",
        ),
    ] = True,
) -> None:
    """Serve the memory deployment (embedded PostgreSQL unless SATCHEL_DATABASE_URL is set).

    SIGINT or SIGTERM stops it, its worker and its embedded PostgreSQL.
    """
    require("server", "serve")
    from satchel.memory.threads import one_thread_each

    one_thread_each()
    from satchel.memory.formation.model import HostNotAllowed
    from satchel.memory.server import NoRoom, NotMigrated, ServeError, work
    from satchel.memory.server import serve as run
    from satchel.memory.store.embedded import EmbeddedBusy

    try:
        settings = _memory_settings(data_dir)
        if role == "worker":
            work(settings, announce=say)
        else:
            run(
                settings,
                host,
                port,
                announce=say,
                with_worker=role == "all",
                access_log=access_log,
            )
    except (HostNotAllowed, NoRoom, NotMigrated) as exc:
        fail(str(exc), 2)
    except (ServeError, EmbeddedBusy) as exc:
        fail(str(exc), 1)


def worker(data_dir: DataDir = None) -> None:
    """Form stored turns: facts, segments and passages (stops on Ctrl-C or SIGTERM)."""
    require("server", "worker")
    from satchel.memory.formation.model import HostNotAllowed
    from satchel.memory.server import NoRoom, NotMigrated, ServeError, work

    try:
        work(_memory_settings(data_dir), announce=say)
    except (HostNotAllowed, NoRoom, NotMigrated) as exc:
        fail(str(exc), 2)
    except ServeError as exc:
        fail(str(exc), 1)


@contextmanager
def _deployment(settings: MemorySettings) -> Iterator[str]:
    """The deployment's database for a manage command, or exit 2 saying none is there."""
    from satchel.memory.server import NoDeployment, deployment

    try:
        with deployment(settings) as url:
            yield url
    except NoDeployment as exc:
        fail(str(exc), 2)


@formation_app.command("unpark", cls=Command)
def formation_unpark(
    project: Annotated[
        str | None, typer.Option(metavar="PROJECT", help="Only this project.")
    ] = None,
    turn_id: Annotated[
        str | None,
        typer.Option("--id", metavar="ID", help="Only this turn (see satchel formation parked)."),
    ] = None,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Put parked turns (those that failed formation 6 times) back in line for the worker."""
    require("server", "formation unpark")
    from satchel.memory.operator import unpark_turn
    from satchel.memory.server import unpark

    one = None if turn_id is None else _turn_id(turn_id, project)
    with _deployment(_memory_settings(data_dir, database_url)) as url:
        if one is None:
            count = unpark(url, project)
        elif unpark_turn(url, one):
            count = 1
        else:
            fail(f"no parked turn has the id {turn_id!r}: see satchel formation parked", 1)
    console.print(f"unparked {count} turn(s)")


def _turn_id(text: str, project: str | None) -> uuid.UUID:
    """The `--id` given, or exit 2 saying what is wrong with it."""
    if project is not None:
        fail("give --id or --project, not both: an id names one turn of one project", 2)
    try:
        return uuid.UUID(text)
    except ValueError:
        fail(f"--id must be a turn's id as satchel formation parked lists it, not {text!r}", 2)


@tokens_app.command("create", cls=Command)
def tokens_create(
    project: Annotated[str, typer.Option(metavar="PROJECT", help="The project the token opens.")],
    read_only: Annotated[bool, typer.Option("--read-only", help="Reads only.")] = False,
    name: Annotated[str, typer.Option(metavar="NAME", help="A label for the token.")] = "",
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Create a token and print it once (only its digest is stored).

    stderr says which database holds it.
    """
    require("server", "tokens create")
    from satchel.memory.server import where
    from satchel.memory.service.tokens import create_token

    settings = _memory_settings(data_dir, database_url)
    with _deployment(settings) as url:
        try:
            token = create_token(url, project, read_only=read_only, name=name)
        except ValueError as exc:
            fail(str(exc), 2)
    typer.echo(token)
    typer.echo(f"token for project {project!r} written to {where(settings)}", err=True)


@tokens_app.command("list", cls=Command)
def tokens_list(
    project: Annotated[
        str | None, typer.Option(metavar="PROJECT", help="Only this project.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per token.")] = False,
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """List tokens by prefix and id, what `satchel tokens revoke` takes.

    The tokens themselves are never stored. A narrow terminal shows fewer columns, never a cut
    prefix or id.
    """
    require("server", "tokens list")
    from satchel.memory.service.tokens import list_tokens

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        rows = list_tokens(url, project)
    if as_json:
        for row in rows:
            typer.echo(
                json.dumps(
                    {
                        "id": str(row.id),
                        "project": row.project,
                        "name": row.name,
                        "prefix": row.prefix,
                        "access": row.access,
                        "created_at": row.created_at.isoformat(),
                        "revoked_at": row.revoked_at.isoformat() if row.revoked_at else None,
                    }
                )
            )
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ("prefix", "id", "status", "project", "access", "name", "created", "revoked")
    for column in columns:
        table.add_column(column)
    for row in rows:
        cells = (
            row.prefix,
            str(row.id),
            "revoked" if row.revoked_at else "active",
            row.project,
            row.access,
            row.name,
            row.created_at.isoformat(timespec="seconds"),
            row.revoked_at.isoformat(timespec="seconds") if row.revoked_at else "",
        )
        table.add_row(*(Text(cell) for cell in cells))
    console.print(fitted(table, console))


@tokens_app.command("revoke", cls=Command)
def tokens_revoke(
    token: Annotated[str, typer.Argument(help="The token, its id, or its 12-character prefix.")],
    data_dir: DataDir = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Revoke a token at once."""
    require("server", "tokens revoke")
    from satchel.memory.service.tokens import revoke_token

    with _deployment(_memory_settings(data_dir, database_url)) as url:
        count = revoke_token(url, token)
    if not count:
        fail("no active token matches that token, id or prefix (see satchel tokens list)", 1)
    console.print(f"revoked {count} token(s)")
