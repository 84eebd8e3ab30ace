"""`satchel tokens create|list|revoke` and `satchel serve`, run as the commands they are."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from memory_kit import LiveServer, free_port, with_database
from memory_process import Served, embedded_postmaster, environment, satchel, stop_embedded
from psycopg import conninfo

from satchel.memory.service.tokens import TOKEN_PATTERN


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-cli-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def created(env: dict[str, str], data_dir: Path, *args: str) -> str:
    result = satchel("tokens", "create", "--data-dir", str(data_dir), *args, env=env)
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert TOKEN_PATTERN.fullmatch(token)
    return token


def test_tokens_against_a_database_url(live_server: LiveServer, data_dir: Path) -> None:
    env = environment(live_server.database_url)
    writer = created(env, data_dir, "--project", "alpha", "--name", "ci")
    reader = created(env, data_dir, "--project", "alpha", "--read-only")
    other = created(env, data_dir, "--project", "beta")
    assert len({writer, reader, other}) == 3

    listing = satchel("tokens", "list", "--data-dir", str(data_dir), env=env, timeout=60)
    assert listing.returncode == 0, listing.stderr
    for token in (writer, reader, other):
        assert token[:12] in listing.stdout
        assert token not in listing.stdout
        assert token[12:20] not in listing.stdout
    assert "read_only" in listing.stdout and "read_write" in listing.stdout
    only = satchel("tokens", "list", "--project", "beta", "--data-dir", str(data_dir), env=env)
    assert other[:12] in only.stdout and writer[:12] not in only.stdout

    with httpx.Client(base_url=live_server.base_url) as client:
        ask = {"Authorization": f"Bearer {writer}"}
        assert client.get("/v1/freshness", headers=ask).json()["scope"] == "alpha"
        read_only = {"Authorization": f"Bearer {reader}"}
        observed = client.post("/v1/observations", json={"messages": []}, headers=read_only)
        assert observed.status_code == 403

        revoked = satchel("tokens", "revoke", writer[:12], "--data-dir", str(data_dir), env=env)
        assert revoked.returncode == 0, revoked.stderr
        assert client.get("/v1/freshness", headers=ask).status_code == 401
        again = satchel("tokens", "revoke", writer[:12], "--data-dir", str(data_dir), env=env)
        assert again.returncode == 1
        assert client.get("/v1/freshness", headers=read_only).status_code == 200

    bad = satchel(
        "tokens", "create", "--project", "no spaces", "--data-dir", str(data_dir), env=env
    )
    assert bad.returncode == 2


def test_tokens_against_an_embedded_data_dir(data_dir: Path) -> None:
    env = environment(None)
    server = Served(data_dir, env)  # the deployment exists once it has been served
    server.wait_ready()
    assert server.terminate() == 0
    assert embedded_postmaster(data_dir) is None

    made = satchel("tokens", "create", "--data-dir", str(data_dir), "--project", "local", env=env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert TOKEN_PATTERN.fullmatch(token)  # stdout holds the token alone
    where = f"written to the embedded database in {data_dir.resolve()}"
    assert f"token for project 'local' {where}" in made.stderr
    assert token not in made.stderr
    assert embedded_postmaster(data_dir) is None  # the command stopped the server it started
    listing = satchel("tokens", "list", "--data-dir", str(data_dir), env=env)
    assert token[:12] in listing.stdout
    revoked = satchel("tokens", "revoke", token, "--data-dir", str(data_dir), env=env)
    assert revoked.returncode == 0, revoked.stderr
    assert embedded_postmaster(data_dir) is None


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_tokens_list_never_cuts_what_revoke_takes(
    live_server: LiveServer, data_dir: Path, columns: int
) -> None:
    env = environment(live_server.database_url)
    project = f"project-{uuid.uuid4().hex[:8]}"
    kept = created(env, data_dir, "--project", project, "--name", "[ci] nightly")
    gone = created(env, data_dir, "--project", project, "--read-only")
    assert (
        satchel("tokens", "revoke", gone[:12], "--data-dir", str(data_dir), env=env).returncode == 0
    )
    as_json = satchel("tokens", "list", "--project", project, "--json", env=env)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert {row["prefix"] for row in rows} == {kept[:12], gone[:12]}
    wide = satchel("tokens", "list", "--project", project, env=env)
    assert "[ci] nightly" in wide.stdout  # a label is text, not markup
    listing = satchel("tokens", "list", "--project", project, env={**env, "COLUMNS": str(columns)})
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert all(len(line.rstrip()) <= columns for line in lines), listing.stdout
    for row in rows:
        (line,) = [line for line in lines if row["prefix"] in line.split()]
        assert row["id"] in line.split()
        assert (row["revoked_at"] is None) != ("revoked" in line.split()), line


def test_tokens_refuse_a_data_dir_where_nothing_was_served(data_dir: Path) -> None:
    env = environment(None)
    for command in (
        ("tokens", "create", "--project", "alpha"),
        ("tokens", "list"),
        ("tokens", "revoke", "tsk_nothing"),
        ("formation", "unpark"),
        ("formation", "parked"),
        ("health",),
    ):
        result = satchel(*command, "--data-dir", str(data_dir), env=env)
        assert result.returncode == 2, command
        assert result.stdout == ""
        [line] = result.stderr.strip().splitlines()
        assert f"no satchel deployment in the embedded database in {data_dir.resolve()}" in line
        assert "--data-dir" in line
    assert not data_dir.exists()  # nothing was created there


def test_tokens_name_the_database_url_and_refuse_one_without_a_deployment(
    live_server: LiveServer, pg_admin_url: str, data_dir: Path
) -> None:
    made = satchel(
        "tokens", "create", "--project", "alpha", env=environment(live_server.database_url)
    )
    assert made.returncode == 0, made.stderr
    dbname = conninfo.conninfo_to_dict(live_server.database_url)["dbname"]
    assert re.search(rf"written to the database at \S*/{dbname}$", made.stderr, re.M)

    empty = f"satchel_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {empty}")
    try:
        url = with_database(pg_admin_url, empty)
        refused = satchel("tokens", "create", "--project", "alpha", env=environment(url))
        assert refused.returncode == 2
        assert "no satchel deployment in the database at" in refused.stderr
        assert empty in refused.stderr
        with psycopg.connect(url) as conn:  # nothing was created in it
            assert conn.execute("SELECT to_regclass('tokens')").fetchone() == (None,)
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {empty} WITH (FORCE)")


def test_serve_prints_its_address_and_stops_on_ctrl_c(
    live_server: LiveServer, data_dir: Path
) -> None:
    env = environment(live_server.database_url)
    server = Served(data_dir, env)
    try:
        server.wait_ready()
        token = created(env, data_dir, "--project", "alpha")  # while the server runs
        with httpx.Client(base_url=server.base_url) as client:
            answer = client.get("/v1/freshness", headers={"Authorization": f"Bearer {token}"})
            assert answer.json()["scope"] == "alpha"
    finally:
        status = server.interrupt()
    assert status == 0
    output = server.output()
    assert re.search(rf"serving on http://127\.0\.0\.1:{server.port}\b", output), output
    assert "Traceback" not in output


@pytest.mark.parametrize("command", [("serve", "--role", "api"), ("worker",)])
def test_serve_and_worker_say_in_one_line_when_the_database_cannot_be_reached(
    data_dir: Path, command: tuple[str, ...]
) -> None:
    closed = f"postgresql://satchel:secret-word@127.0.0.1:{free_port()}/satchel"
    result = satchel(*command, "--data-dir", str(data_dir), env=environment(closed))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cannot reach the database at satchel@127.0.0.1:"), lines[0]
    assert "Connection refused" in lines[0] and "secret-word" not in result.stderr + result.stdout


def test_serve_refuses_an_unknown_role(data_dir: Path) -> None:
    result = satchel(
        "serve", "--role", "nonsense", "--data-dir", str(data_dir), env=environment(None)
    )
    assert result.returncode == 2


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf"])
def test_a_bad_body_timeout_is_refused_by_name_before_anything_starts(
    data_dir: Path, value: str
) -> None:
    env = {**environment(None), "SATCHEL_BODY_TIMEOUT": value}
    result = satchel("serve", "--data-dir", str(data_dir), "--port", "1", env=env, timeout=60)
    assert result.returncode == 2
    assert "SATCHEL_BODY_TIMEOUT" in result.stderr and repr(value) in result.stderr
    assert not data_dir.exists()


def test_the_body_timeout_is_read_from_the_environment() -> None:
    from satchel.memory.config import MemorySettings

    assert MemorySettings.from_env({"SATCHEL_BODY_TIMEOUT": "2.5"}).body_timeout == 2.5
    assert MemorySettings.from_env({}).body_timeout == MemorySettings().body_timeout
