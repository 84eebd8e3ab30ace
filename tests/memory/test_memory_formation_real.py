"""Formation against a real model server: llama.cpp's server with SmolLM2-135M-Instruct (one for
the module), `satchel serve` with its worker pointed at it. A turn stating a plain fact is formed
or parked within a bounded time, never left waiting; the worker's log holds no traceback."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from formation_kit import freshness, observe, rows
from memory_kit import LiveServer
from memory_process import Served, environment, stop_embedded
from records_kit import api

from satchel.harness.llama import LlamaServer, smollm2_server
from satchel.memory.config import MemorySettings

# one process starts the model server for every real-model module (scripts/test groups them)
pytestmark = pytest.mark.xdist_group("real_model")
TIMEOUT = 240  # seconds one extraction request may take on a loaded two-core machine
ANN = "person-ann"


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    with smollm2_server(threads=2) as server:
        yield server


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-real-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def test_a_plain_fact_is_formed_or_parked_by_serve_against_a_real_server(
    live_server: LiveServer, llama: LlamaServer, data_dir: Path
) -> None:
    env = environment(live_server.database_url) | {
        "SATCHEL_FORMATION_MODEL": llama.model,
        "SATCHEL_FORMATION_BASE_URL": llama.base_url,
        "SATCHEL_FORMATION_TIMEOUT": str(TIMEOUT),
        "SATCHEL_FORMATION_RETRIES": "0",
        "SATCHEL_FORMATION_ATTEMPTS": "1",
    }
    server = Served(data_dir, env)
    try:
        server.wait_ready()
        with api(live_server) as client:
            client.base_url = httpx.URL(server.base_url)
            observe(client, ANN, ("user", "I live in Cork."))
            deadline = time.monotonic() + TIMEOUT + 60
            while freshness(client) == (0, None, 0) and time.monotonic() < deadline:
                assert server.process.poll() is None, server.output()
                time.sleep(0.5)
            stored, formed, parked = freshness(client)
    finally:
        status = server.interrupt()
    assert status == 0
    assert "Traceback" not in server.output()
    assert (stored, formed, parked) in {(0, 0, 0), (0, 0, 1)}, server.output()
    [(model, error)] = rows(
        live_server.database_url, "SELECT extractor_model, last_error FROM observations"
    )
    if parked:
        assert error and "status" not in error, error  # the server took the request it was sent
    else:
        assert model == llama.model
