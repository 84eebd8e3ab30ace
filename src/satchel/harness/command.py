"""`satchel run`: find the profiles and the games, play every pair with a live display and a
sweep manifest, summarize."""

from __future__ import annotations

import difflib
import os
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.live import Live
from rich.text import Text

from satchel.harness.display import progress_table, summary_table
from satchel.harness.environments import Arena, ArenaError
from satchel.harness.memory_games import TOKEN_ENV, MemoryTarget
from satchel.harness.runner import FAILED_EXITS, RunPlan, failure_line, run_games
from satchel.harness.sweep import SweepRefused
from satchel.providers import Profile, example_profiles, load_profiles

TAG = "satchel"
INTERRUPTED = 130  # the shell's exit code for a run stopped by SIGINT


class UsageProblem(ValueError):
    """The command line asks for something that cannot be run (exit code 2)."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The options of `satchel run`, as given."""

    configs: tuple[str, ...]
    games: tuple[str, ...]
    profiles: tuple[Path, ...] = ()
    parallel: int = 1
    offline: bool | None = None  # None: offline unless ARC_API_KEY is set
    runs_dir: Path = Path("runs")
    tags: tuple[str, ...] = ()
    max_actions: int | None = None
    time_limit_s: float | None = None
    environments_dir: Path | None = None
    resume: bool = False
    memory: str | None = None  # the memory deployment's URL (`--memory`)


def profiles_of(paths: Sequence[Path]) -> dict[str, Profile]:
    """The example profiles, then every given file's (a later id replaces an earlier one)."""
    found = example_profiles()
    for path in paths:
        found.update(load_profiles(path))
    return found


def arena_for(options: RunOptions, profile_id: str, env: Mapping[str, str]) -> Arena:
    key = env.get("ARC_API_KEY", "")
    online = not options.offline if options.offline is not None else bool(key)
    return Arena(
        online=online,
        environments_dir=options.environments_dir,
        api_key=key,
        base_url=env.get("ARC_BASE_URL") or None,
        tags=[TAG, profile_id, *options.tags],
        recordings_dir=options.runs_dir / "recordings",
    )


def run(
    options: RunOptions,
    console: Console,
    env: Mapping[str, str] | None = None,
    errors: Console | None = None,
) -> int:
    """Play every config with every game (with `resume`, only the pairs of the runs directory's
    sweep without an ending); the exit code is 1 when a pair of the sweep ended in API_ERROR or
    AGENT_ERROR, a game's lesson was not stored in memory (`memory`), or a scorecard would not
    close, 130 when the run was interrupted. Each failed game's reason, and each memory problem,
    is one line on `errors` (stderr by default).

    Everything a run needs is checked before any game starts and before anything is written
    (`UsageProblem` or `ConfigurationError`): the options, the profiles and their keys, the
    sweep manifest, the ARC key online, the local games offline.
    """
    env = os.environ if env is None else env
    errors = errors or Console(stderr=True)
    _check_options(options, env)
    profiles = _profiles(options)
    plan = RunPlan(
        profiles=profiles,
        games=options.games,
        runs_dir=options.runs_dir,
        parallel=options.parallel,
        max_actions=options.max_actions,
        time_limit_s=options.time_limit_s,
        env=env,
        memory=MemoryTarget(options.memory, env[TOKEN_ENV]) if options.memory else None,
    )
    plan.check()
    try:
        sweep = plan.sweep(resume=options.resume)
    except SweepRefused as exc:
        raise UsageProblem(str(exc)) from None
    kept = len(sweep.pairs) - len(sweep.to_play())
    arenas: dict[str, Arena] = {}
    stop = threading.Event()
    try:
        for profile in profiles:
            arenas[profile.id] = arena_for(options, profile.id, env)
        arena = arenas[profiles[0].id]
        if not arena.online:
            _check_local_games(arena, options.games)
        sweep.open()
        with _interrupts(stop, console), Live(console=console, transient=False) as live:
            played = run_games(
                plan,
                arenas,
                sweep=sweep,
                stop=stop,
                progress=lambda boards: live.update(progress_table(boards)),
            )
    finally:
        closed = all([_closed(opened, errors) for opened in arenas.values()])
    console.print()
    console.print(summary_table(played, console.width), crop=False)
    if kept:
        console.print(f"{kept} pair(s) that had ended are kept, as {sweep.path} lists them")
    for game in played:
        if game.result.exit_reason in FAILED_EXITS:
            errors.print(Text(failure_line(game.result), style="red"), soft_wrap=True)
        for problem in game.memory_problems:
            errors.print(Text(problem, style="yellow"), soft_wrap=True)
    if stop.is_set():
        return INTERRUPTED
    failed = any(reason in FAILED_EXITS for reason in sweep.exits())
    lost = any(game.lesson_lost for game in played)
    return 1 if failed or lost or not closed else 0


def _check_options(options: RunOptions, env: Mapping[str, str]) -> None:
    if not options.configs:
        raise UsageProblem("name a profile with --config (see --list-configs)")
    if not options.games:
        raise UsageProblem("name at least one game with --game (see --list-games)")
    for flag, values in (("--config", options.configs), ("--game", options.games)):
        twice = next((value for value in values if values.count(value) > 1), None)
        if twice is not None:
            raise UsageProblem(f"{flag} {twice!r} is given twice; name each once")
    if options.parallel < 1:
        raise UsageProblem(f"--parallel must be at least 1 (got {options.parallel})")
    if options.max_actions is not None and options.max_actions < 1:
        raise UsageProblem(f"--max-actions must be at least 1 (got {options.max_actions})")
    if options.time_limit_s is not None and not options.time_limit_s > 0:
        raise UsageProblem(
            f"--time-limit must be more than 0 seconds (got {options.time_limit_s:g})"
        )
    if options.memory is not None:
        if not options.memory.startswith(("http://", "https://")):
            raise UsageProblem(
                f"--memory must be the deployment's http:// or https:// address (got "
                f"{options.memory!r})"
            )
        if not env.get(TOKEN_ENV, "").strip():
            raise UsageProblem(
                f"--memory needs the deployment's token in {TOKEN_ENV}; set it (satchel tokens "
                "create makes one), or run without --memory"
            )
    if options.offline is False and not env.get("ARC_API_KEY"):
        raise UsageProblem(
            "--online needs the ARC API key in ARC_API_KEY; set it, or play local games with "
            "--offline"
        )


def _check_local_games(arena: Arena, games: Sequence[str]) -> None:
    """Refuse a game that is not among the local ones, naming them (or the closest)."""
    known = [info.game_id for info in arena.games()]
    for game_id in games:
        if game_id in known:
            continue
        close = difflib.get_close_matches(game_id, known, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise UsageProblem(
            f"no local game {game_id!r} ({guess}local games: {', '.join(known) or 'none'})"
        )


def _closed(arena: Arena, errors: Console) -> bool:
    """Close the arena; a scorecard the API would not close is reported on `errors`, not raised."""
    try:
        arena.close()
    except ArenaError as exc:
        errors.print(Text(str(exc), style="red"), soft_wrap=True)
        return False
    return True


def _profiles(options: RunOptions) -> tuple[Profile, ...]:
    """The profiles `--config` names, in the order given."""
    profiles = profiles_of(options.profiles)
    for config in options.configs:
        if config not in profiles:
            known = ", ".join(sorted(profiles))
            raise UsageProblem(f"no profile {config!r} (known: {known})")
    return tuple(profiles[config] for config in options.configs)


@contextmanager
def _interrupts(stop: threading.Event, console: Console) -> Iterator[None]:
    """SIGINT or SIGTERM stops every game after its current action (a model call in flight is
    let finish), and each is recorded as INTERRUPTED."""

    def noted(signum: int, frame: FrameType | None) -> None:
        if not stop.is_set():
            console.print("[yellow]stopping after the current actions...[/yellow]")
        stop.set()

    previous = {s: signal.signal(s, noted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
