"""The listings of `satchel run --list-games` and `--list-configs`.

Columns come most important first: a narrow terminal shows the leading ones whole and leaves the
rest out.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from satchel.harness.command import RunOptions, profiles_of
from satchel.harness.environments import Arena
from satchel.providers.kit.spec import INLINE_COMPACTION


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, box=None, pad_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    return table


def _add_row(table: Table, *cells: str) -> None:
    """A row whose cells are text as they are: brackets in a profile id are not markup."""
    table.add_row(*(Text(cell) for cell in cells))


def games_table(options: RunOptions) -> Table:
    """The local games with their levels and baselines."""
    arena = Arena(online=False, environments_dir=options.environments_dir)
    table = _table("local games", ("game", "title", "levels", "baseline actions", "tags"))
    for info in arena.games():
        _add_row(
            table,
            info.game_id,
            info.title,
            str(len(info.baseline_actions)),
            ", ".join(map(str, info.baseline_actions)),
            ", ".join(info.tags),
        )
    return table


def configs_table(options: RunOptions) -> Table:
    """The profiles with their adapter, model, strategy and compaction."""
    table = _table("profiles", ("profile", "adapter", "model", "strategy", "compaction"))
    for profile_id, profile in sorted(profiles_of(options.profiles).items()):
        compaction: str = profile.runtime.compaction.strategy
        if "context_management" in profile.request:
            compaction = INLINE_COMPACTION
        _add_row(
            table,
            profile_id,
            profile.runtime.adapter,
            str(profile.request.get("model", "")),
            profile.runtime.strategy,
            compaction,
        )
    return table
