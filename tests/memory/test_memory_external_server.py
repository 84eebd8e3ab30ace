"""The external test server is a server of its own: TCP on loopback, a password for every
connection, PostgreSQL 18 with pgvector; `satchel serve` given its URL serves from it and starts
no embedded server."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from external_postgres import SUPERUSER
from memory_process import Served, end_served, environment, postgres_of, satchel
from psycopg import conninfo

from satchel.memory.store.database import migrate


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-external-"))
    try:
        yield folder / "data"
    finally:
        end_served(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def external_db(external_empty_db: str) -> str:
    """A fresh, migrated database on the external server."""
    migrate(external_empty_db)
    return external_empty_db


def test_the_external_server_takes_a_password_over_tcp_only(external_admin_url: str) -> None:
    with psycopg.connect(external_admin_url) as conn:
        version, address = conn.execute("SELECT version(), inet_server_addr()").fetchone() or ()
        assert str(version).startswith("PostgreSQL 18"), version
        assert str(address) == "127.0.0.1"
        assert conn.execute("SHOW unix_socket_directories").fetchone() == ("",)
        methods = conn.execute("SELECT DISTINCT auth_method FROM pg_hba_file_rules").fetchall()
        assert methods == [("scram-sha-256",)]
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    wrong = conninfo.make_conninfo(external_admin_url, password="not-the-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong).close()
    without = conninfo.make_conninfo(external_admin_url, password="")
    with pytest.raises(psycopg.OperationalError, match="no password"):
        psycopg.connect(without).close()
    assert SUPERUSER in external_admin_url


def test_serve_on_the_external_server_starts_no_embedded_one(
    external_db: str, data_dir: Path
) -> None:
    env = environment(external_db)
    server = Served(data_dir, env)
    server.wait_ready()
    made = satchel("tokens", "create", "--project", "alpha", env=env)
    assert made.returncode == 0, made.stderr
    headers = {"Authorization": f"Bearer {made.stdout.strip()}"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
        body = {"messages": [{"role": "user", "content": "I keep bees in Kinsale."}]}
        assert client.post("/v1/observations", json=body).status_code == 201
        found = client.post("/v1/passages/search", json={"question": "bees"})
        assert found.status_code == 200, found.text
        assert "Kinsale" in found.text
    with psycopg.connect(external_db) as conn:
        clients = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND client_addr = '127.0.0.1'"
            " AND pid <> pg_backend_pid()"
        ).fetchone()
    assert clients is not None and clients[0] > 0
    assert server.terminate() == 0
    assert not (data_dir / "pgdata").exists()
    assert postgres_of(data_dir) == []
