"""The roles of a deployment on a PostgreSQL server it does not own: a non-login owner role that
owns the `public` schema and every object the migrations make (they run as it), and the service's
login role, which may read and write rows and nothing more. Made, or brought up to date, from an
administrator's connection; running it again is how a deployment is upgraded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import conninfo, sql

from satchel.memory.store.database import apply_migrations

PASSWORD_VARIABLE = "SATCHEL_APP_PASSWORD"
SCHEMA = "public"
TABLE_RIGHTS = sql.SQL("SELECT, INSERT, UPDATE, DELETE")
SEQUENCE_RIGHTS = sql.SQL("USAGE, SELECT")
# Satchel's objects in the schema that another role owns: tables (partitions included; their
# indexes, triggers and the sequences of their columns follow them), free sequences, views and
# functions. An extension's objects stay its own.
FOREIGN_OBJECTS = """
SELECT 'TABLE', c.oid::regclass::text FROM pg_class c
WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
  AND c.relowner <> %(owner)s::regrole
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                  AND d.objid = c.oid
                  AND (d.deptype = 'e' OR (c.relkind = 'S' AND d.deptype IN ('a', 'i'))))
UNION ALL
SELECT 'FUNCTION', p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = %(schema)s::regnamespace AND p.proowner <> %(owner)s::regrole
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                  AND d.objid = p.oid AND d.deptype = 'e')
"""


class BootstrapError(RuntimeError):
    """The roles cannot be made as asked; the message says why and what to do, in one line."""


@dataclass(slots=True)
class Bootstrap:
    """What a bootstrap did: the database, its roles, what changed, the migrations it applied."""

    database: str
    owner: str
    app: str
    done: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)


def bootstrap(admin_url: str, app_role: str, password: str | None, owner: str) -> Bootstrap:
    """Make or update the owner role, the schema it owns, the migrations (as it), and the login
    role `app_role` with row rights only (its password set when `password` is given; a new
    role needs one)."""
    if app_role == owner:
        raise BootstrapError(f"the login role cannot be the owner role {owner!r}: pick another")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        admin, database, superuser = _who(conn)
        if app_role == admin:
            raise BootstrapError(
                f"the login role cannot be {admin!r}, the administrator of --admin-url:"
                " pick another with --app-role"
            )
        done = Bootstrap(database, owner, app_role)
        _owner_role(conn, done, admin, superuser)
        _extension(conn, done, admin, database)
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(SCHEMA)))
        _schema(conn, done)
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner)))
        done.applied = apply_migrations(conn)
        conn.execute("RESET ROLE")
        _app_role(conn, done, password)
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner)))
        _grants(conn, done)
        conn.execute("RESET ROLE")
        conn.execute(
            sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(app_role)
            )
        )
    return done


def app_url(admin_url: str, app_role: str) -> str:
    """The URL `satchel serve` is given: the admin URL's server and database, the login role,
    and a placeholder where its password goes (never the password)."""
    info = conninfo.conninfo_to_dict(admin_url)
    host = str(info.get("host") or "localhost")
    where = f"{host}:{info['port']}" if info.get("port") else host
    return f"postgresql://{app_role}:PASSWORD@{where}/{info.get('dbname') or ''}"


def _who(conn: psycopg.Connection[Any]) -> tuple[str, str, bool]:
    row = conn.execute(
        "SELECT current_user, current_database(), current_setting('is_superuser') = 'on'"
    ).fetchone()
    assert row is not None
    return str(row[0]), str(row[1]), bool(row[2])


def _role(conn: psycopg.Connection[Any], name: str) -> tuple[bool, bool] | None:
    """(can log in, is a superuser) of role `name`, or None when there is none."""
    row = conn.execute(
        "SELECT rolcanlogin, rolsuper FROM pg_roles WHERE rolname = %s", (name,)
    ).fetchone()
    return None if row is None else (bool(row[0]), bool(row[1]))


def _owner_role(
    conn: psycopg.Connection[Any], done: Bootstrap, admin: str, superuser: bool
) -> None:
    """The owner role, made NOLOGIN, and the administrator a member who may SET ROLE to it."""
    name = sql.Identifier(done.owner)
    found = _role(conn, done.owner)
    try:
        if found is None:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(name))
            done.done.append(f"made role {done.owner} (no login; owns the schema)")
        elif found[0]:
            conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(name))
            done.done.append(f"made role {done.owner} unable to log in")
        if not superuser and not _may_set_role(conn, done.owner):
            conn.execute(sql.SQL("GRANT {} TO {}").format(name, sql.Identifier(admin)))
    except psycopg.errors.InsufficientPrivilege as exc:
        raise BootstrapError(
            f"role {admin!r} may not make role {done.owner!r} or take it on"
            f" ({error_line(exc)}): give --admin-url a superuser, or have one run"
            f" GRANT {done.owner} TO {admin}"
        ) from None


def _may_set_role(conn: psycopg.Connection[Any], role: str) -> bool:
    """Whether the connected role may `SET ROLE` to `role` (before PostgreSQL 16: is a member)."""
    right = "SET" if conn.info.server_version >= 160000 else "MEMBER"
    row = conn.execute("SELECT pg_has_role(%s, %s)", (role, right)).fetchone()
    return row == (True,)


def _extension(conn: psycopg.Connection[Any], done: Bootstrap, admin: str, database: str) -> None:
    """pgvector in the database, made by the administrator (only a superuser, or a role the
    server trusts with it, may)."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    try:
        conn.execute(sql.SQL("CREATE EXTENSION vector SCHEMA {}").format(sql.Identifier(SCHEMA)))
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedFile) as exc:
        raise BootstrapError(
            f"the extension vector (pgvector) is not in database {database!r} and role"
            f" {admin!r} cannot make it ({error_line(exc)}): have a superuser run"
            " CREATE EXTENSION vector there, then run this again"
        ) from None
    done.done.append("made the extension vector")


def _schema(conn: psycopg.Connection[Any], done: Bootstrap) -> None:
    """The schema owned by the owner role, with no right to create in it left to PUBLIC (a
    database from before PostgreSQL 15 gives it), and the objects of a deployment already there
    (one a superuser migrated) handed to the owner role."""
    schema, owner = sql.Identifier(SCHEMA), sql.Identifier(done.owner)
    row = conn.execute(
        "SELECT nspowner::regrole::text,"
        " EXISTS (SELECT 1 FROM aclexplode(coalesce(nspacl, '{}')) a"
        "         WHERE a.grantee = 0 AND a.privilege_type = 'CREATE')"
        " FROM pg_namespace WHERE nspname = %s",
        (SCHEMA,),
    ).fetchone()
    if row is None:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(schema, owner))
        done.done.append(f"made schema {SCHEMA} owned by {done.owner}")
    elif row[0] != done.owner:
        conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(schema, owner))
        done.done.append(f"gave schema {SCHEMA} to {done.owner}")
    if row is not None and row[1]:
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM PUBLIC").format(schema))
        done.done.append(f"revoked CREATE on schema {SCHEMA} from PUBLIC")
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
        return  # no deployment yet: whatever else is in the schema is not satchel's
    handed = conn.execute(FOREIGN_OBJECTS, {"schema": SCHEMA, "owner": done.owner}).fetchall()
    for kind, name in handed:
        conn.execute(sql.SQL("ALTER {} {} OWNER TO {}").format(sql.SQL(kind), sql.SQL(name), owner))
    if handed:
        done.done.append(f"gave {len(handed)} existing object(s) to {done.owner}")


def _app_role(conn: psycopg.Connection[Any], done: Bootstrap, password: str | None) -> None:
    """The login role, made or its password changed; never a superuser, never the owner."""
    name = sql.Identifier(done.app)
    found = _role(conn, done.app)
    if found is not None and found[1]:
        raise BootstrapError(
            f"role {done.app!r} is a superuser: pick another login role with --app-role"
        )
    if found is None and password is None:
        raise BootstrapError(
            f"{PASSWORD_VARIABLE} is not set: set it to the password role {done.app!r} is made"
            " with, then run this again"
        )
    if password is not None:
        verifier = conn.pgconn.encrypt_password(password.encode(), done.app.encode())
        secret = sql.Literal(verifier.decode())
        if found is None:
            made = sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(name, secret)
            conn.execute(made)
            done.done.append(f"made login role {done.app}")
        else:
            conn.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(name, secret))
            done.done.append(f"set the password of login role {done.app}")
    if conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (done.app, done.owner)).fetchone() == (
        True,
    ):
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(done.owner), name))
        done.done.append(f"took role {done.owner} from {done.app}")


def _grants(conn: psycopg.Connection[Any], done: Bootstrap) -> None:
    """Row rights on every table, sequence and function the owner role has and will make; no
    right to create, alter or drop anything. Run as the owner role."""
    ids = {
        "app": sql.Identifier(done.app),
        "owner": sql.Identifier(done.owner),
        "schema": sql.Identifier(SCHEMA),
        "tables": TABLE_RIGHTS,
        "sequences": SEQUENCE_RIGHTS,
    }
    for statement in (
        "GRANT USAGE ON SCHEMA {schema} TO {app}",
        "GRANT {tables} ON ALL TABLES IN SCHEMA {schema} TO {app}",
        "GRANT {sequences} ON ALL SEQUENCES IN SCHEMA {schema} TO {app}",
        "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}"
        " GRANT {tables} ON TABLES TO {app}",
        "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}"
        " GRANT {sequences} ON SEQUENCES TO {app}",
        "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}"
        " GRANT EXECUTE ON FUNCTIONS TO {app}",
    ):
        conn.execute(sql.SQL(statement).format(**ids))
    functions = conn.execute(
        "SELECT oid::regprocedure::text FROM pg_proc"
        " WHERE pronamespace = %s::regnamespace AND proowner = current_user::regrole",
        (SCHEMA,),
    ).fetchall()
    for (function,) in functions:
        conn.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(function), ids["app"])
        )
    done.done.append(f"granted {done.app} row access to the tables of {done.owner}")


def error_line(exc: Exception) -> str:
    """The first line of a database error's message (its detail and hints left out)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
