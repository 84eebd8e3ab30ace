"""Benchmark: what the harness costs per step, beside a bare loop making the same calls and moves.

Plays satchel's own `maze-0001` (73 moves) to a win through the harness exactly as `satchel run`
plays it (one session from the example open-weight profile: frames rendered, answers parsed,
state carried, records written) against the scripted model server on loopback. The bare loop
then makes the same moves with nothing of satchel: it sends the very requests the harness sent
through the same SDK to the same server, the way the SDK is usually called, and steps the
official toolkit's environment. A second bare loop sends them as satchel's adapters do (messages
in `extra_body`: the same bytes, without the SDK's walk over every parameter), so the harness's
own cost shows apart from that saving. The model's own time in the harness (each action and
summary request: the SDK, loopback HTTP, the scripted server) is measured and taken out for the
per-step overhead.
Run: `satchel bench harness` or `python benchmarks/harness.py`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai
from rich.console import Console
from rich.table import Table

from satchel.harness.environments import Arena
from satchel.harness.runner import RunPlan, run_games
from satchel.harness.script import SUMMARY_KEY, winning_script
from satchel.harness.scripted import ScriptedModelServer
from satchel.providers import OpenSourceChatAdapter, example_profiles
from satchel.providers.kit.sdk import sdk_arguments

GAME = "maze-0001"
PROFILE = "qwen3-open-weight-continuous"
TARGETS = {"overhead_ratio": ("<=", 1.2), "overhead_ms_per_step": ("<", 5.0)}


def moves() -> list[str]:
    replies = winning_script([GAME])[GAME]
    return [json.loads(reply.text)["actions"][0]["action_type"] for reply in replies]


def toolkit_loop(played: list[str]) -> float:
    """Seconds for the toolkit alone to reset the game and make `played`."""
    from arcengine import GameAction

    arena = Arena(online=False)
    began = time.perf_counter()
    environment = arena.arcade.make(GAME)
    assert environment is not None
    environment.reset()
    for name in played:
        environment.step(GameAction[name])
    return time.perf_counter() - began


def bare_loop(bodies: list[dict[str, Any]], played: list[str], *, shortcut: bool = False) -> float:
    """Seconds for a loop without satchel: the same requests through the SDK, the same moves.

    With `shortcut`, the messages travel in `extra_body` as satchel's adapters send them (the
    same bytes, without the SDK's walk over every parameter)."""
    from arcengine import GameAction

    arena = Arena(online=False)
    with ScriptedModelServer(winning_script([GAME])) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        moves = iter(played)
        began = time.perf_counter()
        environment = arena.arcade.make(GAME)
        assert environment is not None
        environment.reset()
        for body in bodies:
            list(
                client.chat.completions.create(
                    **(sdk_arguments(body, "messages") if shortcut else body)
                )
            )
            if SUMMARY_KEY not in json.dumps(body["messages"][-1]):  # an action request
                environment.step(GameAction[next(moves)])
        seconds = time.perf_counter() - began
        client.close()
    return seconds


class ModelClock:
    """Adds up the wall time of every model call the adapter makes (the model's own time, from
    the harness): each action request and each harness-summary request."""

    CALLS = ("run", "summarize")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.lock = threading.Lock()
        self.originals = {name: getattr(OpenSourceChatAdapter, name) for name in self.CALLS}

    def __enter__(self) -> ModelClock:
        for name, original in self.originals.items():
            setattr(OpenSourceChatAdapter, name, self._timed(original))
        return self

    def _timed(self, original: Any) -> Any:
        def timed(adapter: OpenSourceChatAdapter, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(adapter, *args, **kwargs)
            finally:
                with self.lock:
                    self.seconds += time.perf_counter() - began
                    self.calls += 1

        return timed

    def __exit__(self, *exc: object) -> None:
        for name, original in self.originals.items():
            setattr(OpenSourceChatAdapter, name, original)


def harness_run(folder: Path) -> tuple[float, ModelClock, int, list[dict[str, Any]]]:
    """Seconds for one harness game to a win, the model's share, the steps played and the
    requests the model server received."""
    with ScriptedModelServer(winning_script([GAME])) as server:
        profile = example_profiles()[PROFILE]
        client = profile.client.model_copy(update={"base_url": server.base_url})
        profile = profile.model_copy(update={"client": client})
        plan = RunPlan(
            profiles=(profile,),
            games=(GAME,),
            runs_dir=folder,
            env={"OPEN_WEIGHT_API_KEY": "unused"},
        )
        arena = Arena(online=False)
        with ModelClock() as clock:
            began = time.perf_counter()
            played = run_games(plan, {profile.id: arena})
            seconds = time.perf_counter() - began
        bodies = server.requests
    result = played[0].result
    if result.exit_reason != "WIN":
        raise RuntimeError(f"the harness run ended {result.exit_reason}: {result.error}")
    return seconds, clock, result.steps, bodies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="games played by each loop")
    args = parser.parse_args()
    logging.getLogger("satchel").setLevel(logging.ERROR)
    played = moves()
    toolkit: list[float] = []
    bare: list[float] = []
    shortcut: list[float] = []
    harness: list[float] = []
    model: list[float] = []
    steps = len(played)
    with tempfile.TemporaryDirectory(prefix="satchel-bench-harness-") as tmp:
        toolkit_loop(played)  # warm: the game's source is loaded once per process
        for round_ in range(args.rounds):
            toolkit.append(toolkit_loop(played) / steps)
            seconds, clock, steps, bodies = harness_run(Path(tmp) / str(round_))
            harness.append(seconds / steps)
            model.append(clock.seconds / steps)
            bare.append(bare_loop(bodies, played) / steps)
            shortcut.append(bare_loop(bodies, played, shortcut=True) / steps)
    ms = {
        name: statistics.median(values) * 1000
        for name, values in (
            ("toolkit", toolkit),
            ("bare", bare),
            ("shortcut", shortcut),
            ("harness", harness),
            ("model", model),
        )
    }
    results: dict[str, Any] = {
        "steps": steps,
        "toolkit_ms_per_step": round(ms["toolkit"], 3),
        "bare_ms_per_step": round(ms["bare"], 3),
        "bare_shortcut_ms_per_step": round(ms["shortcut"], 3),
        "harness_ms_per_step": round(ms["harness"], 3),
        "model_ms_per_step": round(ms["model"], 3),
        "overhead_ms_per_step": round(ms["harness"] - ms["model"], 3),
        "overhead_ratio": round(ms["harness"] / ms["bare"], 3),
        "ratio_to_shortcut_loop": round(ms["harness"] / ms["shortcut"], 3),
        "harness_steps_per_s": round(1000 / ms["harness"], 1),
        "bare_steps_per_s": round(1000 / ms["bare"], 1),
    }
    table = Table(title=f"satchel harness: {GAME}, {steps} steps, median of {args.rounds} games")
    for column in ("measure", "value", "target"):
        table.add_column(column)
    for key, value in results.items():
        op, goal = TARGETS.get(key, ("", None))
        table.add_row(key, str(value), f"{op} {goal}" if goal is not None else "")
    Console().print(table)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
