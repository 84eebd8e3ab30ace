"""`satchel bench NAME`: run a benchmark script of the repository's `benchmarks/` folder.

The benchmarks measure the code of a clone (they reach into satchel's internals and need the dev
tools), so they are not part of the installed package: they are found in the working directory's
`benchmarks/` or in the source tree this package was installed from.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Annotated

import typer

from satchel.cli.output import fail

SOURCE_TREE = Path(__file__).resolve().parents[3]
"""The repository this package runs from when it is a checkout (an editable install)."""

NO_BENCHMARKS = (
    "no benchmarks/ folder here: the benchmarks run from a clone of the satchel repository, "
    "not from an installed package; in the clone, run `bash scripts/bootstrap`, then "
    "`.venv/bin/satchel bench --list`"
)


def _benchmark_dirs() -> list[Path]:
    return [Path.cwd() / "benchmarks", SOURCE_TREE / "benchmarks"]


def bench(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Benchmark name (benchmarks/NAME.py).")] = None,
    list_all: Annotated[bool, typer.Option("--list", help="List the benchmarks.")] = False,
) -> None:
    """Run a benchmark from benchmarks/ (in a clone of the repository); extra arguments go to it."""
    found: dict[str, Path] = {}
    for folder in reversed(_benchmark_dirs()):
        for path in folder.glob("*.py"):
            if not path.name.startswith("_"):
                found[path.stem] = path
    if not found:
        fail(NO_BENCHMARKS, 2)
    if list_all or name is None:
        for stem in sorted(found):
            typer.echo(stem)
        if name is None and not list_all:
            raise typer.Exit(2)
        return
    if name not in found:
        fail(f"unknown benchmark {name!r}; known: {', '.join(sorted(found))}", 2)
    path = found[name]
    sys.argv = [str(path), *ctx.args]
    sys.path.insert(0, str(path.parent))
    runpy.run_path(str(path), run_name="__main__")
