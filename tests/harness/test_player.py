"""`Player`: the game loop, with a real `Session` (the real SDK over a loopback scripted model)
and a real `Environment` (the official toolkit playing satchel's own games)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from satchel.harness.actions import Action
from satchel.harness.environments import Arena, Environment
from satchel.harness.factory import build_session
from satchel.harness.frames import Observation
from satchel.harness.play import (
    EXIT_REASONS,
    MAX_LEVEL_SCORE,
    UNBASELINED_LEVEL_BUDGET,
    GameResult,
    Limits,
    Player,
    score,
)
from satchel.harness.scripted import ScriptedModelServer
from satchel.providers import Profile, parse_profiles
from satchel.turns import Session

KEY_ENV = "SCRIPTED_MODEL_KEY"
MAX_RETRIES = 2
MAX_ATTEMPTS = MAX_RETRIES + 1
METADATA_LIMIT = 16 * 1024
RESET_NOTE = "The game was over, so it has been reset."

LAMP_LEVELS = [["ACTION1", "ACTION3", "ACTION5"], ["ACTION1", "ACTION3", "ACTION4", "ACTION5"]]
TAPX_LEVELS = [[(17, 25), (45, 41)], [(13, 45), (33, 21), (53, 49)]]
TAPX_MISSES = [(63, 0), (5, 5), (30, 63)]


def profile(base_url: str) -> Profile:
    """The scripted profile of tests/harness/test_run.py, pointed at `base_url`."""
    entry = {
        "id": "scripted-open-weight",
        "agent": {"MAX_CONTEXT_LENGTH": 262144, "MAX_RETRIES": MAX_RETRIES},
        "runtime": {
            "adapter_id": "open_source.chat_completions.v1",
            "state": "continuous_conversation",
            "reasoning_replay": ["reasoning_content"],
            "compaction": {"strategy": "none"},
        },
        "client": {"base_url": base_url, "api_key_env": KEY_ENV},
        "request": {"model": "scripted", "stream": True, "max_tokens": 4096},
        "pricing": {"input": 1.0, "output": 2.0},
    }
    return parse_profiles([entry])["scripted-open-weight"]


@pytest.fixture(scope="module")
def arena() -> Iterator[Arena]:
    games = Arena(online=False)
    yield games
    games.close()


@dataclass(frozen=True, slots=True)
class Step:
    """One `Environment.step` call: what was asked, with what metadata, from where to where."""

    action: Action
    reasoning: dict[str, Any]
    before: Observation
    after: Observation


class Recorder(Environment):
    """A real environment that records every step (and calls `on_step` after each)."""

    def __init__(
        self, inner: Environment, on_step: Callable[[Recorder], None] | None = None
    ) -> None:
        super().__init__(inner.wrapper, inner.info)
        self.on_step = on_step
        self.first: Observation | None = None
        self.current: Observation | None = None
        self.steps: list[Step] = []

    def start(self) -> Observation:
        return self._seen(super().start())

    def reset(self) -> Observation:
        return self._seen(super().reset())

    def _seen(self, observation: Observation) -> Observation:
        if self.first is None:  # the game's first observation, however the player got it
            self.first = self.current = observation
        return observation

    def step(self, action: Action, reasoning: dict[str, Any]) -> Observation:
        before = self.current
        assert before is not None, "the game is stepped before it was reset"
        after = super().step(action, reasoning)
        self.steps.append(Step(action, reasoning, before, after))
        self.current = after
        if self.on_step is not None:
            self.on_step(self)
        return after


@dataclass(slots=True)
class Played:
    result: GameResult
    environment: Recorder
    requests: list[dict[str, Any]]
    session: Session
    player: Player
    remaining: int


def play(
    arena: Arena,
    game_id: str,
    replies: Sequence[dict[str, Any] | str],
    limits: Limits,
    *,
    on_step: Callable[[Recorder], None] | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
) -> Played:
    with ScriptedModelServer(list(replies)) as server:
        session = build_session(
            profile(server.base_url), env={KEY_ENV: "sk-test-0000"}, sleep=lambda _: None
        )
        environment = Recorder(arena.open(game_id), on_step)
        extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
        player = Player(session, environment, limits, carry_forward=False, stop=stop, **extra)
        result = player.play()
        return Played(
            result, environment, server.requests, session, player, sum(server.remaining().values())
        )


def act(name: str, x: int | None = None, y: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"action_type": name}
    if x is not None:
        entry |= {"x": x, "y": y}
    return {"text": json.dumps({"actions": [entry]}), "reasoning": f"I try {name}."}


# --- score and budgets ----------------------------------------------------------------------


def test_every_level_at_its_baseline_scores_100() -> None:
    assert score([10, 25, 38], [10, 25, 38], 3) == pytest.approx(100.0, abs=1e-4)
    assert score([3, 4], [3, 4], 2) == pytest.approx(100.0, abs=1e-4)


def test_a_level_in_half_its_baseline_is_capped_at_115() -> None:
    assert score([10], [5], 1) == MAX_LEVEL_SCORE == 115.0
    assert score([10, 20], [5, 1], 2) == 115.0


def test_a_level_over_its_baseline_scores_the_squared_ratio() -> None:
    assert score([10], [20], 1) == pytest.approx(25.0, abs=1e-4)  # (10 / 20)^2 * 100


def test_unfinished_levels_count_zero() -> None:
    assert score([3, 4], [], 2) == 0.0
    assert score([3, 4], [3], 2) == pytest.approx(100 / 3, abs=1e-4)  # level 1 of weights 1 + 2
    assert score([3, 4], [3, 0], 2) == pytest.approx(100 / 3, abs=1e-4)
    assert score([10, 25, 38], [10, 25], 3) == pytest.approx((100 + 200) / 6, abs=1e-4)


def test_later_levels_weigh_more() -> None:
    first_perfect = score([4, 4], [4, 8], 2)  # 100 on level 1, 25 on level 2
    second_perfect = score([4, 4], [8, 4], 2)  # 25 on level 1, 100 on level 2
    assert first_perfect == pytest.approx((1 * 100 + 2 * 25) / 3, abs=1e-4)
    assert second_perfect == pytest.approx((1 * 25 + 2 * 100) / 3, abs=1e-4)
    assert second_perfect > first_perfect


def test_the_score_averages_over_win_levels_when_they_exceed_the_baselines() -> None:
    assert score([4], [4], 2) == pytest.approx(100 / 3, abs=1e-4)


@pytest.mark.parametrize(
    ("multiplier", "baselines", "level", "budget"),
    [
        (1.0, [3, 4], 0, 3),
        (1.0, [3, 4], 1, 4),
        (1.5, [3, 4], 0, 5),  # ceil(4.5)
        (1.5, [3, 4], 1, 6),
        (0.5, [3], 0, 2),  # ceil(1.5)
        (0.3, [1], 0, 1),  # ceil(0.3): never zero
        (5.0, [10, 25, 38], 2, 190),
        (2.0, [3, 4], 2, UNBASELINED_LEVEL_BUDGET),  # past the baselines
        (2.0, [], 0, UNBASELINED_LEVEL_BUDGET),
        (2.0, [0, 4], 0, UNBASELINED_LEVEL_BUDGET),  # a zero baseline is none
        (2.2, [25], 0, 55),  # 25 * 2.2 is 55.000000000000007 in floats: not 56
        (1.1, [10], 0, 11),
    ],
)
def test_a_level_budget_is_the_ceiling_of_baseline_times_multiplier(
    multiplier: float, baselines: list[int], level: int, budget: int
) -> None:
    assert (
        Limits(multiplier=multiplier, animation_frames=1).level_budget(baselines, level) == budget
    )


# --- plain games ----------------------------------------------------------------------------


def test_a_perfect_lamp_player_wins_at_100(arena: Arena) -> None:
    replies = [act(name) for level in LAMP_LEVELS for name in level]
    played = play(arena, "lamp-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    result = played.result
    assert result.exit_reason == "WIN"
    assert (result.levels_completed, result.win_levels) == (2, 2)
    assert result.actions == result.steps == played.session.steps == 7
    assert result.level_actions == (3, 4)
    assert result.score == pytest.approx(100.0, abs=1e-4)
    assert [step.action.name for step in played.environment.steps] == [
        name for level in LAMP_LEVELS for name in level
    ]


def test_a_perfect_tapx_player_wins_at_100(arena: Arena) -> None:
    replies = [act("ACTION6", x, y) for level in TAPX_LEVELS for x, y in level]
    played = play(arena, "tapx-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    assert played.result.exit_reason == "WIN"
    assert played.result.score == pytest.approx(100.0, abs=1e-4)
    assert [(s.action.x, s.action.y) for s in played.environment.steps] == [
        point for level in TAPX_LEVELS for point in level
    ]


def test_a_game_over_with_the_budget_spent_ends_the_game(arena: Arena) -> None:
    replies = [act("ACTION1"), act("ACTION2"), act("ACTION5"), act("ACTION1")]
    played = play(arena, "lamp-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    assert played.result.exit_reason == "GAME_OVER_BUDGET"
    assert played.result.actions == 3 and played.result.score == 0.0
    assert played.environment.steps[-1].after.state == "GAME_OVER"
    assert len(played.requests) == 3


def test_answers_that_never_parse_end_in_agent_error(arena: Arena) -> None:
    replies: list[dict[str, Any] | str] = [
        "no idea",
        "action1 maybe",
        '{"actions": []}',
        act("ACTION1"),
    ]
    played = play(arena, "lamp-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    assert played.result.exit_reason == "AGENT_ERROR"
    assert played.result.actions == played.result.steps == 0
    assert len(played.requests) == MAX_ATTEMPTS


def test_a_model_that_stops_answering_ends_in_api_error(arena: Arena) -> None:
    played = play(arena, "lamp-0001", [act("ACTION1")], Limits(multiplier=1.0, animation_frames=2))
    assert played.result.exit_reason == "API_ERROR"
    assert played.result.actions == played.result.steps == 1


# --- time, stop and metadata ----------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_time_limit_ends_the_game_with_timeout(arena: Arena) -> None:
    clock = FakeClock()

    def ten_seconds_per_action(_: Recorder) -> None:
        clock.now += 10.0

    replies = [act("ACTION1"), act("ACTION2")] * 5
    played = play(
        arena,
        "lamp-0001",
        replies,
        Limits(multiplier=5.0, animation_frames=2, time_limit_s=25.0),
        on_step=ten_seconds_per_action,
        clock=clock,
    )
    assert played.result.exit_reason == "TIMEOUT"
    assert played.result.actions == 3  # at 10 s and 20 s it plays on; at 30 s it stops
    assert len(played.requests) == 3  # the model is not asked once the time is up
    assert played.remaining == len(replies) - 3


def test_no_time_limit_never_times_out(arena: Arena) -> None:
    clock = FakeClock()

    def an_hour_per_action(_: Recorder) -> None:
        clock.now += 3600.0

    replies = [act(name) for level in LAMP_LEVELS for name in level]
    played = play(
        arena,
        "lamp-0001",
        replies,
        Limits(multiplier=1.0, animation_frames=2),
        on_step=an_hour_per_action,
        clock=clock,
    )
    assert played.result.exit_reason == "WIN"


def test_a_stop_set_during_the_game_interrupts_it_before_the_next_action(arena: Arena) -> None:
    stop = threading.Event()

    def stop_after_two(recorder: Recorder) -> None:
        if len(recorder.steps) == 2:
            stop.set()

    replies = [act("ACTION1"), act("ACTION2")] * 5
    played = play(
        arena,
        "lamp-0001",
        replies,
        Limits(multiplier=5.0, animation_frames=2),
        on_step=stop_after_two,
        stop=stop,
    )
    assert played.result.exit_reason == "INTERRUPTED"
    assert played.result.actions == played.result.steps == 2
    assert len(played.requests) == 2


def test_a_stop_set_before_the_game_interrupts_it_before_any_action(arena: Arena) -> None:
    stop = threading.Event()
    stop.set()
    played = play(
        arena, "lamp-0001", [act("ACTION1")], Limits(multiplier=1.0, animation_frames=2), stop=stop
    )
    assert played.result.exit_reason == "INTERRUPTED"
    assert played.result.actions == 0 and played.requests == []


@pytest.mark.parametrize(
    "filler", ["a", "é", "🎲", "\x01"], ids=["ascii", "latin", "emoji", "ctrl"]
)
def test_the_metadata_sent_with_an_action_stays_within_16_kb(arena: Arena, filler: str) -> None:
    half = filler * (50_000 // len(filler.encode()))
    text = f"HEAD {half} so I choose ACTION1 {half} TAIL"
    replies = [{"text": text, "reasoning": f"THINK {half} {half} DONE"}, act("ACTION2")]
    played = play(arena, "lamp-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    first = played.environment.steps[0]
    assert first.action == Action("ACTION1")
    metadata = first.reasoning
    assert len(json.dumps(metadata).encode()) <= METADATA_LIMIT  # as the toolkit sends it
    assert len(json.dumps(metadata, ensure_ascii=False).encode()) <= METADATA_LIMIT
    assert metadata["step"] == 1 and metadata["attempts"] == 1
    assert metadata["response"].startswith("HEAD") and metadata["response"].endswith("TAIL")
    assert metadata["reasoning"].startswith("THINK") and metadata["reasoning"].endswith("DONE")
    assert played.environment.steps[1].reasoning["response"] == replies[1]["text"]


# --- the game loop as a state machine -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Planned:
    """One scripted reply and what it means: a move (always available), a RESET (available
    unless the previous action was a RESET, forced or not, or it is the first turn), or an
    answer that never parses (`invalid`, `unavailable`)."""

    kind: str
    text: str
    marker: str  # unique to this reply, in its reasoning
    action: Action | None = None
    tag: str | None = None  # unique to this reply, in its text (free-text replies only)

    def reply(self) -> dict[str, Any]:
        return {"text": self.text, "reasoning": f"{self.marker} is my reasoning."}

    def valid(self, reset_allowed: bool) -> bool:
        return self.kind == "move" or (self.kind == "reset" and reset_allowed)


@dataclass(frozen=True, slots=True)
class Spec:
    kind: str
    action: Action | None = None
    text: str = ""  # for invalid and unavailable answers
    strict: bool = True  # a move or RESET as JSON, else in free text


def strict_text(action: Action) -> str:
    entry: dict[str, Any] = {"action_type": action.name}
    if action.x is not None:
        entry |= {"x": action.x, "y": action.y}
    return json.dumps({"actions": [entry]})


def planned(index: int, spec: Spec) -> Planned:
    marker, tag = f"<<m{index}>>", f"<<r{index}>>"
    if spec.kind in ("move", "reset"):
        action = spec.action if spec.kind == "move" else Action("RESET")
        assert action is not None
        if spec.strict:
            return Planned(spec.kind, strict_text(action), marker, action)
        said = f"{action.name} {action.x} {action.y}" if action.x is not None else action.name
        return Planned(spec.kind, f"{tag} I choose {said}.", marker, action, tag)
    if spec.text.startswith("{"):
        return Planned(spec.kind, spec.text, marker)
    return Planned(spec.kind, f"{tag} {spec.text}", marker, tag=tag)


def move(action: Action) -> st.SearchStrategy[Spec]:
    """A move, as JSON or in free text."""
    return st.booleans().map(lambda strict: Spec("move", action, strict=strict))


def moves(actions: Sequence[Action]) -> st.SearchStrategy[list[Spec]]:
    return st.tuples(*(move(action) for action in actions)).map(list)


def lamp_chunks() -> st.SearchStrategy[list[Spec]]:
    single = st.sampled_from([f"ACTION{n}" for n in range(1, 6)]).flatmap(
        lambda name: moves([Action(name)])
    )
    return st.one_of(
        single,
        single,
        st.sampled_from(LAMP_LEVELS).flatmap(lambda level: moves([Action(n) for n in level])),
        moves([Action(name) for level in LAMP_LEVELS for name in level]),  # a win
        st.booleans().map(lambda s: [Spec("reset", strict=s)]),
        st.sampled_from(["I am not sure.", "press action2", "ACTION 1", '{"actions": []}', ""]).map(
            lambda text: [Spec("invalid", text=text)]
        ),
        st.sampled_from(
            [
                "ACTION6 3 4",
                "ACTION7 please",
                '{"actions": [{"action_type": "ACTION6", "x": 1, "y": 2}]}',
            ]
        ).map(lambda text: [Spec("unavailable", text=text)]),
    )


def tapx_chunks() -> st.SearchStrategy[list[Spec]]:
    point = st.one_of(
        st.sampled_from([p for level in TAPX_LEVELS for p in level] + TAPX_MISSES),
        st.tuples(st.integers(0, 63), st.integers(0, 63)),
    )
    single = point.flatmap(lambda p: moves([Action("ACTION6", *p)]))
    return st.one_of(
        single,
        single,
        st.sampled_from(TAPX_LEVELS).flatmap(
            lambda level: moves([Action("ACTION6", x, y) for x, y in level])
        ),
        moves([Action("ACTION6", x, y) for level in TAPX_LEVELS for x, y in level]),  # a win
        st.booleans().map(lambda s: [Spec("reset", strict=s)]),
        st.sampled_from(
            [
                "I click ACTION6.",
                "ACTION6 64 2",
                '{"actions": [{"action_type": "ACTION6", "x": 1.0, "y": 2}]}',
                "hmm",
            ]
        ).map(lambda text: [Spec("invalid", text=text)]),
        st.sampled_from(
            ["ACTION1", "ACTION5 now", '{"actions": [{"action_type": "ACTION2"}]}']
        ).map(lambda text: [Spec("unavailable", text=text)]),
    )


@dataclass(frozen=True, slots=True)
class Case:
    game_id: str
    limits: Limits
    plan: tuple[Planned, ...]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    game_id = draw(st.sampled_from(["lamp-0001", "tapx-0001"]))
    chunks = lamp_chunks() if game_id == "lamp-0001" else tapx_chunks()
    specs = [spec for chunk in draw(st.lists(chunks, min_size=3, max_size=10)) for spec in chunk]
    limits = Limits(
        multiplier=draw(st.sampled_from([1.0, 2.0, 5.0])),
        animation_frames=2,
        max_actions=draw(st.sampled_from([6, 12])),
    )
    return Case(game_id, limits, tuple(planned(i, spec) for i, spec in enumerate(specs)))


def visits(steps: Sequence[Step]) -> list[tuple[int, int]]:
    """(level, actions) per stay at a level of the game, in order; a reset within a level
    stays in it."""
    found: list[tuple[int, int]] = []
    for step in steps:
        level = step.before.levels_completed
        if found and found[-1][0] == level:
            found[-1] = (level, found[-1][1] + 1)
        else:
            found.append((level, 1))
    return found


def check_game(case: Case, played: Played) -> None:
    result, steps, requests = played.result, played.environment.steps, played.requests
    limits, plan = case.limits, case.plan
    baselines = played.environment.info.baseline_actions
    story = [
        f"{s.action.name}{'' if s.action.x is None else (s.action.x, s.action.y)}"
        f"->{s.after.state}/{s.after.levels_completed}"
        for s in steps
    ]
    why = f"{result}\nsteps: {story}\nreplies: {[p.text[:60] for p in plan]}"

    assert result.exit_reason in EXIT_REASONS, why
    assert 0.0 <= result.score <= MAX_LEVEL_SCORE, why
    assert result.actions == len(steps), why
    assert limits.max_actions is None or result.actions <= limits.max_actions, why

    # Walk the replies as the loop must have seen them.
    position = 0
    reset_allowed = False
    failures = 0
    accepted: list[Planned] = []
    rejected: list[Planned] = []
    after_reset: list[int] = []  # requests that first follow a forced reset
    expected: set[str] | None = None
    for index in range(min(len(requests), len(plan))):
        reply = plan[index]
        if not reply.valid(reset_allowed):
            rejected.append(reply)
            failures += 1
            if failures == MAX_ATTEMPTS:
                expected = {"AGENT_ERROR"}
                break
            continue
        failures = 0
        assert position < len(steps), f"reply {index} was accepted but never played\n{why}"
        step = steps[position]
        position += 1
        assert step.action == reply.action, why
        assert step.reasoning["step"] == len(accepted) + 1, why
        assert step.reasoning["response"] == reply.text, why
        accepted.append(reply)
        reset_allowed = step.action.name != "RESET"
        if step.after.state == "WIN":
            expected = {"WIN"}
            break
        forced = False
        if step.after.over:
            if position == len(steps):
                expected = {"GAME_OVER_BUDGET"}
                break
            reset = steps[position]
            position += 1
            assert reset.action == Action("RESET"), f"a GAME_OVER must be reset\n{why}"
            assert not reset.after.over, why
            reset_allowed, forced = False, True
            if index + 1 < len(requests):
                after_reset.append(index + 1)
        if index + 1 == len(requests):  # the model was not asked again: a budget ended it
            expected = {"ACTION_BUDGET", "GAME_OVER_BUDGET"} if forced else {"ACTION_BUDGET"}
            break
    if expected is None:
        assert len(requests) == len(plan) + 1, f"the script ran out, then one more request\n{why}"
        expected = {"API_ERROR"}
    assert position == len(steps), f"every action was the model's or a forced reset\n{why}"
    assert result.exit_reason in expected, why

    # Steps are the model's actions; forced resets are actions but not steps.
    assert result.steps == played.session.steps == len(accepted), why

    final = steps[-1].after if steps else played.environment.first
    assert final is not None
    assert result.levels_completed == final.levels_completed, why
    if result.exit_reason == "WIN":
        assert result.levels_completed == result.win_levels == final.win_levels, why

    # Budgets: no stay at a level goes past its budget, and a budget ending has spent one.
    stays = visits(steps)
    for level, spent in stays:
        assert spent <= limits.level_budget(baselines, level), f"level {level}: {spent}\n{why}"
    if result.exit_reason in ("ACTION_BUDGET", "GAME_OVER_BUDGET"):
        level = final.levels_completed
        current = stays[-1][1] if stays and stays[-1][0] == level else 0
        at_level = sum(spent for stay, spent in stays if stay == level)
        out_of_actions = limits.max_actions is not None and result.actions >= limits.max_actions
        level_spent = max(current, at_level) >= limits.level_budget(baselines, level)
        assert out_of_actions or level_spent, f"a budget ended it, none was spent\n{why}"

    # The player's level bookkeeping follows the game's levels.
    assert len(played.player.level_actions) == final.levels_completed + 1, why

    # A rejected reply never reaches the accepted state, nor any later request.
    state = json.dumps(played.session.state.to_json())
    asked = json.dumps(requests)
    for reply in rejected:
        for secret in filter(None, (reply.marker, reply.tag)):
            assert secret not in state, f"{secret} leaked into the state\n{why}"
            assert secret not in asked, f"{secret} leaked into a request\n{why}"
    for reply in accepted:
        assert reply.marker in state, why  # the check above can see a reply

    # The game-over frame, buffered before the forced reset, reaches the next request.
    for index in after_reset:
        body = json.dumps(requests[index])
        assert "State: GAME_OVER" in body and RESET_NOTE in body, why


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the message tells the story
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_the_game_loop_keeps_its_invariants(arena: Arena, case: Case) -> None:
    played = play(arena, case.game_id, [p.reply() for p in case.plan], case.limits)
    check_game(case, played)


# --- found by the invariants above: the scenarios that break them ---------------------------


def test_a_forced_reset_never_takes_the_game_past_max_actions(arena: Arena) -> None:
    # ACTION5 on a wrong row loses at action 2 of 3; the forced reset is action 3.
    replies = [act("ACTION1"), act("ACTION5"), act("ACTION1"), act("ACTION2")]
    limits = Limits(multiplier=5.0, animation_frames=2, max_actions=3)
    played = play(arena, "lamp-0001", replies, limits)
    assert played.result.actions <= 3, played.result
    assert played.result.exit_reason in ("ACTION_BUDGET", "GAME_OVER_BUDGET")


def test_a_forced_reset_never_takes_a_level_past_its_budget(arena: Arena) -> None:
    # Level 1 of lamp has a budget of 3 at multiplier 1.0: the loss is action 2, the reset 3.
    replies = [act("ACTION1"), act("ACTION5"), act("ACTION2"), act("ACTION3")]
    played = play(arena, "lamp-0001", replies, Limits(multiplier=1.0, animation_frames=2))
    assert played.result.actions <= 3, played.result
    assert [step.before.levels_completed for step in played.environment.steps] == [0] * len(
        played.environment.steps
    )


def test_a_reset_right_after_a_new_level_restarts_the_game_and_its_budgets(arena: Arena) -> None:
    # The toolkit answers a RESET with no action taken in the new level by restarting the
    # game at level 1 (levels_completed 0); the player must budget level 1 again (6 actions at
    # multiplier 2.0), not go on with level 2's budget (8).
    replies = [*(act(name) for name in LAMP_LEVELS[0]), act("RESET"), *[act("ACTION2")] * 12]
    played = play(arena, "lamp-0001", replies, Limits(multiplier=2.0, animation_frames=2))
    steps = played.environment.steps
    assert steps[3].action == Action("RESET") and steps[3].after.levels_completed == 0
    result = played.result
    assert result.levels_completed == 0
    assert result.exit_reason == "ACTION_BUDGET"
    assert len(played.player.level_actions) == 1, played.player.level_actions
    assert result.actions <= 3 + 1 + 6, result  # level 1, the reset, level 1 again
