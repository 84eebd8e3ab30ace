"""`satchel view`: a local web server showing a runs directory: its runs, a run replayed step by
step from its records, and the comparison report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from satchel.harness.loopback import Served, stop_signals
from satchel.harness.view.server import CSP, ViewServer


def serve(runs_dir: Path, host: str, port: int, announce: Callable[[str], object]) -> str:
    """Serve `runs_dir` until SIGINT or SIGTERM, announcing the URL once listening; the name of
    the signal that stopped it. `OSError` when the address cannot be bound."""
    with stop_signals() as stopped:
        httpd = ViewServer(runs_dir, host, port)
        served = Served(httpd, "view")
        try:
            announce(httpd.url)
            return stopped()
        finally:
            served.stop()


__all__ = ["CSP", "ViewServer", "serve"]
