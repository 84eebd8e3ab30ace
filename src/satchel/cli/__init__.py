"""The `satchel` command: thin wrappers that call the parts, one module per group of commands."""

from __future__ import annotations

from typing import Annotated

import typer

from satchel import __version__
from satchel.cli import (
    bench,
    bootstrap,
    conformance,
    harness,
    health,
    memory,
    providers,
    rebuild,
    recover,
    report,
    retention,
    view,
)
from satchel.cli.conventions import Command, group
from satchel.cli.output import console

app = group("satchel: what an LLM agent carries from one model call to the next.")


def _version(value: bool) -> None:
    if value:
        console.print(f"satchel {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """satchel: turn state, cache-stable context and memory for LLM agents."""


app.command(cls=Command)(providers.providers)
app.command(name="run", cls=Command, options_metavar=harness.RUN_USAGE)(harness.run_games)
app.command(name="model-server", cls=Command)(harness.model_server)
app.command(cls=Command)(report.report)
app.command(cls=Command)(view.view)
app.add_typer(memory.tokens_app, name="tokens")
app.command(cls=Command)(memory.serve)
app.command(cls=Command)(memory.worker)
app.add_typer(memory.formation_app, name="formation")
app.add_typer(retention.retention_app, name="retention")
app.add_typer(rebuild.rebuild_app, name="rebuild")
app.add_typer(recover.recover_app, name="recover")
app.command(cls=Command)(health.health)
app.command(cls=Command)(bootstrap.bootstrap)
app.command(
    cls=Command,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)(bench.bench)
app.command(cls=Command)(conformance.conformance)


def main() -> None:
    app()


__all__ = ["app", "console", "main"]
