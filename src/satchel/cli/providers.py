"""`satchel providers`: the registered adapters with their descriptors and example profiles."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from satchel.cli.output import console


def providers(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per adapter.")] = False,
) -> None:
    """List every registered provider adapter with its descriptor and its example profiles.

    Play one with `satchel run --config PROFILE`.
    """
    from satchel.providers import REGISTRY, example_profiles

    descriptors = list(REGISTRY)
    examples: dict[str, list[str]] = {}
    for profile in example_profiles().values():
        examples.setdefault(profile.runtime.adapter, []).append(profile.id)
    if as_json:
        for descriptor in descriptors:
            listed = examples.get(descriptor.adapter_id, [])
            typer.echo(json.dumps({**descriptor.to_dict(), "example_profiles": listed}))
        return
    for d in descriptors:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim")
        table.add_column()
        table.add_row("provider", d.provider)
        table.add_row("API surface", d.api_surface)
        table.add_row("implementation", d.implementation_path)
        table.add_row("version", d.version)
        table.add_row("strategies", ", ".join(d.strategies))
        table.add_row("compaction", ", ".join(d.compaction))
        table.add_row("review status", d.review_status)
        table.add_row("example profiles", ", ".join(examples.get(d.adapter_id, [])) or "none")
        console.print(Text(d.adapter_id, style="bold"), soft_wrap=True)
        console.print(table, "")
