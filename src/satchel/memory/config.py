"""Settings of the memory deployment, read from `SATCHEL_*` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "satchel"


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """Where the data lives and the limits the service enforces.

    `form_on_store`: with no formation worker, a stored turn counts as formed at once, so the
    watermark and contexts move with the log.
    """

    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str | None = None
    recall_budget: int = 16_000
    max_rows: int = 200
    work_limit: int = 32
    project_limit: int = 16
    token_limit: int = 8
    pool_size: int = 16
    form_on_store: bool = True

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, data_dir: str | Path | None = None
    ) -> MemorySettings:
        env = os.environ if env is None else env
        folder = data_dir or env.get("SATCHEL_DATA_DIR") or DEFAULT_DATA_DIR
        return cls(
            data_dir=Path(folder).expanduser(),
            database_url=env.get("SATCHEL_DATABASE_URL") or None,
        )
