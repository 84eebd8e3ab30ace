"""At least once: a worker killed while it sends a delivery (after formation committed it) leaves
the delivery to the next worker, which sends it again under the same id."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from memory_kit import LiveServer
from notify_kit import Receiver, deliveries, observe, register, settings_for

from satchel.memory.config import MemorySettings


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    receiver = Receiver(tmp_path, hold=True)  # the first request is held, never answered
    try:
        yield receiver
    finally:
        receiver.close()


@pytest.fixture
def memory_settings(receiver: Receiver) -> MemorySettings:
    return settings_for(receiver)


def start_worker(database_url: str, receiver: Receiver, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SATCHEL_DATABASE_URL": database_url,
        "SATCHEL_NOTIFY_DESTINATIONS": "localhost",
        "SATCHEL_NOTIFY_PERMIT_PRIVATE": "true",
        "SATCHEL_NOTIFY_CA_FILE": str(receiver.ca_file),
        "SATCHEL_NOTIFY_BACKOFF": "0.1",
    }
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "satchel", "worker"], env=env, stdout=out, stderr=out
        )


def test_a_worker_killed_mid_send_leaves_the_delivery_to_be_sent_again(
    live_server: LiveServer, http: httpx.Client, receiver: Receiver, tmp_path: Path
) -> None:
    register(http, receiver.url)
    observe(http)
    log = tmp_path / "worker.log"
    worker = start_worker(live_server.database_url, receiver, log)
    try:
        assert receiver.arrived.wait(120), log.read_text()
        first = receiver.received[0].headers["Satchel-Delivery"]
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        [row] = deliveries(http)
        assert (row["id"], row["attempts"]) == (first, 0)  # the claim went with the worker

        worker = start_worker(live_server.database_url, receiver, log)
        deadline = time.monotonic() + 120
        while "delivered_at" not in (row := deliveries(http)[0]):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert (row["id"], row["attempts"]) == (first, 1)
        assert [seen.headers["Satchel-Delivery"] for seen in receiver.received] == [first, first]
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=30)
