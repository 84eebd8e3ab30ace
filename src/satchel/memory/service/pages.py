"""Keyset pages: rows read one past the page's size tell whether another page follows."""

from __future__ import annotations

from collections.abc import Sequence


def keyset_page[Row](rows: Sequence[Row], limit: int) -> tuple[list[Row], Row | None]:
    """The page (the first `limit` of `rows`, read with `limit + 1`) and its last row when
    another page follows, the row the next page's cursor names; None on the last page."""
    page = list(rows[:limit])
    return page, page[-1] if len(rows) > limit and page else None
