"""A run: every config x game pair, several at once, each its own session and run folder; one
failing pair never stops the others, and every game's records are written however it ends."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from satchel.harness.environments import Arena, ArenaError
from satchel.harness.factory import build_session
from satchel.harness.lessons import check_lessons
from satchel.harness.memory_games import GameMemory, MemoryTarget
from satchel.harness.play import GameResult, Limits, Player, Progress
from satchel.harness.sweep import Pair, Sweep
from satchel.memory.client import MemoryClient
from satchel.providers import Profile
from satchel.turns import ConfigurationError

log = logging.getLogger("satchel.harness")
FAILED_EXITS = frozenset({"API_ERROR", "AGENT_ERROR"})


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What to play (every profile with every game), how, and where the records go."""

    profiles: tuple[Profile, ...]
    games: tuple[str, ...]
    runs_dir: Path
    parallel: int = 1
    max_actions: int | None = None
    time_limit_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    http_client: Any = None  # an httpx.Client for the SDK (tests)
    memory: MemoryTarget | None = None

    def limits(self, profile: Profile) -> Limits:
        agent = profile.agent
        return Limits(
            multiplier=agent.MAX_ACTIONS_BASELINE_MULTIPLIER,
            animation_frames=agent.MAX_ANIMATION_FRAMES,
            max_actions=self.max_actions,
            time_limit_s=self.time_limit_s,
        )

    def check(self) -> None:
        """`ConfigurationError` when a profile cannot make a session here (a key variable
        that is not set, a compaction the adapter cannot do, an adapter that cannot be asked for a
        lesson with `memory`), before any game starts."""
        for profile in self.profiles:
            session = build_session(profile, http_client=self.http_client, env=self.env)
            if self.memory is not None:
                check_lessons(session, profile.id)

    def sweep(self, *, resume: bool) -> Sweep:
        """The sweep manifest of `runs_dir` for these profiles and games (`Sweep.for_command`)."""
        configs = [profile.id for profile in self.profiles]
        return Sweep.for_command(self.runs_dir, configs, self.games, resume=resume)


@dataclass(frozen=True, slots=True)
class PlayedGame:
    """One game's result, its profile's id, the folder its records are in (None when none
    was written: the profile could not make a session), and its memory's `problems` and `lost`
    (see `GameMemory`)."""

    result: GameResult
    run_dir: Path | None
    config: str = ""
    memory_problems: tuple[str, ...] = ()
    lesson_lost: bool = False


def failure_line(result: GameResult) -> str:
    """A failed game's reason as one line: `game: EXIT: error`."""
    reason = " ".join((result.error or "no reason was given").split())
    return f"{result.game_id}: {result.exit_reason}: {reason}"


def run_dir_name(game_id: str, profile_id: str, started: datetime) -> str:
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    return f"{game_id}.{profile_id}.{stamp}.{uuid.uuid4().hex[:6]}"


def run_games(
    plan: RunPlan,
    arenas: Mapping[str, Arena],
    *,
    sweep: Sweep | None = None,
    stop: threading.Event | None = None,
    progress: Watcher | None = None,
) -> list[PlayedGame]:
    """Play every profile of `plan` with every game (only the pairs of `sweep` without an
    ending, recording their progress there, when given), `plan.parallel` at a time, in order,
    each in its profile's arena (`arenas`, by profile id).

    `progress` is called with every game's progress about twice a second until the run ends;
    `stop` interrupts every game after its current action, and a pair not started by then is
    left pending (it is not in the list). The arenas are not closed here. With `plan.memory`,
    each game recalls before its first frame and stores its lesson after its end.
    """
    stop = stop or threading.Event()
    profiles = {profile.id: profile for profile in plan.profiles}
    if sweep is not None:
        pairs = sweep.to_play()
    else:
        pairs = [Pair(profile.id, game) for profile in plan.profiles for game in plan.games]
    boards = [Progress(pair.game, config=pair.config) for pair in pairs]
    done = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(
            target=_watch, args=(boards, progress, done), name="satchel-progress", daemon=True
        )
        watcher.start()
    memory = plan.memory.client() if plan.memory is not None else None
    try:
        with ThreadPoolExecutor(max(1, plan.parallel), thread_name_prefix="satchel-game") as pool:
            futures = [
                pool.submit(
                    _play_one,
                    plan,
                    Playing(profiles[pair.config], arenas[pair.config], pair, board, sweep, memory),
                    stop,
                )
                for pair, board in zip(pairs, boards, strict=True)
            ]
            played = [future.result() for future in futures]
            return [game for game in played if game is not None]
    finally:
        if memory is not None:
            memory.close()
        done.set()
        if watcher is not None and progress is not None:
            watcher.join()
            progress(boards)  # the last state, once every game ended


Watcher = Callable[[Sequence[Progress]], None]


@dataclass(frozen=True, slots=True)
class Playing:
    """One pair to play: its profile, its arena, its progress board, the sweep it is in and the
    memory deployment's client (`--memory`)."""

    profile: Profile
    arena: Arena
    pair: Pair
    board: Progress
    sweep: Sweep | None
    memory: MemoryClient | None = None


def _watch(boards: Sequence[Progress], progress: Watcher, done: threading.Event) -> None:
    while not done.wait(0.5):
        progress(boards)


def _play_one(plan: RunPlan, playing: Playing, stop: threading.Event) -> PlayedGame | None:
    profile, pair, board, sweep = playing.profile, playing.pair, playing.board, playing.sweep
    if stop.is_set():
        board.status = "pending"
        return None
    started = datetime.now(UTC)
    run_dir = plan.runs_dir / run_dir_name(pair.game, profile.id, started)
    if sweep is not None:
        sweep.started(pair, run_dir)
    try:
        session = build_session(
            profile, run_dir=run_dir, http_client=plan.http_client, env=plan.env
        )
    except ConfigurationError as exc:
        board.status = "AGENT_ERROR"
        if sweep is not None:
            sweep.ended(pair, "AGENT_ERROR", written=False)
        return PlayedGame(_unplayed(pair.game, "AGENT_ERROR", str(exc)), None, profile.id)
    memory = None
    if playing.memory is not None:
        memory = GameMemory(playing.memory, profile.id, run_dir.name)
    try:
        environment = playing.arena.open(pair.game)
        opening = memory.opening(environment.info) if memory is not None else ()
        player = Player(
            session,
            environment,
            plan.limits(profile),
            carry_forward=profile.runtime.strategy == "manual_rolling",
            frame_format=profile.agent.FRAME_FORMAT,
            opening=opening,
            progress=board,
            stop=stop,
        )
        result = player.play()
    except ArenaError as exc:
        result = _unplayed(pair.game, "API_ERROR", str(exc))
    except Exception as exc:  # one game's defect must not end the others
        log.exception("game %s failed", pair.game)
        result = _unplayed(pair.game, "AGENT_ERROR", f"{type(exc).__name__}: {exc}")
    details = {**result.to_dict(), "frame_format": profile.agent.FRAME_FORMAT}
    if memory is not None:
        try:
            memory.closing(session, result)
        except Exception as exc:  # the game's result stands whatever its lesson meets
            log.exception("the lesson of %s failed", pair.game)
            memory.problems.append(f"{pair.game}: no lesson: {type(exc).__name__}: {exc}")
            memory.lost = True
        details["memory"] = memory.record
        board.count(session)  # the lesson request included
    board.status = result.exit_reason
    session.finish(
        result.exit_reason,
        run_id=run_dir.name,
        started_at=started,
        game=pair.game,
        config_id=profile.id,
        details=details,
    )
    if sweep is not None:
        sweep.ended(pair, result.exit_reason)
    if memory is None:
        return PlayedGame(result, run_dir, profile.id)
    return PlayedGame(result, run_dir, profile.id, tuple(memory.problems), memory.lost)


def _unplayed(game_id: str, reason: str, error: str) -> GameResult:
    return GameResult(game_id, reason, 0, 0, 0, 0, None, error=error)
