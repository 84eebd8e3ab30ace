"""A browser test leaves the event loop of the tests after it free."""

from __future__ import annotations

import asyncio

import pytest

from browser_kit import Watched

pytestmark = pytest.mark.xdist_group("browser-then-asyncio")  # one process, in this order


async def _one() -> int:
    return 1


def test_1_a_browser_test_runs(watched: Watched) -> None:
    watched.page.set_content("<p>x</p>")
    assert watched.page.inner_text("p") == "x"


def test_2_asyncio_runs_after_it() -> None:
    assert asyncio.run(_one()) == 1


async def test_3_an_async_test_runs_after_it() -> None:
    assert await _one() == 1
