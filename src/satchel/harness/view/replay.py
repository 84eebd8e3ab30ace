"""What the pages of `satchel view` fetch, as JSON-able data: the runs of a runs directory (and
its sweep manifest), and one run's steps and compaction points for its replay.

A run is addressed by its folder's name, which must name a folder directly under the runs
directory (never through a symlink out of it); anything else is unknown (None).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from satchel.harness.report import (
    MANIFEST,
    REPLACED,
    RecordProblem,
    read_record,
    read_run,
    read_runs,
    read_steps,
)

STEP_FILE = re.compile(r"step_\d{3,}\.json")
"""The name of a step record, the only file of a run folder served as it is."""


def run_folder(runs_dir: Path, name: str) -> Path | None:
    """The run folder `name` under `runs_dir`, or None: a name that is not one of its folders,
    `replaced/`, or a folder whose real path is elsewhere."""
    if name in ("", ".", "..", REPLACED) or "/" in name or "\\" in name:
        return None
    root = runs_dir.resolve()
    folder = root / name
    try:
        real = folder.resolve(strict=True)
    except OSError:
        return None
    if real.parent != root or not real.is_dir():
        return None
    return folder


def step_file(folder: Path, name: str) -> Path | None:
    """The step record `name` of a run folder, or None when there is no such record."""
    if not STEP_FILE.fullmatch(name):
        return None
    path = folder / name
    try:
        real = path.resolve(strict=True)
    except OSError:
        return None
    return path if real.parent == folder.resolve() and real.is_file() else None


def runs_listing(runs_dir: Path) -> dict[str, Any]:
    """The runs page's data: one row per run, the sweep manifest's configs and games (None
    without one) and a line for each thing skipped."""
    runs = read_runs(runs_dir)
    return {
        "runs": [
            {
                "folder": run.folder,
                "game": run.game,
                "config": run.config,
                "exit": run.exit_reason,
                "levels": run.levels_completed,
                "win_levels": run.win_levels,
                "actions": run.actions,
                "score": run.score,
                "tokens": run.input_tokens + run.output_tokens,
                "cost": run.cost,
                "started": run.started_at,
            }
            for run in runs.runs
        ],
        "sweep": _sweep(runs_dir),
        "skipped": runs.skipped,
    }


def _sweep(runs_dir: Path) -> dict[str, Any] | None:
    """The manifest's configs, games and how many of its pairs have ended."""
    path = runs_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = read_record(path)
    except RecordProblem:
        return None
    pairs = [pair for pair in manifest.get("pairs") or () if isinstance(pair, dict)]
    return {
        "configs": [str(config) for config in manifest.get("configs") or ()],
        "games": [str(game) for game in manifest.get("games") or ()],
        "pairs": len(pairs),
        "ended": sum(pair.get("status") == "ended" for pair in pairs),
    }


def run_replay(folder: Path) -> dict[str, Any]:
    """The run page's data: the run's figures (None for a run that never ended), every step
    record that parses, each frame with its digest, and the compaction points."""
    try:
        run, skipped = read_run(folder)
        figures: dict[str, Any] | None = asdict(run)
    except RecordProblem as exc:
        figures, skipped = None, [f"{folder.name}: {exc}"]
    steps, broken = read_steps(folder)
    if figures is None:
        skipped += broken
    return {
        "folder": folder.name,
        "run": figures,
        "steps": [_step(step) for step in steps],
        "compactions": _compactions(folder),
        "skipped": skipped,
    }


def _step(record: dict[str, Any]) -> dict[str, Any]:
    number = record.get("step")
    observation = record.get("observation")
    if isinstance(observation, dict):
        frames = observation.get("frames")
        frames = frames if isinstance(frames, list) else []
        observation = observation | {"frames": frames, "digests": list(map(digest, frames))}
    else:
        observation = None
    retries = [
        {"attempt": retry.get("attempt"), "kind": retry.get("kind")}
        for retry in record.get("retries") or ()
        if isinstance(retry, dict)
    ]
    return {
        "step": number,
        "file": f"step_{number:03d}.json" if isinstance(number, int) else None,
        "action": record.get("action"),
        "response": record.get("response"),
        "reasoning_summary": record.get("reasoning_summary"),
        "usage": record.get("usage"),
        "estimated_cost": record.get("estimated_cost"),
        "attempts": record.get("attempts"),
        "retries": retries,
        "observation": observation,
    }


def digest(frame: object) -> str:
    """A short digest of a recorded frame, which the page shows beside the frame it draws."""
    return hashlib.sha256(json.dumps(frame, separators=(",", ":")).encode()).hexdigest()[:16]


def _compactions(folder: Path) -> list[dict[str, Any]]:
    """Each compaction record that parses: its number, the step it came after, trigger and
    summary."""
    points = []
    for path in sorted(folder.glob("compaction_*.json")):
        try:
            record = read_record(path)
        except RecordProblem:
            continue
        points.append(
            {
                "number": record.get("number"),
                "step_before": record.get("step_before"),
                "trigger": record.get("trigger"),
                "mechanism": record.get("mechanism"),
                "summary": record.get("summary"),
            }
        )
    return points
