"""The formation worker as a child process of `satchel serve`:
`python -m satchel.memory.worker_process --parent PID`.

It forms the turns of the database named by `SATCHEL_DATABASE_URL` (the server hands it the URL
it resolved) at the lowest CPU priority, stops on SIGINT or SIGTERM after the turn at hand, and
stops by itself once its parent is gone, so a server killed outright leaves no worker behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys

from satchel.memory.config import MemorySettings
from satchel.memory.logs import log_to_stderr

MODULE = "satchel.memory.worker_process"
LOWEST_PRIORITY = 19
PARENT_CHECK = 0.5  # seconds between two looks at the parent
# numpy's BLAS and OpenMP pools, one thread each: the worker gets one core at most
THREAD_LIMITS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

log = logging.getLogger("satchel.memory.worker")


def command(parent: int) -> list[str]:
    """The command line that starts a worker child of process `parent`."""
    return [sys.executable, "-m", MODULE, "--parent", str(parent)]


async def run_until_stopped(url: str, settings: MemorySettings, parent: int | None) -> None:
    """Run a worker (and, with destinations configured, the notification sender) until SIGINT or
    SIGTERM, or until process `parent` is no longer ours."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # first: importing and loading take a while
        loop.add_signal_handler(signum, stop.set)
    from satchel.memory.formation.notifier import Notifier
    from satchel.memory.formation.worker import Worker

    tasks = [Worker(url, settings).run(stop)]
    if settings.notify is not None:  # the sender beside formation, on a connection of its own
        tasks.append(Notifier(url, settings.notify, poll=settings.worker_poll).run(stop))
    watch = asyncio.create_task(_watch_parent(parent, stop)) if parent else None
    try:
        await asyncio.gather(*tasks)
    finally:
        if watch is not None:
            watch.cancel()


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    while os.getppid() == parent:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PARENT_CHECK)
        if stop.is_set():
            return
    _orphaned(parent)
    stop.set()


def _orphaned(parent: int) -> None:
    log.warning("the server (pid %d) is gone; the worker stops", parent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--parent", type=int, required=True, help="the server's process id")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # while starting: the server stops us anyway
    log_to_stderr()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, LOWEST_PRIORITY)
    settings = MemorySettings.from_env().for_worker()
    if not settings.database_url:
        log.error("SATCHEL_DATABASE_URL is not set: the worker has no database")
        return 2
    if os.getppid() != args.parent:
        _orphaned(args.parent)
        return 0
    asyncio.run(run_until_stopped(settings.database_url, settings, args.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
