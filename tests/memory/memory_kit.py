"""Helpers of the memory tests: the live service on a loopback port, database URLs."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import uvicorn
from psycopg import conninfo

from satchel.memory.api.app import create_app
from satchel.memory.config import MemorySettings
from satchel.memory.passages.embedder import DIMENSIONS, Vectors
from satchel.memory.service.tokens import create_token

SCHEMA_WAIT_S = 60.0  # the first /openapi.json is built when asked for: slow on a busy machine


def with_database(url: str, name: str) -> str:
    return conninfo.make_conninfo(url, dbname=name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LiveServer:
    """The real service over HTTP on 127.0.0.1, in a background thread."""

    def __init__(self, url: str, settings: MemorySettings) -> None:
        self.database_url = url
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(url, settings), host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the memory service did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def token(self, project: str = "alpha", *, read_only: bool = False) -> str:
        return create_token(self.database_url, project, read_only=read_only)


# The answers the contract tells a client to retry with backoff (and the same idempotency key):
# the rate limit, and a pool with no connection to lend in time on a busy machine.
RETRIED = {429: "rate_limited", 503: "no_database_capacity"}


def post_with_backoff(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    """Post an observation, retrying what `RETRIED` names with jittered exponential backoff."""
    delay = 0.01
    for _ in range(200):
        answer = client.post("/v1/observations", json=body)
        if answer.status_code not in RETRIED or (
            answer.json()["error"]["code"] != RETRIED[answer.status_code]
        ):
            return answer
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.25)
    raise AssertionError("still refused for capacity after 200 attempts")


class Letters:
    """A stand-in embedding model with a vector space of its own (letter counts)."""

    identity = "test/letters"

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text.lower():
                rows[row, ord(char) % DIMENSIONS] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)
