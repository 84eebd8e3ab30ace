"""`satchel view`: serve the pages of a runs directory on this machine."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Annotated

import typer

from satchel.cli.output import fail, say, say_error

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def view(
    runs_dir: Annotated[
        Path, typer.Argument(help="A runs directory of `satchel run` (its --runs-dir).")
    ],
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="HOST",
            help="Address to listen on; the pages have no sign-in, so keep it loopback.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", help="Port to listen on (0: a free one).")
    ] = 8765,
) -> None:
    """Serve pages of a runs directory: its runs, each run replayed step by step, the report.

    Prints the URL and serves until Ctrl-C or SIGTERM; opens no browser.
    """
    from satchel.harness.view import serve

    if not runs_dir.is_dir():
        fail(f"no runs directory '{runs_dir}': give the --runs-dir of a `satchel run`", 2)
    if host not in LOOPBACK:
        say_error(
            f"listening on {host}: the pages have no sign-in, anyone who can reach this address "
            "sees the runs"
        )
    try:
        stopped_by = serve(runs_dir, host, port, announce=say)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(f"port {port} on {host} is taken: give another --port (0 picks a free one)", 1)
        fail(f"cannot listen on {host}:{port}: {exc.strerror}: give another --host or --port", 1)
    say(f"stopped ({stopped_by})")
