"""The `satchel` command: thin wrappers that call the parts."""

from __future__ import annotations

import json
import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from satchel import __version__

if TYPE_CHECKING:
    from satchel.memory.config import MemorySettings

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
    """List every registered provider adapter with its descriptor and its example profiles
    (`satchel run --config <id>`)."""
    from satchel.providers import REGISTRY, example_profiles

    descriptors = list(REGISTRY)
    examples: dict[str, list[str]] = {}
    for profile in example_profiles().values():
        examples.setdefault(profile.runtime.adapter, []).append(profile.id)
    if as_json:
        for descriptor in descriptors:
            listed = examples.get(descriptor.adapter_id, [])
            typer.echo(json.dumps({**descriptor.to_dict(), "example_profiles": listed}))
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
        table.add_row("example profiles", ", ".join(examples.get(d.adapter_id, [])) or "none")
        console.print(f"[bold]{d.adapter_id}[/bold]", soft_wrap=True)
        console.print(table, "")


@app.command(name="run")
def run_games(
    config: Annotated[
        str | None, typer.Option("--config", help="The profile id to play with.")
    ] = None,
    game: Annotated[
        list[str] | None, typer.Option("--game", help="A game id; repeat for several.")
    ] = None,
    profiles: Annotated[
        list[Path] | None,
        typer.Option("--profiles", help="A profile file (YAML) besides the examples; repeatable."),
    ] = None,
    parallel: Annotated[int, typer.Option("--parallel", help="Games played at once.")] = 1,
    offline: Annotated[
        bool | None,
        typer.Option(
            "--offline/--online",
            help="Local games, or the ARC API (default: online when ARC_API_KEY is set).",
        ),
    ] = None,
    runs_dir: Annotated[
        Path, typer.Option("--runs-dir", help="Where each game's run folder is written.")
    ] = Path("runs"),
    tags: Annotated[
        list[str] | None, typer.Option("--tags", help="A scorecard tag (online); repeatable.")
    ] = None,
    max_actions: Annotated[
        int | None, typer.Option("--max-actions", help="At most this many actions a game.")
    ] = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Seconds a game may take.")
    ] = None,
    environments_dir: Annotated[
        Path | None,
        typer.Option("--environments-dir", help="Local games to play (default: satchel's own)."),
    ] = None,
    list_games: Annotated[bool, typer.Option("--list-games", help="List the local games.")] = False,
    list_configs: Annotated[
        bool, typer.Option("--list-configs", help="List the profiles.")
    ] = False,
) -> None:
    """Play ARC-AGI-3 games with a model profile and write a run folder per game."""
    from satchel.harness.command import (
        RunOptions,
        UsageProblem,
        configs_table,
        games_table,
        run,
    )
    from satchel.harness.environments import ArenaError
    from satchel.turns import ConfigurationError

    options = RunOptions(
        config=config,
        games=tuple(game or ()),
        profiles=tuple(profiles or ()),
        parallel=parallel,
        offline=offline,
        runs_dir=runs_dir,
        tags=tuple(tags or ()),
        max_actions=max_actions,
        time_limit_s=time_limit,
        environments_dir=environments_dir,
    )
    errors = Console(stderr=True)
    try:
        if list_games or list_configs:
            for table in [games_table(options)] * list_games + [
                configs_table(options)
            ] * list_configs:
                console.print(table)
            return
        code = run(options, console)
    except (UsageProblem, ConfigurationError) as exc:
        errors.print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None
    except ArenaError as exc:
        errors.print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command(name="model-server")
def model_server(
    script: Annotated[
        Path | None, typer.Argument(help="The replies to serve (YAML or JSON).")
    ] = None,
    game: Annotated[
        list[str] | None,
        typer.Option("--game", help="Serve the shipped replies that win this game; repeatable."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
) -> None:
    """Serve a scripted OpenAI-compatible model on loopback, for offline runs and demos."""
    from satchel.harness.script import ScriptError, load_script, winning_script
    from satchel.harness.scripted import serve_forever

    try:
        replies = dict(load_script(script)) if script is not None else {}
        replies.update(winning_script(game or ()))
    except ScriptError as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None
    if not replies:
        Console(stderr=True).print("[red]give a script file or --game[/red]")
        raise typer.Exit(2)
    try:
        serve_forever(replies, host, port, announce=lambda url: console.print(f"serving on {url}"))
    except OSError as exc:
        Console(stderr=True).print(f"[red]cannot listen on {host}:{port}: {exc.strerror}[/red]")
        raise typer.Exit(1) from None


tokens_app = typer.Typer(help="Create, list and revoke bearer tokens of the memory deployment.")
app.add_typer(tokens_app, name="tokens")

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Where the embedded database lives (default: SATCHEL_DATA_DIR or "
        "~/.local/share/satchel). Ignored when SATCHEL_DATABASE_URL is set.",
    ),
]


def _memory_settings(data_dir: Path | None) -> MemorySettings:
    from satchel.memory.config import MemorySettings, SettingError

    try:
        return MemorySettings.from_env(data_dir=data_dir)
    except SettingError as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    data_dir: DataDir = None,
    role: Annotated[
        str,
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
    """Serve the memory deployment (embedded PostgreSQL unless SATCHEL_DATABASE_URL is set);
    SIGINT or SIGTERM stops it, its worker and its embedded PostgreSQL."""
    errors = Console(stderr=True)
    if role not in ("all", "api", "worker"):
        errors.print(f"[red]--role must be all, api or worker, not {role!r}[/red]")
        raise typer.Exit(2)
    from satchel.memory.threads import one_thread_each

    one_thread_each()
    from satchel.memory.formation.model import HostNotAllowed
    from satchel.memory.server import ServeError, work
    from satchel.memory.server import serve as run
    from satchel.memory.store.embedded import EmbeddedBusy

    try:
        settings = _memory_settings(data_dir)
        if role == "worker":
            work(settings, announce=console.print)
        else:
            run(
                settings,
                host,
                port,
                announce=console.print,
                with_worker=role == "all",
                access_log=access_log,
            )
    except HostNotAllowed as exc:
        errors.print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None
    except (ServeError, EmbeddedBusy) as exc:
        errors.print(str(exc), style="red", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1) from None


@app.command()
def worker(data_dir: DataDir = None) -> None:
    """Form stored turns: facts, segments and passages (stops on Ctrl-C or SIGTERM)."""
    from satchel.memory.formation.model import HostNotAllowed
    from satchel.memory.server import work

    try:
        work(_memory_settings(data_dir), announce=console.print)
    except HostNotAllowed as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from None


formation_app = typer.Typer(help="Operate the formation of stored turns.")
app.add_typer(formation_app, name="formation")


@contextmanager
def _deployment(settings: MemorySettings) -> Iterator[str]:
    """The deployment's database for a manage command, or exit 2 saying none is there."""
    from satchel.memory.server import NoDeployment, deployment

    try:
        with deployment(settings) as url:
            yield url
    except NoDeployment as exc:
        Console(stderr=True).print(
            str(exc), style="red", highlight=False, markup=False, soft_wrap=True
        )
        raise typer.Exit(2) from None


@formation_app.command("unpark")
def formation_unpark(
    project: Annotated[str | None, typer.Option(help="Only this project.")] = None,
    data_dir: DataDir = None,
) -> None:
    """Put parked turns (those that failed formation 6 times) back in line for the worker."""
    from satchel.memory.server import unpark

    with _deployment(_memory_settings(data_dir)) as url:
        count = unpark(url, project)
    console.print(f"unparked {count} turn(s)")


@tokens_app.command("create")
def tokens_create(
    project: Annotated[str, typer.Option(help="The project the token opens.")],
    read_only: Annotated[bool, typer.Option("--read-only", help="Reads only.")] = False,
    name: Annotated[str, typer.Option(help="A label for the token.")] = "",
    data_dir: DataDir = None,
) -> None:
    """Create a token and print it once (only its digest is stored); stderr says which
    database holds it."""
    from satchel.memory.server import where
    from satchel.memory.tokens import create_token

    errors = Console(stderr=True)
    settings = _memory_settings(data_dir)
    with _deployment(settings) as url:
        try:
            token = create_token(url, project, read_only=read_only, name=name)
        except ValueError as exc:
            errors.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from None
    typer.echo(token)
    errors.print(
        f"token for project {project!r} written to {where(settings)}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@tokens_app.command("list")
def tokens_list(
    project: Annotated[str | None, typer.Option(help="Only this project.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per token.")] = False,
    data_dir: DataDir = None,
) -> None:
    """List tokens by prefix (the tokens themselves are never stored)."""
    from satchel.memory.tokens import list_tokens

    with _deployment(_memory_settings(data_dir)) as url:
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
    table = Table()
    for column in ("project", "prefix", "access", "name", "created", "revoked", "id"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.project,
            row.prefix,
            row.access,
            row.name,
            row.created_at.isoformat(timespec="seconds"),
            row.revoked_at.isoformat(timespec="seconds") if row.revoked_at else "",
            str(row.id),
        )
    console.print(table)


@tokens_app.command("revoke")
def tokens_revoke(
    token: Annotated[str, typer.Argument(help="The token, its id, or its 12-character prefix.")],
    data_dir: DataDir = None,
) -> None:
    """Revoke a token at once."""
    from satchel.memory.tokens import revoke_token

    with _deployment(_memory_settings(data_dir)) as url:
        count = revoke_token(url, token)
    if not count:
        console.print("[red]no active token matches[/red]")
        raise typer.Exit(1)
    console.print(f"revoked {count} token(s)")


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


@app.command()
def conformance(
    driver: Annotated[
        str | None,
        typer.Option(help="A shipped driver's name, or the command line of any other driver."),
    ] = None,
    cases: Annotated[
        Path | None,
        typer.Option(help="A case file (default: the published cases, then satchel's)."),
    ] = None,
    api: Annotated[
        str | None,
        typer.Option(help="A running deployment (default: start one of our own)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="SATCHEL_TOKEN", help="The token for --api (env SATCHEL_TOKEN)."),
    ] = None,
    list_drivers: Annotated[
        bool, typer.Option("--list-drivers", help="List the shipped drivers.")
    ] = False,
) -> None:
    """Run the conformance suite against a driver: one JSON line per case on stdout."""
    from satchel.conformance.cases import CasesError, load_cases
    from satchel.conformance.deployment import started
    from satchel.conformance.drivers import SHIPPED, driver_command
    from satchel.conformance.runner import CaseResult, check_api, check_driver, run_suite

    errors = Console(stderr=True)
    if list_drivers:
        for shipped in SHIPPED:
            typer.echo(f"{shipped.name}\t{shipped.about}")
        return
    if not driver:
        errors.print("[red]--driver is required: a shipped driver's name or a command line[/red]")
        raise typer.Exit(2)
    if api and not token:
        errors.print("[red]--api needs a token: pass --token or set SATCHEL_TOKEN[/red]")
        raise typer.Exit(2)
    try:
        command = driver_command(driver)
        check_driver(driver, command)
        chosen = load_cases(cases)
        if api and token:
            check_api(api, token)
    except (CasesError, ValueError) as exc:
        errors.print(str(exc), style="red", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(2) from None

    def show(result: CaseResult) -> None:
        typer.echo(json.dumps(result.as_dict()))
        mark = "[green]pass[/green]" if result.passed else "[red]FAIL[/red]"
        errors.print(f"{mark} {result.case}", highlight=False)
        for failure in result.failures:
            errors.print(f"     {failure}", highlight=False, markup=False)

    if api and token:
        results = run_suite(command, chosen, api=api, token=token, on_result=show)
    else:
        with started() as deployment:
            results = run_suite(
                command, chosen, api=deployment.api, token=deployment.token, on_result=show
            )
    failed = [r.case for r in results if not r.passed]
    style = "red" if failed else "green"
    errors.print(f"[{style}]{len(results) - len(failed)} of {len(results)} case(s) passed[/]")
    if failed:
        errors.print("failed: " + ", ".join(failed), highlight=False, markup=False)
        raise typer.Exit(1)


def main() -> None:
    app()
