"""The `satchel` command: thin wrappers that call the parts."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from satchel import __version__

app = typer.Typer(
    help="satchel: what an LLM agent carries from one model call to the next.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


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


@app.command()
def providers(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per adapter.")] = False,
) -> None:
    """List every registered provider adapter with its descriptor."""
    from satchel.providers import REGISTRY

    descriptors = list(REGISTRY)
    if as_json:
        for descriptor in descriptors:
            typer.echo(json.dumps(descriptor.to_dict()))
        return
    for d in descriptors:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim")
        table.add_column()
        table.add_row("provider", d.provider)
        table.add_row("API surface", d.api_surface)
        table.add_row("implementation", d.implementation_path)
        table.add_row("version", d.version)
        table.add_row("strategies", ", ".join(d.strategies))
        table.add_row("compaction", ", ".join(d.compaction))
        table.add_row("review status", d.review_status)
        console.print(f"[bold]{d.adapter_id}[/bold]", soft_wrap=True)
        console.print(table, "")


def _benchmark_dirs() -> list[Path]:
    source_tree = Path(__file__).resolve().parents[2] / "benchmarks"
    return [Path.cwd() / "benchmarks", source_tree]


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Benchmark name (benchmarks/NAME.py).")] = None,
    list_all: Annotated[bool, typer.Option("--list", help="List the benchmarks.")] = False,
) -> None:
    """Run a benchmark from benchmarks/; extra arguments go to it."""
    found: dict[str, Path] = {}
    for folder in reversed(_benchmark_dirs()):
        for path in folder.glob("*.py"):
            if not path.name.startswith("_"):
                found[path.stem] = path
    if list_all or name is None:
        for stem in sorted(found):
            typer.echo(stem)
        if name is None and not list_all:
            raise typer.Exit(2)
        return
    if name not in found:
        known = ", ".join(sorted(found)) or "none (run from the project checkout)"
        console.print(f"[red]unknown benchmark {name!r}[/red]; known: {known}")
        raise typer.Exit(2)
    path = found[name]
    sys.argv = [str(path), *ctx.args]
    sys.path.insert(0, str(path.parent))
    runpy.run_path(str(path), run_name="__main__")


def main() -> None:
    app()
