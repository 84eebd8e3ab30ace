"""The `satchel` command: thin wrappers that call the parts."""

import typer

app = typer.Typer(help="satchel: what an LLM agent carries from one model call to the next.")


def main() -> None:
    app()
