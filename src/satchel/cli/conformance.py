"""`satchel conformance`: the conformance suite against a driver, one JSON line per case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from satchel.cli.extras import require
from satchel.cli.output import fail


def conformance(
    driver: Annotated[
        str | None,
        typer.Option(
            metavar="DRIVER",
            help="A shipped driver's name, or the command line of any other driver.",
        ),
    ] = None,
    cases: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="A case file (default: the published cases, then satchel's)."
        ),
    ] = None,
    api: Annotated[
        str | None,
        typer.Option(metavar="URL", help="A running deployment (default: start one of our own)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SATCHEL_TOKEN", metavar="TOKEN", help="The token for --api (env SATCHEL_TOKEN)."
        ),
    ] = None,
    list_drivers: Annotated[
        bool, typer.Option("--list-drivers", help="List the shipped drivers.")
    ] = False,
) -> None:
    """Run the conformance suite against a driver: one JSON line per case on stdout."""
    from satchel.conformance.drivers import SHIPPED, driver_command, shipped

    if list_drivers:
        for listed in SHIPPED:
            typer.echo(f"{listed.name}\t{listed.about}")
        return
    if not driver:
        fail("--driver is required: a shipped driver's name or a command line", 2)
    if api and not token:
        fail("--api needs a token: pass --token or set SATCHEL_TOKEN", 2)
    require("server", "conformance")
    if (framework := shipped(driver)) is not None and framework.extra is not None:
        require(framework.extra, f"conformance --driver {framework.name}")
    from satchel.conformance.cases import CasesError, load_cases
    from satchel.conformance.deployment import started
    from satchel.conformance.runner import CaseResult, check_api, check_driver, run_suite

    errors = Console(stderr=True)
    try:
        command = driver_command(driver)
        check_driver(driver, command)
        chosen = load_cases(cases)
        if api and token:
            check_api(api, token)
    except (CasesError, ValueError) as exc:
        fail(str(exc), 2)

    def show(result: CaseResult) -> None:
        typer.echo(json.dumps(result.as_dict()))
        mark = Text("pass", style="green") if result.passed else Text("FAIL", style="red")
        errors.print(Text.assemble(mark, " ", result.case))
        for failure in result.failures:
            errors.print(f"     {failure}", highlight=False, markup=False)

    if api and token:
        results = run_suite(command, chosen, api=api, token=token, on_result=show)
    else:
        with started() as deployment:
            results = run_suite(
                command, chosen, api=deployment.api, token=deployment.token, on_result=show
            )
    failed = [r.case for r in results if not r.passed]
    summary = f"{len(results) - len(failed)} of {len(results)} case(s) passed"
    errors.print(Text(summary, style="red" if failed else "green"))
    if failed:
        errors.print("failed: " + ", ".join(failed), highlight=False, markup=False)
        raise typer.Exit(1)
