"""`satchel bootstrap` on the external server: an owner role that owns the schema and every object
of the migrations, a login role with row access only; `serve` and `worker` as that role never
migrate, and refuse to start on a database whose migrations are behind or absent."""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from memory_kit import with_database
from memory_process import Served, end_served, environment, satchel
from psycopg import conninfo

from satchel.memory.store.database import migrate, migrations

PASSWORD = "app-" + uuid.uuid4().hex
OWNER = "satchel_owner"


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-roles-"))
    try:
        yield folder / "data"
    finally:
        end_served(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def admin_db(external_empty_db: str) -> str:
    """The superuser's URL to a new, empty database on the external server."""
    return external_empty_db


def bootstrap(admin_url: str, *args: str, password: str | None = PASSWORD) -> tuple[int, str, str]:
    env = environment(None)
    env.pop("SATCHEL_APP_PASSWORD", None)
    if password is not None:
        env["SATCHEL_APP_PASSWORD"] = password
    done = satchel("bootstrap", "--admin-url", admin_url, *args, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def login_url(admin_url: str, role: str = "satchel_app") -> str:
    return conninfo.make_conninfo(admin_url, user=role, password=PASSWORD)


def test_bootstrap_makes_the_roles_and_a_second_run_applies_nothing(admin_db: str) -> None:
    code, out, err = bootstrap(admin_db)
    assert code == 0, err
    assert f"applied {len(migrations())} migration(s)" in out
    assert f"owner role {OWNER}, login role satchel_app" in out
    assert "postgresql://satchel_app:PASSWORD@127.0.0.1:" in out
    assert PASSWORD not in out + err
    code, again, err = bootstrap(admin_db)
    assert code == 0, err
    assert "migrations: none to apply" in again
    assert "made login role" not in again and "gave" not in again
    with psycopg.connect(admin_db) as conn:
        assert conn.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (OWNER,)
        ).fetchone() == (False,)
        assert conn.execute(
            "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'public'"
        ).fetchone() == (OWNER,)
        others = conn.execute(
            "SELECT c.relname, c.relowner::regrole::text FROM pg_class c"
            " WHERE c.relnamespace = 'public'::regnamespace AND c.relowner <> %s::regrole"
            " AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid"
            "                 AND d.deptype = 'e')",
            (OWNER,),
        ).fetchall()
        assert others == []


def test_the_login_role_may_change_rows_and_nothing_else(admin_db: str) -> None:
    code, _, err = bootstrap(admin_db)
    assert code == 0, err
    with psycopg.connect(login_url(admin_db), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone() == (
            len(migrations()),
        )
        conn.execute("INSERT INTO projects (name) VALUES ('rows-only')")  # its partition too
        for statement in (
            "CREATE TABLE intruder (id int)",
            "CREATE TABLE public.intruder (id int)",
            "ALTER TABLE projects ADD COLUMN intruder int",
            "ALTER TABLE schema_migrations DROP COLUMN name",
            "DROP TABLE tokens",
            "TRUNCATE schema_migrations",
            "CREATE FUNCTION intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE SCHEMA intruder",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        owned = conn.execute(
            "SELECT (SELECT count(*) FROM pg_class WHERE relowner = current_user::regrole)"
            " + (SELECT count(*) FROM pg_proc WHERE proowner = current_user::regrole)"
            " + (SELECT count(*) FROM pg_namespace WHERE nspowner = current_user::regrole),"
            " has_database_privilege(current_database(), 'CREATE'),"
            " has_schema_privilege('public', 'CREATE'),"
            " current_setting('is_superuser')"
        ).fetchone()
        assert owned == (0, False, False, "off")


def test_serve_as_the_login_role_answers_after_bootstrap_adopts_a_served_database(
    admin_db: str, data_dir: Path
) -> None:
    migrate(admin_db)  # a deployment a superuser served before: its objects are the admin's
    made = satchel(
        "tokens", "create", "--project", "alpha", "--database-url", admin_db, env=environment(None)
    )
    assert made.returncode == 0, made.stderr
    code, out, err = bootstrap(admin_db)
    assert code == 0, err
    assert "existing object(s) to satchel_owner" in out and "migrations: none to apply" in out
    app = login_url(admin_db)
    server = Served(data_dir, environment(app))
    server.wait_ready()
    assert "superuser" not in server.output()
    tokens = [made.stdout.strip()]
    for project, url in (("beta", app), ("gamma", admin_db)):  # new projects, new partitions
        more = satchel(
            "tokens", "create", "--project", project, "--database-url", url, env=environment(None)
        )
        assert more.returncode == 0, more.stderr
        tokens.append(more.stdout.strip())
    for token in tokens:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            body = {"messages": [{"role": "user", "content": "I keep bees in Kinsale."}]}
            assert client.post("/v1/observations", json=body).status_code == 201
            answer = client.post("/v1/recalls", json={"question": "Where are the bees?"})
            assert answer.status_code == 200, answer.text
            assert "Kinsale" in answer.text, answer.text
    with psycopg.connect(admin_db, autocommit=True) as conn:  # the worker, as the login role
        deadline = time.monotonic() + 120
        while conn.execute("SELECT count(DISTINCT project_id) FROM message_vectors").fetchone() != (
            3,
        ):
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        partitions = conn.execute(
            "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'message_vectors'::regclass AND c.relowner = %s::regrole",
            (OWNER,),
        ).fetchone()
        assert partitions == (3,)
    unparked = satchel("formation", "unpark", "--database-url", app, env=environment(None))
    assert unparked.returncode == 0 and "unparked 0 turn(s)" in unparked.stdout, unparked.stderr
    assert "ERROR" not in server.output() and "Traceback" not in server.output()
    assert server.terminate() == 0


def test_serve_and_worker_refuse_a_database_behind_naming_bootstrap(
    admin_db: str, data_dir: Path
) -> None:
    code, _, err = bootstrap(admin_db)
    assert code == 0, err
    with psycopg.connect(admin_db, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM schema_migrations WHERE version = (SELECT max(version)"
            " FROM schema_migrations)"
        )
    env = environment(login_url(admin_db))
    for command in (("serve", "--port", "1"), ("worker",)):
        refused = satchel(*command, "--data-dir", str(data_dir), env=env)
        assert refused.returncode == 2, refused.stderr
        line = refused.stderr.strip().splitlines()[-1]
        assert "lacks 1 of this satchel's migrations" in line, refused.stderr
        assert "satchel bootstrap --admin-url" in line and "Traceback" not in refused.stderr
    with psycopg.connect(admin_db) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone() == (
            len(migrations()) - 1,
        )


def test_serve_as_a_login_role_refuses_a_database_with_no_deployment(
    admin_db: str, external_admin_url: str, data_dir: Path
) -> None:
    code, _, err = bootstrap(admin_db)  # the login role exists on the server
    assert code == 0, err
    name = f"satchel_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(external_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        empty = with_database(login_url(admin_db), name)
        refused = satchel(
            "serve", "--port", "1", "--data-dir", str(data_dir), env=environment(empty)
        )
        assert refused.returncode == 2, refused.stderr
        line = refused.stderr.strip().splitlines()[-1]
        assert "no satchel deployment" in line and "satchel bootstrap --admin-url" in line, line
    finally:
        with psycopg.connect(external_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_serve_as_a_superuser_warns_and_leaves_a_bootstrapped_schema_alone(
    admin_db: str, data_dir: Path
) -> None:
    code, _, err = bootstrap(admin_db)
    assert code == 0, err
    server = Served(data_dir, environment(admin_db), None, "--role", "api")
    server.wait_ready()
    assert server.terminate() == 0
    warned = [line for line in server.output().splitlines() if "WARNING" in line]
    assert len(warned) == 1 and "a superuser" in warned[0], server.output()
    assert "satchel bootstrap" in warned[0]


def test_a_new_login_role_needs_its_password_variable(admin_db: str) -> None:
    role = f"satchel_app_{uuid.uuid4().hex[:8]}"
    code, _, err = bootstrap(admin_db, "--app-role", role, password=None)
    assert code == 2
    assert "SATCHEL_APP_PASSWORD is not set" in err and role in err, err
    code, out, err = bootstrap(admin_db, "--app-role", role)
    assert code == 0, err
    assert f"made login role {role}" in out
    with psycopg.connect(login_url(admin_db, role)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)
    code, out, err = bootstrap(admin_db, "--app-role", role, password=None)
    assert code == 0, err
    assert "set the password" not in out  # it stays as it is
    with psycopg.connect(login_url(admin_db, role)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (role,)


def test_a_database_owner_with_createrole_may_bootstrap_once_vector_is_there(
    external_admin_url: str,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    admin, owner, app, name = (f"dba_{suffix}", f"owner_{suffix}", f"app_{suffix}", f"db_{suffix}")
    with psycopg.connect(external_admin_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {admin} LOGIN CREATEROLE PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE DATABASE {name} OWNER {admin}")
    superuser_db = with_database(external_admin_url, name)
    admin_db = with_database(login_url(external_admin_url, admin), name)
    try:
        code, _, err = bootstrap(admin_db, "--owner-role", owner, "--app-role", app)
        assert code == 2 and "the extension vector (pgvector)" in err, err
        with psycopg.connect(superuser_db, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        code, out, err = bootstrap(admin_db, "--owner-role", owner, "--app-role", app)
        assert code == 0, err
        assert f"applied {len(migrations())} migration(s)" in out
        with psycopg.connect(login_url(admin_db, app), autocommit=True) as conn:
            conn.execute("INSERT INTO projects (name) VALUES ('made-by-the-login-role')")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("ALTER TABLE projects ADD COLUMN intruder int")
        code, out, err = bootstrap(admin_db, "--owner-role", owner, "--app-role", app)
        assert code == 0 and "migrations: none to apply" in out, err
    finally:
        with psycopg.connect(external_admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
