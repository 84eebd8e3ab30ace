"""Keyset pages: walking a sorted list page by page yields every row once, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from satchel.memory.service.pages import keyset_page


@given(st.lists(st.integers(), unique=True).map(sorted), st.integers(min_value=1, max_value=7))
def test_pages_walked_by_their_cursor_cover_the_rows_once_in_order(
    rows: list[int], limit: int
) -> None:
    walked: list[int] = []
    after: int | None = None
    while True:
        read = [row for row in rows if after is None or row > after][: limit + 1]
        page, last = keyset_page(read, limit)
        assert len(page) <= limit
        walked.extend(page)
        if last is None:
            break
        assert last == page[-1]
        after = last
    assert walked == rows


def test_a_full_last_page_names_no_next_page() -> None:
    assert keyset_page([1, 2, 3], 3) == ([1, 2, 3], None)
    assert keyset_page([1, 2, 3, 4], 3) == ([1, 2, 3], 3)
    assert keyset_page([], 3) == ([], None)
