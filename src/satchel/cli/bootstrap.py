"""`satchel bootstrap`: the roles and migrations of a deployment on a PostgreSQL server of its
operator's, made from an administrator's URL."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from satchel.cli.extras import require
from satchel.cli.output import fail, say


def bootstrap(
    admin_url: Annotated[
        str,
        typer.Option(
            metavar="URL",
            help="A superuser's (or a CREATEROLE database owner's) URL to the deployment's"
            " database. Used for this command only.",
        ),
    ],
    app_role: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The login role `satchel serve` and `satchel worker` connect as. Its password"
            " is SATCHEL_APP_PASSWORD (needed when the role is made; changed when set).",
        ),
    ] = "satchel_app",
    owner_role: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The non-login role that owns the schema and runs the migrations.",
        ),
    ] = "satchel_owner",
) -> None:
    """Make or upgrade a deployment on an existing PostgreSQL server.

    Makes a non-login owner role that owns the schema, applies the migrations as
    it, and makes the login role with row access only. Run it again after each upgrade of
    satchel: it applies the new migrations and grants the login role its rights on what they
    made.
    """
    require("server", "bootstrap")
    import psycopg

    from satchel.memory.store.database import describe_url
    from satchel.memory.store.roles import PASSWORD_VARIABLE, BootstrapError, app_url, error_line
    from satchel.memory.store.roles import bootstrap as run

    password = os.environ.get(PASSWORD_VARIABLE) or None
    try:
        done = run(admin_url, app_role, password, owner_role)
    except BootstrapError as exc:
        fail(str(exc), 2)
    except psycopg.OperationalError as exc:
        fail(f"cannot reach {describe_url(admin_url)}: {error_line(exc)}", 2)
    except psycopg.Error as exc:
        fail(f"bootstrap of {describe_url(admin_url)} stopped: {error_line(exc)}", 1)
    say(f"database {done.database}: owner role {done.owner}, login role {done.app}")
    for line in done.done:
        say(f"  {line}")
    if done.applied:
        say(f"  applied {len(done.applied)} migration(s): {', '.join(done.applied)}")
    else:
        say("  migrations: none to apply")
    say(
        f"give satchel serve and satchel worker SATCHEL_DATABASE_URL={app_url(admin_url, app_role)}"
        f" (PASSWORD: the value of {PASSWORD_VARIABLE}, percent-encoded)"
    )
