"""The listings of `satchel run --list-games` and `--list-configs`."""

from __future__ import annotations

from rich.table import Table

from satchel.harness.command import RunOptions, profiles_of
from satchel.harness.environments import Arena


def games_table(options: RunOptions) -> Table:
    """The local games with their levels and baselines."""
    arena = Arena(online=False, environments_dir=options.environments_dir)
    table = Table(title="local games")
    for column in ("game", "title", "levels", "baseline actions", "tags"):
        table.add_column(column, no_wrap=column == "game", overflow="fold")
    for info in arena.games():
        table.add_row(
            info.game_id,
            info.title,
            str(len(info.baseline_actions)),
            ", ".join(map(str, info.baseline_actions)),
            ", ".join(info.tags),
        )
    return table


def configs_table(options: RunOptions) -> Table:
    """The profiles with their adapter and strategy."""
    table = Table(title="profiles")
    for column in ("profile", "adapter", "strategy", "compaction", "model"):
        table.add_column(column, no_wrap=column == "profile", overflow="fold")
    for profile_id, profile in sorted(profiles_of(options.profiles).items()):
        compaction: str = profile.runtime.compaction.strategy
        if "context_management" in profile.request:
            compaction = "inline (request)"
        table.add_row(
            profile_id,
            profile.runtime.adapter,
            profile.runtime.strategy,
            compaction,
            str(profile.request.get("model", "")),
        )
    return table
