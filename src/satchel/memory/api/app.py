"""The FastAPI application of the memory deployment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from psycopg_pool import AsyncConnectionPool
from starlette.routing import Route
from starlette.types import ASGIApp

from satchel.memory.api.access_log import AccessLog
from satchel.memory.api.credentials import Credentials
from satchel.memory.api.deps import Deployment
from satchel.memory.api.errors import install_error_handlers
from satchel.memory.api.gate import Admission, Gate, Grant
from satchel.memory.api.inspector.pages import InspectorPages
from satchel.memory.api.mcp import MCP_PATH, McpEndpoint
from satchel.memory.api.metrics import Metrics, RequestMetrics
from satchel.memory.api.routes import ROUTERS
from satchel.memory.config import MemorySettings
from satchel.memory.passages.caches import SearchCaches
from satchel.memory.service.health import database_answers, worker_beat_age
from satchel.memory.store.appends import Appender
from satchel.memory.store.database import open_pool


class MemoryApp(FastAPI):
    """FastAPI with the access log outside everything else, error handling included, and the
    request metrics (when on) just inside it."""

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        metrics = getattr(self.state, "metrics", None)
        return AccessLog(stack if metrics is None else RequestMetrics(stack, metrics))


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
    metrics = Metrics(pool, settings) if settings.metrics else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.open()
        listener = asyncio.create_task(credentials.listen())
        if metrics is not None:
            metrics.start()
        try:
            async with mcp.running():
                yield
        finally:
            if metrics is not None:
                metrics.stop()
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
    app.state.metrics = metrics
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    mcp = McpEndpoint(app, gate, settings.body_timeout)
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["POST"], include_in_schema=False))
    app.router.routes.append(InspectorPages())

    @app.get("/health", include_in_schema=True)
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @app.get("/ready")
    async def ready() -> JSONResponse:
        """200 once the database answers (and, with SATCHEL_REQUIRE_WORKER, a worker reported
        in recently), else 503 saying why; either way the state of this server's worker."""
        state = worker() if worker is not None else "off"
        reason = await _unready(pool, settings.require_worker)
        if reason is not None:
            return JSONResponse(
                {"status": "unavailable", "worker": state, "reason": reason},
                status_code=503,
                headers={"Cache-Control": "no-store"},
            )
        return JSONResponse(
            {"status": "ready", "worker": state}, headers={"Cache-Control": "no-store"}
        )

    if metrics is not None and settings.metrics_address is None:

        @app.get("/metrics", response_class=Response)
        async def scrape() -> Response:
            """The Prometheus text format; no credential (turn it off with SATCHEL_METRICS=off,
            or serve it apart with SATCHEL_METRICS_ADDRESS)."""
            body, content_type = await metrics.exposition()
            return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    return app


async def _unready(pool: AsyncConnectionPool, require_worker: float | None) -> str | None:
    """Why the deployment cannot serve, or None when it can."""
    if require_worker is None:
        return None if await database_answers(pool) else "the database does not answer"
    answered, age = await worker_beat_age(pool)
    if not answered:
        return "the database does not answer"
    if age is None or age > require_worker:
        return f"no worker reported in within {require_worker:g} s (SATCHEL_REQUIRE_WORKER)"
    return None
