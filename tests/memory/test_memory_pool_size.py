"""`SATCHEL_POOL_SIZE` and the free connection slots `serve` and `worker` check at start."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest
from external_postgres import SUPERUSER
from memory_kit import free_port
from memory_process import Served, embedded_postmaster, embedded_url, environment, satchel
from memory_process import stop_embedded as stop_embedded_of

from satchel.memory.config import MemorySettings, SettingError
from satchel.memory.store.database import connection_slots


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-pool-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded_of(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def test_the_pool_size_is_read_from_the_environment() -> None:
    assert MemorySettings.from_env({"SATCHEL_POOL_SIZE": "40"}).pool_size == 40
    assert MemorySettings.from_env({}).pool_size == 16
    for value in ("0", "-3", "many", "1.5"):
        with pytest.raises(SettingError, match=f"SATCHEL_POOL_SIZE .*{re.escape(repr(value))}"):
            MemorySettings.from_env({"SATCHEL_POOL_SIZE": value})


@pytest.mark.parametrize("value", ["0", "lots"])
def test_a_bad_pool_size_is_refused_by_name_before_anything_starts(
    data_dir: Path, value: str
) -> None:
    env = {**environment(None), "SATCHEL_POOL_SIZE": value}
    for command in (("serve", "--port", "1"), ("worker",)):
        result = satchel(*command, "--data-dir", str(data_dir), env=env, timeout=60)
        assert result.returncode == 2
        assert "SATCHEL_POOL_SIZE" in result.stderr and repr(value) in result.stderr
        assert not data_dir.exists()


def test_serve_refuses_a_pool_the_server_cannot_fit_then_serves_the_size_it_names(
    data_dir: Path,
) -> None:
    env = {**environment(None), "SATCHEL_POOL_SIZE": "100000"}
    port = str(free_port())
    refused = satchel("serve", "--port", port, "--data-dir", str(data_dir), env=env, timeout=120)
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.strip().splitlines()[-1]  # after the start's log lines
    assert line.startswith("100002 connections (a pool of 100000 (SATCHEL_POOL_SIZE), a listener,")
    assert "max_connections" in line, line
    assert "Traceback" not in refused.stderr
    assert embedded_postmaster(data_dir) is None  # the embedded server it started is stopped
    named = re.search(r"set SATCHEL_POOL_SIZE to at most (\d+)", line)
    assert named is not None, line
    server = Served(data_dir, {**env, "SATCHEL_POOL_SIZE": named.group(1)}, None, "--role", "api")
    try:
        server.wait_ready()
    finally:
        assert server.terminate() == 0


def test_on_an_external_server_serve_refuses_a_pool_too_large_then_serves_the_size_it_names(
    external_empty_db: str, data_dir: Path
) -> None:
    env = {**environment(external_empty_db), "SATCHEL_POOL_SIZE": "1000"}
    refused = satchel("serve", "--role", "api", "--data-dir", str(data_dir), env=env)
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert line.startswith("1001 connections (a pool of 1000 (SATCHEL_POOL_SIZE), a listener)")
    assert f"the database at {SUPERUSER}@127.0.0.1:" in line and "max_connections 200" in line
    named = re.search(r"set SATCHEL_POOL_SIZE to at most (\d+)", line)
    assert named is not None, line
    fitting = {**env, "SATCHEL_POOL_SIZE": named.group(1)}
    server = Served(data_dir, fitting, None, "--role", "api")
    try:
        server.wait_ready()
    finally:
        assert server.terminate() == 0


def test_a_worker_refuses_to_start_on_a_server_with_no_free_slot(data_dir: Path) -> None:
    env = environment(None)
    server = Served(data_dir, env, None, "--role", "api")
    try:
        server.wait_ready()
        url = embedded_url(data_dir)
        with ExitStack() as held:
            for _ in range(connection_slots(url).free):
                held.enter_context(psycopg.connect(url, autocommit=True))
            refused = satchel("worker", "--data-dir", str(data_dir), env=env, timeout=120)
        assert refused.returncode == 2, refused.stderr
        line = refused.stderr.strip().splitlines()[-1]
        assert "1 connection (a worker) will not fit" in line and "0 free" in line, line
    finally:
        assert server.terminate() == 0
