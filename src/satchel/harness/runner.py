"""A run: several games at once, each its own session and run folder; one failing game never
stops the others, and every game's records are written however it ends."""

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
from satchel.harness.play import GameResult, Limits, Player, Progress
from satchel.providers import Profile
from satchel.turns import ConfigurationError

log = logging.getLogger("satchel.harness")
FAILED_EXITS = frozenset({"API_ERROR", "AGENT_ERROR"})


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What to play, how, and where the records go."""

    profile: Profile
    games: tuple[str, ...]
    runs_dir: Path
    parallel: int = 1
    max_actions: int | None = None
    time_limit_s: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    http_client: Any = None  # an httpx.Client for the SDK (tests)

    def limits(self) -> Limits:
        agent = self.profile.agent
        return Limits(
            multiplier=agent.MAX_ACTIONS_BASELINE_MULTIPLIER,
            animation_frames=agent.MAX_ANIMATION_FRAMES,
            max_actions=self.max_actions,
            time_limit_s=self.time_limit_s,
        )

    def check(self) -> None:
        """`ConfigurationError` when the profile cannot make a session here (a key variable
        that is not set, a compaction the adapter cannot do), before any game starts."""
        build_session(self.profile, http_client=self.http_client, env=self.env)


@dataclass(frozen=True, slots=True)
class PlayedGame:
    """One game's result and the folder its records are in (None when none was written: the
    profile could not make a session)."""

    result: GameResult
    run_dir: Path | None


def failure_line(result: GameResult) -> str:
    """A failed game's reason as one line: `game: EXIT: error`."""
    reason = " ".join((result.error or "no reason was given").split())
    return f"{result.game_id}: {result.exit_reason}: {reason}"


def run_dir_name(game_id: str, profile_id: str, started: datetime) -> str:
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    return f"{game_id}.{profile_id}.{stamp}.{uuid.uuid4().hex[:6]}"


def run_games(
    plan: RunPlan,
    arena: Arena,
    *,
    stop: threading.Event | None = None,
    progress: Watcher | None = None,
) -> list[PlayedGame]:
    """Play every game of `plan` in `arena`, `plan.parallel` at a time, in the order given.

    `progress` is called with every game's progress about twice a second until the run ends;
    `stop` interrupts every game after its current action. The arena is not closed here.
    """
    stop = stop or threading.Event()
    boards = [Progress(game_id) for game_id in plan.games]
    done = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(
            target=_watch, args=(boards, progress, done), name="satchel-progress", daemon=True
        )
        watcher.start()
    try:
        with ThreadPoolExecutor(max(1, plan.parallel), thread_name_prefix="satchel-game") as pool:
            futures = [
                pool.submit(_play_one, plan, arena, game_id, board, stop)
                for game_id, board in zip(plan.games, boards, strict=True)
            ]
            return [future.result() for future in futures]
    finally:
        done.set()
        if watcher is not None and progress is not None:
            watcher.join()
            progress(boards)  # the last state, once every game ended


Watcher = Callable[[Sequence[Progress]], None]


def _watch(boards: Sequence[Progress], progress: Watcher, done: threading.Event) -> None:
    while not done.wait(0.5):
        progress(boards)


def _play_one(
    plan: RunPlan, arena: Arena, game_id: str, board: Progress, stop: threading.Event
) -> PlayedGame:
    started = datetime.now(UTC)
    run_dir = plan.runs_dir / run_dir_name(game_id, plan.profile.id, started)
    try:
        session = build_session(
            plan.profile, run_dir=run_dir, http_client=plan.http_client, env=plan.env
        )
    except ConfigurationError as exc:
        board.status = "AGENT_ERROR"
        return PlayedGame(_unplayed(game_id, "AGENT_ERROR", str(exc)), None)
    try:
        environment = arena.open(game_id)
        player = Player(
            session,
            environment,
            plan.limits(),
            carry_forward=plan.profile.runtime.strategy == "manual_rolling",
            frame_format=plan.profile.agent.FRAME_FORMAT,
            progress=board,
            stop=stop,
        )
        result = player.play()
    except ArenaError as exc:
        result = _unplayed(game_id, "API_ERROR", str(exc))
    except Exception as exc:  # one game's defect must not end the others
        log.exception("game %s failed", game_id)
        result = _unplayed(game_id, "AGENT_ERROR", f"{type(exc).__name__}: {exc}")
    board.status = result.exit_reason
    session.finish(
        result.exit_reason,
        run_id=run_dir.name,
        started_at=started,
        game=game_id,
        config_id=plan.profile.id,
        details=result.to_dict(),
    )
    return PlayedGame(result, run_dir)


def _unplayed(game_id: str, reason: str, error: str) -> GameResult:
    return GameResult(game_id, reason, 0, 0, 0, 0, None, error=error)
