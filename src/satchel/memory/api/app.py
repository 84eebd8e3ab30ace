"""The FastAPI application of the memory deployment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from satchel.memory.api.access_log import AccessLog
from satchel.memory.api.credentials import Credentials
from satchel.memory.api.deps import Deployment
from satchel.memory.api.errors import install_error_handlers
from satchel.memory.api.gate import Admission, Gate, Grant
from satchel.memory.api.mcp import MCP_PATH, McpEndpoint
from satchel.memory.api.routes import ROUTERS
from satchel.memory.config import MemorySettings
from satchel.memory.passages.caches import SearchCaches
from satchel.memory.service.health import database_answers
from satchel.memory.store.appends import Appender
from satchel.memory.store.database import open_pool


class MemoryApp(FastAPI):
    """FastAPI with the access log outside everything else, error handling included."""

    def build_middleware_stack(self) -> ASGIApp:
        return AccessLog(super().build_middleware_stack())


def create_app(
    url: str,
    settings: MemorySettings | None = None,
    *,
    worker: Callable[[], str] | None = None,
) -> FastAPI:
    """The service over the (already migrated) database at `url`. `worker` tells the formation
    worker's state for `/ready` (`running` or `stopped`); without one it is `off`."""
    settings = settings or MemorySettings()
    pool = open_pool(url, settings.pool_size)
    credentials: Credentials[Grant] = Credentials(url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        listener = asyncio.create_task(credentials.listen())
        try:
            async with mcp.running():
                yield
        finally:
            listener.cancel()
            with suppress(asyncio.CancelledError):
                await listener
            await pool.close()

    app = MemoryApp(
        title="satchel memory",
        version="1",
        summary="A memory deployment wire-compatible with the taisce v1 contract.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    gate = Gate(
        pool,
        Admission(settings.work_limit, settings.project_limit, settings.token_limit),
        credentials,
    )
    appender = Appender(pool, formed=settings.form_on_store, backlog=settings.backlog_limit)
    app.state.deployment = Deployment(
        pool=pool,
        appender=appender,
        settings=settings,
        gate=gate,
        search_caches=SearchCaches(),
    )
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    mcp = McpEndpoint(app, gate, settings.body_timeout)
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["POST"], include_in_schema=False))

    @app.get("/health", include_in_schema=True)
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/ready")
    async def ready() -> JSONResponse:
        """200 once the database answers, 503 while it does not; either way the worker's state."""
        state = worker() if worker is not None else "off"
        if not await database_answers(pool):
            return JSONResponse(
                {"status": "unavailable", "worker": state},
                status_code=503,
                headers={"Cache-Control": "no-store"},
            )
        return JSONResponse(
            {"status": "ready", "worker": state}, headers={"Cache-Control": "no-store"}
        )

    return app
