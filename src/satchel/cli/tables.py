"""Tables that fit the terminal by showing fewer columns, never by breaking a value.

Ids, prefixes and names in a table are what a user copies into the next command, so a cell is
never folded or cut: the columns are listed most important first, and the last ones are left
out until the rest fits the terminal's width. A right-aligned column (a figure) keeps its
alignment: once the columns fit, nothing in it is cut.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def fitted(table: Table, console: Console) -> Table:
    """`table` with every cell on one line, without the trailing columns that do not fit."""
    for column in table.columns:
        column.no_wrap = True
        column.overflow = "crop" if column.justify == "right" else "ignore"
    unbounded = console.options.update_width(10**6)
    while len(table.columns) > 1 and console.measure(table, options=unbounded).maximum > (
        console.width
    ):
        table.columns.pop()
    return table
