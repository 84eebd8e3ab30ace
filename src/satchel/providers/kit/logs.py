"""The one log filter every family installs on its SDK's logger: the SDKs print whole requests at
debug level, and signatures, encrypted reasoning and keys must never reach a log, whatever level a
caller sets."""

from __future__ import annotations

import logging


class WithoutBodies(logging.Filter):
    """Drops the log lines that start with one of `prefixes` (an SDK's request and response
    dumps)."""

    def __init__(self, *prefixes: str) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(self.prefixes))


def hide_bodies(logger: str, *prefixes: str) -> None:
    """Install `WithoutBodies(*prefixes)` on the logger named `logger`."""
    logging.getLogger(logger).addFilter(WithoutBodies(*prefixes))
