"""Running the deployment: find or start the database, migrate, serve HTTP."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from satchel.memory.config import MemorySettings
from satchel.memory.store.database import migrate
from satchel.memory.store.embedded import start_embedded

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


def serve(settings: MemorySettings, host: str, port: int, announce: object = print) -> None:
    """Serve the API until interrupted (Ctrl-C stops it cleanly)."""
    import uvicorn

    from satchel.memory.api.app import create_app

    with database(settings) as url:
        app = create_app(url, settings)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        if callable(announce):
            announce(f"satchel memory serving on http://{host}:{port}")
        server.run()
