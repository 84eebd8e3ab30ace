"""Games through the official toolkit: local games OFFLINE, the public API ONLINE under a scorecard.

Everything the harness sees of a game is an `Observation`; everything it asks of one is an
`Action`. The toolkit (`arc-agi`, `arcengine`) is imported only here, and only when a run starts
(it is the `harness` extra).
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from satchel.harness.actions import Action
from satchel.harness.frames import Observation
from satchel.harness.games import GAMES_DIR

if TYPE_CHECKING:
    from arc_agi import Arcade
    from arc_agi.wrapper import EnvironmentWrapper
    from arcengine import FrameDataRaw

log = logging.getLogger("satchel.harness")
INSTALL = "pip install 'satchel[harness]'"


class ArenaError(RuntimeError):
    """The game or the ARC API could not answer (ends the game with `API_ERROR`)."""


@dataclass(frozen=True, slots=True)
class GameInfo:
    """A game the toolkit found: its id, title, tags and per-level baseline actions."""

    game_id: str
    title: str
    tags: tuple[str, ...]
    baseline_actions: tuple[int, ...]


class Environment:
    """One game being played: `reset()` and `step()` answer observations."""

    def __init__(self, wrapper: EnvironmentWrapper, info: GameInfo) -> None:
        self.wrapper = wrapper
        self.info = info

    def start(self) -> Observation:
        """The game's first observation: the toolkit resets a game when it makes it."""
        first = self.wrapper.observation_space
        return observation(first) if first is not None and first.frame else self.reset()

    def reset(self) -> Observation:
        return self._observed(self.wrapper.reset(), "RESET")

    def step(self, action: Action, reasoning: dict[str, Any]) -> Observation:
        from arcengine import GameAction

        if action.name == "RESET":
            return self.reset()
        data = {"x": action.x, "y": action.y} if action.x is not None else None
        answer = self.wrapper.step(GameAction[action.name], data=data, reasoning=reasoning)
        return self._observed(answer, action.name)

    def _observed(self, frame: FrameDataRaw | None, asked: str) -> Observation:
        if frame is None:
            raise ArenaError(f"{self.info.game_id} did not answer {asked}")
        return observation(frame)


def observation(frame: FrameDataRaw) -> Observation:
    """The toolkit's frame data as an `Observation`."""
    grids = tuple(tuple(map(tuple, grid.tolist())) for grid in frame.frame)
    return Observation(
        game_id=frame.game_id,
        state=frame.state.name,
        levels_completed=frame.levels_completed,
        win_levels=frame.win_levels,
        available_actions=tuple(frame.available_actions),
        grids=grids,
    )


class Arena:
    """Where games come from: local games (OFFLINE; satchel's own unless `environments_dir`
    names another folder) or the ARC API (ONLINE, with a key), under one scorecard opened with
    `tags` and closed exactly once by `close()`."""

    def __init__(
        self,
        *,
        online: bool,
        environments_dir: Path | None = None,
        api_key: str = "",
        base_url: str | None = None,
        tags: Sequence[str] = (),
        recordings_dir: Path | None = None,
    ) -> None:
        try:
            from arc_agi import Arcade, OperationMode
        except ImportError:
            raise ArenaError(f"the ARC-AGI-3 toolkit is not installed ({INSTALL})") from None
        logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)  # it prints to stdout
        self._no_games = tempfile.TemporaryDirectory(prefix="satchel-online-") if online else None
        local = environments_dir or (Path(self._no_games.name) if self._no_games else GAMES_DIR)
        settings: dict[str, Any] = {
            "operation_mode": OperationMode.ONLINE if online else OperationMode.OFFLINE,
            "environments_dir": str(local),
            "logger": _toolkit_log(),
        }
        if recordings_dir is not None:
            settings["recordings_dir"] = str(recordings_dir)
        if online:
            if not api_key:
                raise ArenaError("ONLINE play needs ARC_API_KEY")
            settings["arc_api_key"] = api_key
            if base_url:
                settings["arc_base_url"] = base_url
        self.online = online
        self._lock = threading.Lock()
        self._closed = False
        self.scorecard: str | None = None
        with _answered(f"the ARC API at {base_url or 'https://three.arcprize.org'}"):
            self.arcade: Arcade = Arcade(**settings)
            if online:
                self.scorecard = self.arcade.open_scorecard(tags=list(tags))

    def games(self) -> list[GameInfo]:
        """The games available, by id."""
        found = {
            env.game_id: GameInfo(
                game_id=env.game_id,
                title=env.title or env.game_id,
                tags=tuple(env.tags or ()),
                baseline_actions=tuple(env.baseline_actions or ()),
            )
            for env in self.arcade.get_environments()
        }
        return [found[key] for key in sorted(found)]

    def open(self, game_id: str) -> Environment:
        """A fresh environment of `game_id`; unknown games are refused naming the known ones."""
        known = {info.game_id: info for info in self.games()}
        info = known.get(game_id)
        if info is None and not self.online:
            raise ArenaError(f"no local game {game_id!r} (found: {', '.join(known) or 'none'})")
        wrapper = self.arcade.make(game_id, scorecard_id=self.scorecard)
        if wrapper is None:
            raise ArenaError(f"the toolkit could not make {game_id!r}")
        return Environment(wrapper, info or GameInfo(game_id, game_id, (), ()))

    def close(self) -> None:
        """Close the scorecard (online) once, whatever happened before; `ArenaError` when the
        API would not close it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            if self.scorecard is not None:
                with _answered(f"closing scorecard {self.scorecard}"):
                    self.arcade.close_scorecard(self.scorecard)
        finally:
            if self._no_games is not None:
                self._no_games.cleanup()


@contextmanager
def _answered(what: str) -> Iterator[None]:
    """Toolkit and HTTP failures as an `ArenaError` naming `what` (never the key)."""
    try:
        yield
    except ArenaError:
        raise
    except Exception as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        reason = f"HTTP {status}" if status is not None else type(exc).__name__
        hint = " (check ARC_API_KEY)" if status in (401, 403) else ""
        raise ArenaError(f"{what} failed: {reason}{hint}") from None


class _OneLine(logging.Handler):
    """The toolkit's log, one line a record and no traceback, as satchel's warnings."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            log.warning("toolkit: %s", record.getMessage().splitlines()[0][:300])


def _toolkit_log() -> logging.Logger:
    toolkit = logging.getLogger("satchel.harness.toolkit")
    if not toolkit.handlers:
        toolkit.addHandler(_OneLine())
        toolkit.propagate = False
    return toolkit
