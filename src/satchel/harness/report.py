"""The figures of a runs directory: each run folder's records read into one run's figures, and
those summed per config and per game and config, for `satchel report`.

A folder that is not a run or a record that does not parse is skipped with one line saying why;
nothing here raises on what a runs directory holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPLACED = "replaced"
"""The folder of run folders `--resume` played again: not part of the sweep's figures."""

MANIFEST = "sweep.json"

COLUMNS = (
    "games",
    "wins",
    "levels",
    "mean score",
    "actions",
    "input tokens",
    "cached tokens",
    "output tokens",
    "reasoning tokens",
    "cost",
    "retries",
    "compactions",
    "wall time",
)
"""The figures of a group of runs, in the order the tables and the JSON give them."""


class RecordProblem(ValueError):
    """A record that is missing, does not parse, or lacks a figure the report needs."""


@dataclass(frozen=True)
class RunFigures:
    """One run folder's figures, from its `run_meta.json` and step records."""

    folder: str
    game: str
    config: str
    exit_reason: str
    levels_completed: int
    win_levels: int
    score: float | None
    actions: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost: float | None
    retries: int
    compactions: int
    wall_time_s: float
    started_at: str
    step_tokens: tuple[int, ...]
    """Each step's tokens (every request since the previous action), in step order."""


@dataclass
class Runs:
    """What a runs directory holds: the runs read, and one line per thing skipped."""

    runs: list[RunFigures] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def configs(self) -> list[str]:
        return list(dict.fromkeys(run.config for run in self.runs))

    @property
    def games(self) -> list[str]:
        return list(dict.fromkeys(run.game for run in self.runs))


def read_runs(runs_dir: Path) -> Runs:
    """Every run folder directly under `runs_dir` (not `replaced/`), in name order."""
    found = Runs()
    for folder in sorted(path for path in runs_dir.iterdir() if path.is_dir()):
        if folder.name == REPLACED:
            continue
        try:
            run, broken_steps = read_run(folder)
        except RecordProblem as exc:
            found.skipped.append(f"{folder.name}: skipped: {exc}")
            continue
        found.runs.append(run)
        found.skipped.extend(broken_steps)
    found.skipped.extend(_unended_pairs(runs_dir))
    return found


def read_run(folder: Path) -> tuple[RunFigures, list[str]]:
    """The figures of one run folder, and a line for each step record left out because it does
    not parse; `RecordProblem` when the folder is not a finished run."""
    meta_path = folder / "run_meta.json"
    if not meta_path.is_file():
        raise RecordProblem("no run_meta.json: not a run folder, or a run that never ended")
    meta = read_record(meta_path)
    runtime = _field(meta, "runtime", dict, meta_path)
    usage = _field(meta, "total_usage", dict, meta_path)
    game = _field(meta, "game", str, meta_path)
    steps, broken_steps = read_steps(folder)
    compaction = runtime.get("compaction")
    figures = RunFigures(
        folder=folder.name,
        game=game,
        config=_config(runtime, folder.name, game),
        exit_reason=_field(meta, "exit_reason", str, meta_path),
        levels_completed=_field(meta, "levels_completed", int, meta_path),
        win_levels=_field(meta, "win_levels", int, meta_path),
        score=_number_or_none(meta, "score", meta_path),
        actions=_field(meta, "actions", int, meta_path),
        input_tokens=_field(usage, "input_tokens", int, meta_path),
        cached_tokens=_field(usage, "cache_read_tokens", int, meta_path),
        output_tokens=_field(usage, "output_tokens", int, meta_path),
        reasoning_tokens=_field(usage, "reasoning_tokens", int, meta_path),
        cost=_number_or_none(meta, "estimated_cost", meta_path),
        retries=sum(len(step.get("retries") or ()) for step in steps),
        compactions=int(compaction.get("count") or 0) if isinstance(compaction, dict) else 0,
        wall_time_s=_wall_time(meta, meta_path),
        started_at=_field(meta, "started_at", str, meta_path),
        step_tokens=tuple(_step_tokens(step) for step in steps),
    )
    return figures, broken_steps


def _config(runtime: Mapping[str, Any], folder: str, game: str) -> str:
    """The profile id the run records, or the one its folder name `{game}.{profile}.{time}.{hex}`
    holds."""
    config = runtime.get("config_id")
    if isinstance(config, str) and config:
        return config
    rest = folder.removeprefix(f"{game}.")
    return rest.rsplit(".", 2)[0] if rest.count(".") >= 2 else folder


def read_record(path: Path) -> dict[str, Any]:
    """A record's JSON object; `RecordProblem` when it is missing, unparsable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordProblem(f"{path.name} does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise RecordProblem(f"{path.name} is not a JSON object")
    return data


def _field[T](record: Mapping[str, Any], name: str, kind: type[T], path: Path) -> T:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise RecordProblem(f"{path.name} has no {kind.__name__} {name!r}")
    return value


def _number_or_none(record: Mapping[str, Any], name: str, path: Path) -> float | None:
    value = record.get(name)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RecordProblem(f"{path.name} has no number {name!r}")
    return float(value)


def _wall_time(meta: Mapping[str, Any], path: Path) -> float:
    try:
        started = datetime.fromisoformat(_field(meta, "started_at", str, path))
        ended = datetime.fromisoformat(_field(meta, "ended_at", str, path))
    except ValueError:
        raise RecordProblem(f"{path.name}: started_at or ended_at is not a time") from None
    return max((ended - started).total_seconds(), 0.0)


def read_steps(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The step records that parse, in step order, and a line for each that does not."""
    steps: list[dict[str, Any]] = []
    broken: list[str] = []
    for path in sorted(folder.glob("step_*.json")):
        try:
            steps.append(read_record(path))
        except RecordProblem as exc:
            broken.append(f"{folder.name}: skipped {path.name}: {exc}")
    return steps, broken


def _step_tokens(step: Mapping[str, Any]) -> int:
    usage = step.get("usage")
    tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0


def _unended_pairs(runs_dir: Path) -> list[str]:
    """One line for the sweep's pairs without an ending, whose figures are not in the report."""
    path = runs_dir / MANIFEST
    if not path.is_file():
        return []
    try:
        pairs = read_record(path).get("pairs")
    except RecordProblem as exc:
        return [f"{MANIFEST}: skipped: {exc}"]
    if not isinstance(pairs, list):
        return [f"{MANIFEST}: skipped: it has no list 'pairs'"]
    unended = [
        f"{pair.get('game')} with {pair.get('config')}"
        for pair in pairs
        if isinstance(pair, dict) and pair.get("status") != "ended"
    ]
    if not unended:
        return []
    return [f"{MANIFEST}: {len(unended)} pair(s) without an ending: {', '.join(unended)}"]


def figures(runs: Sequence[RunFigures]) -> dict[str, Any]:
    """The figures of a group of runs, keyed by `COLUMNS`."""
    scores = [run.score for run in runs if run.score is not None]
    costs = [run.cost for run in runs if run.cost is not None]
    return {
        "games": len(runs),
        "wins": sum(run.exit_reason == "WIN" for run in runs),
        "levels": sum(run.levels_completed for run in runs),
        "mean score": sum(scores) / len(scores) if scores else None,
        "actions": sum(run.actions for run in runs),
        "input tokens": sum(run.input_tokens for run in runs),
        "cached tokens": sum(run.cached_tokens for run in runs),
        "output tokens": sum(run.output_tokens for run in runs),
        "reasoning tokens": sum(run.reasoning_tokens for run in runs),
        "cost": sum(costs) if costs else None,
        "retries": sum(run.retries for run in runs),
        "compactions": sum(run.compactions for run in runs),
        "wall time": sum(run.wall_time_s for run in runs),
    }


def formatted(column: str, value: Any) -> str:
    """A figure as the tables write it."""
    if value is None:
        return "-"
    if column == "cost":
        return f"${value:.4f}"
    if column == "mean score":
        return f"{value:.2f}"
    if column == "wall time":
        return f"{value:.1f} s"
    return f"{value:,}"


def by_config(runs: Runs) -> dict[str, dict[str, Any]]:
    """Each config's figures over all its games."""
    return {
        config: figures([run for run in runs.runs if run.config == config])
        for config in runs.configs
    }


def by_game(runs: Runs) -> dict[str, dict[str, dict[str, Any]]]:
    """Each game's figures by config (only the configs that played it)."""
    return {
        game: {
            config: figures(chosen)
            for config in runs.configs
            if (chosen := [r for r in runs.runs if r.game == game and r.config == config])
        }
        for game in runs.games
    }


def tokens_per_step(runs: Runs) -> dict[str, list[float]]:
    """Each config's mean tokens at each step index, over its games that reached that step."""
    series: dict[str, list[float]] = {}
    for config in runs.configs:
        games = [run.step_tokens for run in runs.runs if run.config == config]
        longest = max((len(steps) for steps in games), default=0)
        series[config] = [
            sum(means) / len(means)
            for index in range(longest)
            if (means := [steps[index] for steps in games if len(steps) > index])
        ]
    return series


def json_report(runs: Runs) -> dict[str, Any]:
    """The report as one JSON object: the figures per config, per game and config, and the
    lines of what was skipped."""
    return {
        "configs": by_config(runs),
        "games": by_game(runs),
        "skipped": list(runs.skipped),
    }
