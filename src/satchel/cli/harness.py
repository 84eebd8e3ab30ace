"""`satchel run` and `satchel model-server`: the ARC-AGI-3 harness and its scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from satchel.cli.extras import require
from satchel.cli.output import console, fail
from satchel.cli.tables import fitted

RUN_USAGE = "--config PROFILE --game GAME [OPTIONS]"
"""The usage line of `satchel run`: a profile and a game are required unless listing."""

UNLESS_LISTING = "required unless --list-games or --list-configs"


def run_games(
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            metavar="PROFILE",
            help=f"A profile id to play with; repeat for several ({UNLESS_LISTING}).",
        ),
    ] = None,
    game: Annotated[
        list[str] | None,
        typer.Option(
            "--game", metavar="GAME", help=f"A game id; repeat for several ({UNLESS_LISTING})."
        ),
    ] = None,
    profiles: Annotated[
        list[Path] | None,
        typer.Option(
            "--profiles",
            metavar="FILE",
            help="A profile file (YAML) besides the examples; repeatable.",
        ),
    ] = None,
    parallel: Annotated[
        int, typer.Option("--parallel", metavar="N", help="Games played at once.")
    ] = 1,
    offline: Annotated[
        bool | None,
        typer.Option(
            "--offline/--online",
            help="Local games, or the ARC API (default: online when ARC_API_KEY is set).",
        ),
    ] = None,
    runs_dir: Annotated[
        Path,
        typer.Option("--runs-dir", metavar="DIR", help="Where each game's run folder is written."),
    ] = Path("runs"),
    tags: Annotated[
        list[str] | None,
        typer.Option("--tags", metavar="TAG", help="A scorecard tag (online); repeatable."),
    ] = None,
    max_actions: Annotated[
        int | None,
        typer.Option("--max-actions", metavar="N", help="At most this many actions a game."),
    ] = None,
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", metavar="SECONDS", help="Seconds a game may take."),
    ] = None,
    environments_dir: Annotated[
        Path | None,
        typer.Option(
            "--environments-dir",
            metavar="DIR",
            help="Local games to play (default: satchel's own).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Play only the pairs of the runs directory's sweep that have no ending yet.",
        ),
    ] = False,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            metavar="URL",
            help="A memory deployment: recall lessons when a game starts, store one when it "
            "ends (token in SATCHEL_MEMORY_TOKEN).",
        ),
    ] = None,
    list_games: Annotated[bool, typer.Option("--list-games", help="List the local games.")] = False,
    list_configs: Annotated[
        bool, typer.Option("--list-configs", help="List the profiles.")
    ] = False,
) -> None:
    """Play ARC-AGI-3 games with model profiles and write a run folder per config and game."""
    if list_games or not list_configs:
        require("harness", "run")
    missing = [
        flag for flag, given in (("--config PROFILE", config), ("--game GAME", game)) if not given
    ]
    if missing and not (list_games or list_configs):
        fail(f"satchel run needs {' and '.join(missing)} (see --list-configs, --list-games)", 2)
    from satchel.harness.command import RunOptions, UsageProblem, run
    from satchel.harness.environments import ArenaError
    from satchel.harness.listings import configs_table, games_table
    from satchel.turns import ConfigurationError

    options = RunOptions(
        configs=tuple(config or ()),
        games=tuple(game or ()),
        profiles=tuple(profiles or ()),
        parallel=parallel,
        offline=offline,
        runs_dir=runs_dir,
        tags=tuple(tags or ()),
        max_actions=max_actions,
        time_limit_s=time_limit,
        environments_dir=environments_dir,
        resume=resume,
        memory=memory,
    )
    try:
        if list_games or list_configs:
            for table in [games_table(options)] * list_games + [
                configs_table(options)
            ] * list_configs:
                console.print(fitted(table, console))
            return
        code = run(options, console)
    except (UsageProblem, ConfigurationError) as exc:
        fail(str(exc), 2)
    except ArenaError as exc:
        fail(str(exc), 1)
    raise typer.Exit(code)


def model_server(
    script: Annotated[
        Path | None, typer.Argument(help="The replies to serve (YAML or JSON).")
    ] = None,
    game: Annotated[
        list[str] | None,
        typer.Option(
            "--game",
            metavar="GAME",
            help="Serve the shipped replies that win this game; repeatable.",
        ),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Address to listen on.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="Port to listen on.")] = 8000,
) -> None:
    """Serve a scripted OpenAI-compatible model on loopback, for offline runs and demos."""
    from satchel.harness.script import ScriptError, load_script, winning_script
    from satchel.harness.scripted import serve_forever

    try:
        replies = dict(load_script(script)) if script is not None else {}
        replies.update(winning_script(game or ()))
    except ScriptError as exc:
        fail(str(exc), 2)
    if not replies:
        fail("give a script file or --game", 2)
    try:
        stopped_by = serve_forever(
            replies, host, port, announce=lambda url: console.print(f"serving on {url}")
        )
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror}", 1)
    console.print(f"stopped ({stopped_by})")
