"""The sweep manifest, `RUNS_DIR/sweep.json`: a run's configs and games and, for every config x
game pair, its run folder, status (`pending`, `running`, `ended`) and exit reason, rewritten
atomically as pairs start and end. `--resume` reads it back and plays again only the pairs
without an ending (never started, killed mid-game, or `INTERRUPTED`), after moving a replayed
pair's earlier run folder aside into `RUNS_DIR/replaced/`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MANIFEST = "sweep.json"
REPLACED = "replaced"
VERSION = 1
STATUSES = ("pending", "running", "ended")
REPLAYED_EXITS = frozenset({"INTERRUPTED"})  # an ending `--resume` plays again


class SweepRefused(ValueError):
    """The runs directory's manifest does not allow this command (the message says what to do)."""


@dataclass(slots=True)
class Pair:
    """One config x game pair of a sweep; `run_dir` is its folder's name in the runs directory,
    `replaced` the earlier folders of a replayed pair, moved aside."""

    config: str
    game: str
    status: str = "pending"
    exit_reason: str | None = None
    run_dir: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    replaced: list[str] = field(default_factory=list)

    @property
    def unfinished(self) -> bool:
        """Without an ending `--resume` keeps: never ended, or ended `INTERRUPTED`."""
        return self.status != "ended" or self.exit_reason in REPLAYED_EXITS

    @classmethod
    def from_dict(cls, data: Any) -> Pair:
        if not isinstance(data, dict):
            raise ValueError(f"a pair must be an object, got {type(data).__name__}")
        pair = cls(**data)
        if not (isinstance(pair.config, str) and isinstance(pair.game, str)):
            raise ValueError("a pair needs a config and a game")
        if pair.status not in STATUSES:
            raise ValueError(f"a pair's status must be one of {', '.join(STATUSES)}")
        return pair


class Sweep:
    """The manifest of the runs directory `runs_dir`: which pairs to play, and their progress.

    `Sweep.for_command` reads or makes it without writing; `open()` writes it (moving the folders
    of pairs to replay aside); `started` and `ended` record a pair's progress, from any thread.
    """

    def __init__(
        self, runs_dir: Path, configs: Sequence[str], games: Sequence[str], pairs: list[Pair]
    ) -> None:
        self.runs_dir = runs_dir
        self.configs = tuple(configs)
        self.games = tuple(games)
        self.pairs = pairs
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self.runs_dir / MANIFEST

    @classmethod
    def for_command(
        cls, runs_dir: Path, configs: Sequence[str], games: Sequence[str], *, resume: bool
    ) -> Sweep:
        """The sweep this command plays: a new one of every config x game pair (configs in the
        order given, each with every game), or, with `resume`, the one in `runs_dir`.

        `SweepRefused` when `resume` names other configs or games than the manifest, or, without
        `resume`, when the manifest has pairs without an ending (a new sweep would hide them).
        """
        fresh = cls(runs_dir, configs, games, [Pair(c, g) for c in configs for g in games])
        found = cls._read(runs_dir)
        if found is None:
            return fresh
        left = sum(pair.unfinished for pair in found.pairs)
        if not resume:
            if left:
                raise SweepRefused(
                    f"{found.path} holds a sweep with {left} pair(s) without an ending: finish it "
                    "with --resume, or choose another --runs-dir"
                )
            return fresh
        for flag, given, recorded in (
            ("--config", configs, found.configs),
            ("--game", games, found.games),
        ):
            if set(given) != set(recorded):
                raise SweepRefused(
                    f"--resume: the sweep in {found.path} has {flag} {', '.join(recorded)}, not "
                    f"{', '.join(given)}; give the same ones, or choose another --runs-dir"
                )
        return found

    @classmethod
    def _read(cls, runs_dir: Path) -> Sweep | None:
        path = runs_dir / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise SweepRefused(
                f"cannot read the sweep manifest {path} ({exc}); remove it or choose another "
                "--runs-dir"
            ) from None
        try:
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
            pairs = [Pair.from_dict(pair) for pair in data["pairs"]]
            return cls(runs_dir, data["configs"], data["games"], pairs)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise SweepRefused(
                f"the sweep manifest {path} is not one satchel wrote ({exc}); remove it or "
                "choose another --runs-dir"
            ) from None

    def to_play(self) -> list[Pair]:
        """The pairs without an ending, in the manifest's order."""
        return [pair for pair in self.pairs if pair.unfinished]

    def open(self) -> None:
        """Move the earlier folder of every pair to play aside, reset those pairs to `pending`,
        and write the manifest."""
        with self._lock:
            for pair in self.to_play():
                if pair.run_dir is not None and (self.runs_dir / pair.run_dir).exists():
                    aside = self.runs_dir / REPLACED / pair.run_dir
                    aside.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(self.runs_dir / pair.run_dir, aside)
                    pair.replaced.append(f"{REPLACED}/{pair.run_dir}")
                pair.status, pair.exit_reason, pair.run_dir = "pending", None, None
                pair.started_at = pair.ended_at = None
            self._write()

    def started(self, pair: Pair, run_dir: Path) -> None:
        with self._lock:
            pair.status, pair.run_dir, pair.started_at = "running", run_dir.name, _now()
            self._write()

    def ended(self, pair: Pair, exit_reason: str, *, written: bool = True) -> None:
        """`pair` ended with `exit_reason`; `written=False`: no run folder was written."""
        with self._lock:
            pair.status, pair.exit_reason, pair.ended_at = "ended", exit_reason, _now()
            if not written:
                pair.run_dir = None
            self._write()

    def exits(self) -> list[str]:
        """The exit reason of every pair that ended."""
        with self._lock:
            return [pair.exit_reason for pair in self.pairs if pair.exit_reason is not None]

    def _write(self) -> None:
        data = {
            "version": VERSION,
            "configs": list(self.configs),
            "games": list(self.games),
            "pairs": [asdict(pair) for pair in self.pairs],
        }
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".json.tmp")
        partial.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, self.path)


def _now() -> str:
    return datetime.now(UTC).isoformat()
