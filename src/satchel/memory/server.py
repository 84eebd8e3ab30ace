"""Running the deployment: find or start the database, migrate, serve HTTP, run the worker."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import psycopg

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Worker
from satchel.memory.store.database import migrate
from satchel.memory.store.embedded import start_embedded
from satchel.memory.store.formation import unpark as unpark_turns

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("satchel.memory")


@contextmanager
def database(settings: MemorySettings) -> Iterator[str]:
    """The database URL: `SATCHEL_DATABASE_URL`, or the embedded server under the data dir.

    Migrations are applied (under an advisory lock) before the URL is handed out.
    """
    if settings.database_url:
        migrate(settings.database_url)
        yield settings.database_url
        return
    embedded = start_embedded(settings.data_dir)
    try:
        migrate(embedded.url)
        yield embedded.url
    finally:
        embedded.stop()


def serve(
    settings: MemorySettings,
    host: str,
    port: int,
    announce: object = print,
    *,
    with_worker: bool = True,
) -> None:
    """Serve the API until interrupted (Ctrl-C stops it cleanly); `with_worker` forms turns in
    the same process. Either way stored turns wait for a worker (`form_on_store` is off)."""
    import uvicorn

    from satchel.memory.api.app import create_app

    settings = settings.for_worker()
    with database(settings) as url:
        app = create_app(url, settings)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        worker = Worker(url, settings) if with_worker else None
        if callable(announce):
            announce(f"satchel memory serving on http://{host}:{port}")
        if worker is None:
            server.run()
        else:
            asyncio.run(_beside(server, worker))


async def _beside(server: uvicorn.Server, worker: Worker) -> None:
    """Run the worker as a task beside the HTTP server; it stops when the server does."""
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        await server.serve()
    finally:
        stop.set()
        await task


def work(settings: MemorySettings, announce: object = print) -> None:
    """Run a worker until SIGINT or SIGTERM (it finishes the turn at hand first)."""
    settings = settings.for_worker()
    with database(settings) as url:
        worker = Worker(url, settings)
        if callable(announce):
            announce("satchel memory worker running")
        asyncio.run(_until_signalled(worker))


async def _until_signalled(worker: Worker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await worker.run(stop)


def unpark(settings: MemorySettings, project: str | None) -> int:
    """Put parked turns back in line for the worker; how many."""
    with database(settings) as url:
        return asyncio.run(_unpark(url, project))


async def _unpark(url: str, project: str | None) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await unpark_turns(conn, project)
