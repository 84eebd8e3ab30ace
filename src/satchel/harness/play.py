"""Playing one game: frames to the model, its action to the game, until the game ends.

Each action is one accepted turn of the session: an answer that does not parse is retried from
the accepted state. A GAME_OVER forces a RESET, and what the model was about to miss (the
game-over frame) is buffered into the session's accepted state, so a retry keeps it.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from satchel.harness.actions import Action, parse_action
from satchel.harness.environments import ArenaError, Environment
from satchel.harness.frames import (
    Observation,
    observation_record,
    offered,
    render,
    system_prompt,
)
from satchel.providers.profiles import FrameFormat
from satchel.turns import (
    AcceptedTurn,
    ContextOverflowError,
    FatalAttemptError,
    InterruptedStreamError,
    ModelResponse,
    NeutralMessage,
    Session,
    TransientError,
    TurnFailed,
)
from satchel.turns.records import METADATA_LIMIT_BYTES, fit_text

EXIT_REASONS = (
    "WIN",
    "GAME_OVER_BUDGET",
    "ACTION_BUDGET",
    "TIMEOUT",
    "API_ERROR",
    "AGENT_ERROR",
    "INTERRUPTED",
)
UNBASELINED_LEVEL_BUDGET = 200  # a level without a baseline gets this many actions
MAX_LEVEL_SCORE = 115.0
_API_FAILURES = (FatalAttemptError, TransientError, ContextOverflowError, InterruptedStreamError)


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a game may go on: per level `ceil(baseline * multiplier)` actions, at most
    `max_actions` in all, at most `time_limit_s` seconds."""

    multiplier: float
    animation_frames: int
    max_actions: int | None = None
    time_limit_s: float | None = None

    def level_budget(self, baselines: Sequence[int], level: int) -> int:
        if level < len(baselines) and baselines[level] > 0:
            return math.ceil(round(baselines[level] * self.multiplier, 6))  # 25 * 2.2 is 55
        return UNBASELINED_LEVEL_BUDGET


@dataclass(slots=True)
class Progress:
    """What a game is doing now, for the progress display (written by the game's thread);
    `config` is the id of the profile playing it."""

    game_id: str
    config: str = ""
    levels_completed: int = 0
    win_levels: int = 0
    actions: int = 0
    budget: int = 0
    retries: int = 0
    tokens: int = 0
    cost: float | None = None
    status: str = "starting"

    def count(self, session: Session) -> None:
        """Show what `session` has spent: tokens in and out, and the estimated cost."""
        usage = session.total_usage
        self.tokens = usage.input_tokens + usage.output_tokens
        self.cost = session.pricing.estimate(usage) if session.pricing else None


@dataclass(frozen=True, slots=True)
class GameResult:
    """How a game ended."""

    game_id: str
    exit_reason: str
    levels_completed: int
    win_levels: int
    actions: int
    steps: int
    score: float | None  # None: the game's baselines are unknown
    level_actions: tuple[int, ...] = ()
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "game_id": self.game_id,
            "exit_reason": self.exit_reason,
            "levels_completed": self.levels_completed,
            "win_levels": self.win_levels,
            "actions": self.actions,
            "level_actions": list(self.level_actions),
            "steps": self.steps,
            "score": self.score,
            "error": self.error,
        }


def score(baselines: Sequence[int], level_actions: Sequence[int], win_levels: int) -> float | None:
    """The game's score: each completed level `min((baseline / actions)^2 * 100, 115)`,
    unfinished levels 0, averaged with each level weighted by its number (1, 2, ...); None
    without baselines (a game the ARC API lists without them: its scorecard has the score)."""
    if not baselines:
        return None
    levels = max(win_levels, len(baselines), 1)
    total = 0.0
    for index, actions in enumerate(level_actions[:levels]):
        if index < len(baselines) and actions > 0:
            level = min((baselines[index] / actions) ** 2 * 100, MAX_LEVEL_SCORE)
            total += (index + 1) * level
    return round(total / sum(range(1, levels + 1)), 4)


class Player:
    """Plays one game through one session until it ends; `stop` interrupts between actions.
    `opening`: messages the first request carries after the instructions, before the first
    frame (the memory message of `--memory`)."""

    def __init__(
        self,
        session: Session,
        environment: Environment,
        limits: Limits,
        *,
        carry_forward: bool,
        frame_format: FrameFormat = "grid",
        opening: Sequence[NeutralMessage] = (),
        progress: Progress | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.environment = environment
        self.limits = limits
        self.carry_forward = carry_forward
        self.frame_format = frame_format
        self.opening = tuple(opening)
        self.progress = progress or Progress(environment.info.game_id)
        self.stop = stop or threading.Event()
        self.clock = clock
        self.baselines = environment.info.baseline_actions
        self.actions = 0
        self.level_actions: list[int] = [0]
        self.observation: Observation | None = None

    def play(self) -> GameResult:
        """Play to the end; every ending is a `GameResult`, never an exception."""
        deadline = self.clock() + self.limits.time_limit_s if self.limits.time_limit_s else math.inf
        try:
            self.observation = self.environment.start()
            return self._loop(deadline)
        except ArenaError as exc:
            return self._ended("API_ERROR", str(exc))

    def _loop(self, deadline: float) -> GameResult:
        observation = self._current
        first = True
        new_level = False
        reset_allowed = False
        while True:
            self._show(observation, "playing")
            if self.stop.is_set():
                return self._ended("INTERRUPTED")
            if self.clock() >= deadline:
                return self._ended("TIMEOUT")
            available = offered(observation, reset_allowed)
            text = render(
                observation,
                max_frames=self.limits.animation_frames,
                new_level=new_level,
                reset_allowed=reset_allowed,
                frame_format=self.frame_format,
            )
            new: list[NeutralMessage] = [{"role": "user", "content": text}]
            if first:
                prompt = system_prompt(self.carry_forward, self.frame_format)
                new[:0] = [{"role": "system", "content": prompt}, *self.opening]
            try:
                seen = observation_record(
                    observation, max_frames=self.limits.animation_frames, available=available
                )
                accepted = self.session.turn(new, _parser(available), observation=seen)
            except TurnFailed as failed:
                if isinstance(failed.last_error, ContextOverflowError):
                    alone = not self.session.state.accepted_turns
                    return self._ended("API_ERROR", overflow_reason(failed.last_error, alone))
                reason = (
                    "API_ERROR" if isinstance(failed.last_error, _API_FAILURES) else "AGENT_ERROR"
                )
                return self._ended(reason, str(failed))
            first = False
            self.progress.retries += accepted.attempts - 1
            before = observation
            observation = self._act(accepted.action, _metadata(accepted))
            new_level = observation.levels_completed > before.levels_completed
            reset_allowed = accepted.action.name != "RESET"
            if observation.state == "WIN":
                return self._ended("WIN")
            if observation.over:
                if self._spent():
                    return self._ended("GAME_OVER_BUDGET")
                observation = self._forced_reset(observation)
                new_level = reset_allowed = False
                if self._spent():  # the reset took the last action of the budget
                    return self._ended("GAME_OVER_BUDGET")
            elif self._spent():
                return self._ended("ACTION_BUDGET")

    @property
    def _current(self) -> Observation:
        assert self.observation is not None
        return self.observation

    def _act(self, action: Action, reasoning: dict[str, Any]) -> Observation:
        before = self._current
        observation = self.environment.step(action, reasoning)
        self.actions += 1
        self.level_actions[-1] += 1
        levels = observation.levels_completed
        if levels >= before.levels_completed:
            self.level_actions += [0] * (levels - before.levels_completed)
        else:  # a RESET right after a new level restarts the game, and its budgets with it
            self.level_actions = [*self.level_actions[:levels], 0]
        self.observation = observation
        return observation

    def _forced_reset(self, over: Observation) -> Observation:
        """Reset a game that is over; the game-over frame is buffered for the next turn."""
        shown = render(
            over,
            max_frames=1,
            new_level=False,
            reset_allowed=False,
            frame_format=self.frame_format,
        )
        note = f"{shown}\nThe game was over, so it has been reset."
        self.session.buffer([{"role": "user", "content": note}])
        return self._act(Action("RESET"), {})

    def _spent(self) -> bool:
        level = len(self.level_actions) - 1
        if self.level_actions[-1] >= self.limits.level_budget(self.baselines, level):
            return True
        return self.limits.max_actions is not None and self.actions >= self.limits.max_actions

    def _show(self, observation: Observation, status: str) -> None:
        progress = self.progress
        level = observation.levels_completed  # the level in play, counted from 0
        if observation.win_levels:
            level = min(level, observation.win_levels - 1)  # a won game shows its last budget
        progress.levels_completed = observation.levels_completed
        progress.win_levels = observation.win_levels
        progress.actions = self.actions
        progress.budget = self.limits.level_budget(self.baselines, level)
        progress.count(self.session)
        progress.status = status

    def _ended(self, reason: str, error: str | None = None) -> GameResult:
        observation = self.observation
        levels = observation.levels_completed if observation else 0
        win_levels = observation.win_levels if observation else len(self.baselines)
        if observation is not None:
            self._show(observation, reason)
        else:
            self.progress.status = reason
        return GameResult(
            game_id=self.environment.info.game_id,
            exit_reason=reason,
            levels_completed=levels,
            win_levels=win_levels,
            actions=self.actions,
            steps=self.session.steps,
            score=score(self.baselines, self.level_actions[:levels], win_levels),
            level_actions=tuple(self.level_actions[: max(win_levels, 1)]),
            error=error,
        )


def overflow_reason(error: ContextOverflowError, alone: bool) -> str:
    """Why a game ended on a context overflow no compaction or trim could cure, on one line,
    with the sizes the server stated; `alone`: the request carried no earlier turn."""
    what = "the frame alone" if alone else "the frame and what is kept of the game"
    if error.prompt_tokens and error.context_tokens:
        sizes = (
            f"{what} needs {error.prompt_tokens} tokens; the model's context is "
            f"{error.context_tokens}"
        )
    else:
        sizes = f"{what} does not fit the model's context ({error})"
    return f"{sizes}: use a compact frame format or a larger context"


def _parser(available: Sequence[str]) -> Callable[[ModelResponse], Action]:
    def parse(response: ModelResponse) -> Action:
        return parse_action(response.text, available)

    return parse


def _metadata(accepted: AcceptedTurn[Action]) -> dict[str, Any]:
    """What the toolkit records with the action, within its 16 KB: readable text only. Online
    the record travels as a JSON string whose own JSON form is checked, so that is measured."""
    response = accepted.response
    record: dict[str, Any] = {
        "step": accepted.step,
        "model": response.model,
        "attempts": accepted.attempts,
        "usage": accepted.usage.to_dict(),
        "response": response.text,
        "reasoning": response.reasoning or "",
    }
    room = METADATA_LIMIT_BYTES
    while _sent_size(record) > METADATA_LIMIT_BYTES and room > 64:
        room //= 2
        record["response"] = fit_text(response.text, room)
        record["reasoning"] = fit_text(response.reasoning or "", room)
    return record


def _sent_size(record: dict[str, Any]) -> int:
    return len(json.dumps(json.dumps(record)).encode())
