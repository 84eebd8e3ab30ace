"""Helpers of the notification tests: a real HTTPS receiver on loopback with its own certificate
(trusted through the CA-file setting), the settings that send to it, and sender passes."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import trustme
from memory_kit import Letters

from satchel.memory.config import MemorySettings, NotifySettings
from satchel.memory.formation.notifier import Notifier
from satchel.memory.formation.worker import Worker

BACKOFF = 0.05  # seconds before the first retry, in these tests
ATTEMPTS = 3


@dataclass
class Received:
    """One request the receiver was sent."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """An HTTPS server on 127.0.0.1 answering each request with the next scripted status (the
    last one repeats), `Location: /elsewhere` on a 3xx; `hold`: the first request waits, unanswered,
    until `release` is set."""

    folder: Path
    statuses: list[int] = field(default_factory=lambda: [200])
    hold: bool = False
    received: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        authority = trustme.CA()
        self.ca_file = self.folder / "receiver-ca.pem"
        authority.cert_pem.write_to_path(str(self.ca_file))
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                seen = Received(self.path, dict(self.headers.items()), self.rfile.read(length))
                receiver.received.append(seen)
                receiver.arrived.set()
                if receiver.hold and len(receiver.received) == 1:
                    receiver.release.wait(60)
                    return
                count = len(receiver.received)
                status = receiver.statuses[min(count, len(receiver.statuses)) - 1]
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        authority.issue_cert("localhost").configure_cert(context)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"https://localhost:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def notify_settings(receiver: Receiver, **changes: Any) -> NotifySettings:
    """Settings that send to `receiver` (localhost, permitted as private), retrying quickly."""
    values: dict[str, Any] = {
        "destinations": ("localhost",),
        "permit_private": True,
        "backoff": BACKOFF,
        "attempts": ATTEMPTS,
        "timeout": 5.0,
        "ca_file": receiver.ca_file,
        **changes,
    }
    return NotifySettings(**values)


def settings_for(receiver: Receiver) -> MemorySettings:
    """A deployment whose turns a worker forms and whose notifications go to `receiver`."""
    return MemorySettings(form_on_store=False, worker_poll=0.05, notify=notify_settings(receiver))


def form(url: str) -> None:
    """One worker pass (no model: turns are formed without facts)."""

    async def run() -> None:
        worker = Worker(url, MemorySettings(form_on_store=False), embedder=Letters())
        try:
            await worker.run_once()
        finally:
            await worker.close()

    asyncio.run(run())


def send_until(
    url: str, settings: NotifySettings, done: Callable[[], bool], timeout: float = 30
) -> None:
    """Run the sender until `done()` (checked after each step), failing after `timeout` s."""

    async def run() -> None:
        notifier = Notifier(url, settings, poll=0.02)
        deadline = time.monotonic() + timeout
        try:
            while not done():
                assert time.monotonic() < deadline, "the sender did not finish in time"
                if not await notifier.send_one():
                    await asyncio.sleep(0.02)
        finally:
            await notifier.close()

    asyncio.run(run())


def register(http: httpx.Client, url: str) -> dict[str, Any]:
    answer = http.post("/v1/notifications/endpoints/register", json={"url": url})
    assert answer.status_code == 200, answer.text
    registered: dict[str, Any] = answer.json()
    return registered


def deliveries(http: httpx.Client) -> list[dict[str, Any]]:
    answer = http.post("/v1/notifications/deliveries/list", json={})
    assert answer.status_code == 200, answer.text
    listed: list[dict[str, Any]] = answer.json()["deliveries"]
    return listed


def settled(http: httpx.Client) -> Callable[[], bool]:
    """Whether every delivery of the project is delivered or parked (and there is one)."""

    def check() -> bool:
        rows = deliveries(http)
        return bool(rows) and all("delivered_at" in r or "parked_at" in r for r in rows)

    return check


def observe(http: httpx.Client, content: str = "the kettle is on") -> None:
    answer = http.post(
        "/v1/observations",
        json={
            "idempotency_key": str(uuid.uuid4()),
            "data_subject_id": "person-1",
            "messages": [{"role": "user", "content": content}],
        },
    )
    assert answer.status_code == 201, answer.text


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()
