"""The deployment's Prometheus metrics, in a registry of the application's own: requests by route
template and status with their latency, the connection pool, database errors, and what the
database says at scrape time (backlog, parked turns, turns stored and formed, messages embedded,
workers' heartbeats).

No label holds a subject, a token, a path as sent, or content: routes are templates (`unmatched`
when none matched) and a project's name is a label only when per-project series are turned on.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from threading import Thread
from typing import Any
from wsgiref.simple_server import WSGIServer

import psycopg
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from satchel.memory.config import DEFAULT_WORKER_AGE, MemorySettings
from satchel.memory.service.health import read_figures
from satchel.memory.store.figures import Figures

PREFIX = "satchel_memory_"
SCRAPE_TIMEOUT = 2.0  # seconds a scrape waits for the database's figures before going without
UNMATCHED = "unmatched"  # the route label of a request no route matched


def route_label(scope: Scope) -> str:
    """The matched route's template, never the path as sent."""
    template = getattr(scope.get("route"), "path", None)
    return template if isinstance(template, str) else UNMATCHED


def project_label(scope: Scope) -> str:
    """The name of the project the request was granted for; empty when none was."""
    grant = scope.get("state", {}).get("grant")
    return str(getattr(grant, "project", ""))


class DatabaseCollector(Collector):
    """The pool's state and errors, and the database's figures, read when scraped (from a
    thread: the figures are read on the application's event loop, within `SCRAPE_TIMEOUT`)."""

    def __init__(self, pool: AsyncConnectionPool, settings: MemorySettings) -> None:
        self.pool = pool
        self.by_project = settings.metrics_per_project
        self.live_within = settings.require_worker or DEFAULT_WORKER_AGE
        self.loop: asyncio.AbstractEventLoop | None = None
        self.request_errors = 0  # requests that ended in a database error

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: these names are the collector's alone

    def collect(self) -> Iterator[Metric]:
        stats = self.pool.get_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        connections = GaugeMetricFamily(
            PREFIX + "pool_connections",
            "Connections of this process's pool, by state.",
            labels=["state"],
        )
        connections.add_metric(["in_use"], size - idle)
        connections.add_metric(["idle"], idle)
        yield connections
        yield GaugeMetricFamily(
            PREFIX + "pool_max_connections",
            "The most connections this process's pool opens (SATCHEL_POOL_SIZE).",
            value=self.pool.max_size,
        )
        errors = CounterMetricFamily(
            PREFIX + "database_errors",
            "Database errors of this process: requests that failed on one, connections that"
            " could not be opened, waits for a pooled connection that gave up.",
            labels=["kind"],
        )
        errors.add_metric(["request"], self.request_errors)
        errors.add_metric(["connect"], stats.get("connections_errors", 0))
        errors.add_metric(["pool_wait"], stats.get("requests_errors", 0))
        yield errors
        figures = self._figures()
        yield GaugeMetricFamily(
            PREFIX + "database_up",
            "1 when this scrape read the database's figures, 0 when it could not in time.",
            value=1 if figures is not None else 0,
        )
        if figures is not None:
            yield from self._families(figures)

    def _figures(self) -> Figures | None:
        if self.loop is None or self.loop.is_closed():
            return None
        read = read_figures(
            self.pool,
            by_project=self.by_project,
            live_within=self.live_within,
            timeout=SCRAPE_TIMEOUT,
        )
        try:
            return asyncio.run_coroutine_threadsafe(read, self.loop).result(SCRAPE_TIMEOUT + 1)
        except Exception:
            return None

    def _families(self, figures: Figures) -> Iterator[Metric]:
        totals = (
            ("formed_turns", "Turns formed by the workers.", figures.formed),
            ("formation_failures", "Failed formation attempts.", figures.failed),
            ("embedded_messages", "Messages embedded for passage search.", figures.embedded),
        )
        for name, text, value in totals:
            yield CounterMetricFamily(PREFIX + name, text, value=value)
        yield GaugeMetricFamily(
            PREFIX + "workers_live",
            "Workers that reported in within the liveness window.",
            value=figures.live_workers,
        )
        age = math.inf if figures.beat_age is None else figures.beat_age
        yield GaugeMetricFamily(
            PREFIX + "worker_heartbeat_age_seconds",
            "Seconds since the freshest running worker reported in (+Inf: none runs).",
            value=age,
        )
        deliveries = (
            ("pending", "Notification deliveries waiting to be sent.", figures.deliveries_pending),
            ("parked", "Notification deliveries parked (not sent).", figures.deliveries_parked),
        )
        for state, text, value in deliveries:
            yield GaugeMetricFamily(PREFIX + f"notification_deliveries_{state}", text, value=value)
        labels = ["project"] if self.by_project else []
        logs = (
            (
                "stored_turns",
                CounterMetricFamily,
                "Turns appended to the log (erased included).",
                "stored",
            ),
            ("backlog_turns", GaugeMetricFamily, "Turns waiting to be formed.", "backlog"),
            ("parked_turns", GaugeMetricFamily, "Turns parked after failing formation.", "parked"),
            (
                "oldest_pending_age_seconds",
                GaugeMetricFamily,
                "Seconds the oldest turn waiting to be formed has waited (0: none waits).",
                "oldest_age",
            ),
        )
        for name, kind, text, field in logs:
            family: Any = kind(PREFIX + name, text, labels=labels)
            for log in figures.logs:
                family.add_metric([log.project or ""] if labels else [], getattr(log, field))
            yield family


class Metrics:
    """The application's registry, what it counts of requests, and the optional listener."""

    def __init__(self, pool: AsyncConnectionPool, settings: MemorySettings) -> None:
        self.registry = CollectorRegistry()
        self.by_project = settings.metrics_per_project
        self.address = settings.metrics_address
        labels = ["method", "route", "status"] + (["project"] if self.by_project else [])
        self.requests = Counter(
            PREFIX + "requests",
            "HTTP requests answered, by method, route template and status (0: the client"
            " went away first).",
            labels,
            registry=self.registry,
        )
        self.latency = Histogram(
            PREFIX + "request_duration_seconds",
            "Seconds from a request's arrival to its answer, by method and route template.",
            ["method", "route"],
            registry=self.registry,
        )
        self.database = DatabaseCollector(pool, settings)
        self.registry.register(self.database)
        self.listener: tuple[WSGIServer, Thread] | None = None

    def observe(self, scope: Scope, status: int, seconds: float) -> None:
        method, route = scope["method"], route_label(scope)
        labels = [method, route, str(status)]
        if self.by_project:
            labels.append(project_label(scope))
        self.requests.labels(*labels).inc()
        self.latency.labels(method, route).observe(seconds)

    def start(self) -> None:
        """At application start: read on this event loop; listen apart when an address is set."""
        self.database.loop = asyncio.get_running_loop()
        if self.address is not None:
            host, port = self.address
            self.listener = start_http_server(port, host, registry=self.registry)

    def stop(self) -> None:
        if self.listener is not None:
            server, thread = self.listener
            server.shutdown()
            server.server_close()
            thread.join()
            self.listener = None

    async def exposition(self) -> tuple[bytes, str]:
        """The text format and its content type; collected in a thread, as the collector waits
        for the database's figures on this loop."""
        return await asyncio.to_thread(generate_latest, self.registry), CONTENT_TYPE_LATEST


class RequestMetrics:
    """ASGI middleware, inside the access log: counts and times every answer, and the requests
    that failed on a database error."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, answer)
        except BaseException as exc:
            status = status or 500
            if isinstance(exc, psycopg.Error | PoolTimeout):
                self.metrics.database.request_errors += 1
            raise
        finally:
            self.metrics.observe(scope, status, time.perf_counter() - started)
