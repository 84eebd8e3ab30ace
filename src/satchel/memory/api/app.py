"""The FastAPI application of the memory deployment."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from satchel.memory.api.errors import install_error_handlers
from satchel.memory.api.gate import Admission, Gate
from satchel.memory.api.routes import ROUTERS
from satchel.memory.config import MemorySettings
from satchel.memory.store.database import open_pool


def create_app(url: str, settings: MemorySettings | None = None) -> FastAPI:
    """The service over the (already migrated) database at `url`."""
    settings = settings or MemorySettings()
    pool = open_pool(url, settings.pool_size)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        try:
            yield
        finally:
            await pool.close()

    app = FastAPI(
        title="satchel memory",
        version="1",
        summary="A memory deployment wire-compatible with the taisce v1 contract.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.pool = pool
    app.state.settings = settings
    app.state.gate = Gate(
        pool, Admission(settings.work_limit, settings.project_limit, settings.token_limit)
    )
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)

    @app.get("/health", include_in_schema=True)
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/ready")
    async def ready() -> JSONResponse:
        try:
            async with pool.connection(timeout=1.0) as conn:
                await conn.execute("SELECT 1")
        except Exception:
            return JSONResponse(
                {"status": "unavailable"}, status_code=503, headers={"Cache-Control": "no-store"}
            )
        return JSONResponse({"status": "ready"}, headers={"Cache-Control": "no-store"})

    return app
