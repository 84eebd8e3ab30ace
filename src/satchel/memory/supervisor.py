"""The server's formation worker as a child process: started at the lowest CPU priority with one
BLAS thread, restarted with backoff when it dies, stopped with SIGTERM (SIGKILL after a grace
period) when the server stops, and reported as `running` or `stopped`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from typing import Literal

from satchel.memory.worker_process import LOWEST_PRIORITY, THREAD_LIMITS, command

log = logging.getLogger("satchel.memory")

RESTART_BACKOFF = 1.0  # seconds before the first restart; doubled after each quick death
MAX_RESTART_BACKOFF = 60.0
STABLE = 60.0  # a worker that ran this long died after working: restart it after RESTART_BACKOFF
STOP_GRACE = 10.0  # seconds a stopping worker has to finish the turn at hand before SIGKILL

WorkerState = Literal["running", "stopped"]


def worker_environment(url: str) -> dict[str, str]:
    """The child's environment: this one, the database URL the server resolved, one thread."""
    return {**os.environ, "SATCHEL_DATABASE_URL": url, **THREAD_LIMITS}


class WorkerSupervisor:
    """Keeps one worker process running beside the server until told to stop."""

    def __init__(
        self,
        url: str,
        *,
        backoff: float = RESTART_BACKOFF,
        max_backoff: float = MAX_RESTART_BACKOFF,
        grace: float = STOP_GRACE,
    ) -> None:
        self.env = worker_environment(url)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.grace = grace
        self.process: asyncio.subprocess.Process | None = None

    def state(self) -> WorkerState:
        running = self.process is not None and self.process.returncode is None
        return "running" if running else "stopped"

    async def run(self, stop: asyncio.Event) -> None:
        """Start the worker, and again whenever it dies, until `stop` is set; then stop it."""
        delay = self.backoff
        try:
            while not stop.is_set():
                started = time.monotonic()
                status = await self._run_once(stop)
                if stop.is_set():
                    return
                if time.monotonic() - started >= STABLE:
                    delay = self.backoff
                log.warning(
                    "the formation worker exited (%s); restarting it in %.0f s", status, delay
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                delay = min(delay * 2, self.max_backoff)
        finally:
            await self._stop()

    async def _run_once(self, stop: asyncio.Event) -> str:
        """Run one worker process until it exits or `stop` is set; how it ended."""
        try:
            self.process = await asyncio.create_subprocess_exec(
                *command(os.getpid()), env=self.env, stdin=asyncio.subprocess.DEVNULL
            )
        except OSError as exc:
            return f"it could not start: {exc.strerror or exc}"
        with contextlib.suppress(OSError):  # at once, before its imports compete with the API
            os.setpriority(os.PRIO_PROCESS, self.process.pid, LOWEST_PRIORITY)
        log.info("formation worker started (pid %d)", self.process.pid)
        exited = asyncio.create_task(self.process.wait())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait((exited, stopping), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not exited.done():
            exited.cancel()
            return "stopped"
        code = exited.result()
        return f"signal {-code}" if code < 0 else f"status {code}"

    async def _stop(self) -> None:
        """SIGTERM, then SIGKILL once `grace` seconds have passed."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), self.grace)
        except TimeoutError:
            log.warning("the formation worker did not stop in %.0f s; killing it", self.grace)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
