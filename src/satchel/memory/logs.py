"""The log lines of the deployment's processes: on stderr, one line each, with UTC time, level
and logger name (`satchel.memory`, `satchel.memory.worker`, `satchel.memory.access`)."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

ACCESS_LOGGER = "satchel.memory.access"
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class UtcFormatter(logging.Formatter):
    """Times as ISO 8601 in UTC, to the millisecond."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The deployment's own handler (at most one per process)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(UtcFormatter(FORMAT))


def log_to_stderr(*, access: bool = False) -> None:
    """Send `satchel.memory` records of level INFO and up to stderr; the access lines only when
    `access`. Calling it again only changes the access lines."""
    memory = logging.getLogger("satchel.memory")
    if not any(isinstance(handler, StderrHandler) for handler in memory.handlers):
        memory.addHandler(StderrHandler())
        memory.setLevel(logging.INFO)
        memory.propagate = False
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO if access else logging.WARNING)
