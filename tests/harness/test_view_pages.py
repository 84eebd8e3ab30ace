"""The pages of `satchel view` in a real browser, on a real sweep's records: the runs page lists,
sorts and filters the runs; the run page steps through a run with the keyboard, drawing each
step's frame and naming its action; a compaction point shows its summary; a model answer holding
markup shows as typed and runs nothing; the report page draws its plots; nothing leaves the
machine."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from browser_kit import Watched, screenshot
from harness.test_sweeps import environment
from harness.view_kit import GAMES, MARKUP, PLAIN, TRICKY, make_runs, run_folders, viewing
from satchel.harness.view.replay import digest

PALETTE = (
    "#ffffff", "#cccccc", "#999999", "#666666", "#333333", "#000000", "#e53aa3", "#ff7bcc",
    "#f93c31", "#1e93ff", "#88d8f1", "#ffdc00", "#ff851b", "#921231", "#4fcc30", "#a356d6",
)  # fmt: skip
"""ARC-AGI-3's colours as the official toolkit draws them (arc_agi.rendering.COLOR_MAP)."""
CELL = 8  # the run page draws a 64x64 frame on a 512 pixel canvas


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_runs(tmp_path_factory.mktemp("view-pages"))


@pytest.fixture(scope="module")
def url(runs_dir: Path) -> Iterator[str]:
    with viewing(runs_dir) as (address, _):
        yield address


def steps_of(runs_dir: Path, folder: str) -> list[dict[str, Any]]:
    return [
        json.loads(path.read_text("utf-8"))
        for path in sorted((runs_dir / folder).glob("step_*.json"))
    ]


def opened(watched: Watched, address: str) -> Page:
    page = watched.page
    answer = page.goto(address)
    assert answer is not None and answer.ok, address
    page.wait_for_selector("body[data-ready='true']")
    return page


def rows(page: Page) -> list[list[str]]:
    return [
        [cell.inner_text() for cell in row.query_selector_all("td")]
        for row in page.query_selector_all("#runs tbody tr")
    ]


def test_the_runs_page_lists_sorts_and_filters_the_runs(
    watched: Watched, url: str, runs_dir: Path, tmp_path: Path
) -> None:
    page = opened(watched, url)
    listed = rows(page)
    assert {(row[1], row[0]) for row in listed} == set(run_folders(runs_dir))
    assert all(row[2] == "WIN" for row in listed)
    assert "configs: plain, tricky; games: lamp-0001, tapx-0001" in page.inner_text("#sweep")

    page.click("th[data-key='actions']")
    ascending = [int(row[4]) for row in rows(page)]
    assert ascending == sorted(ascending) and len(set(ascending)) > 1
    page.click("th[data-key='actions']")
    assert [int(row[4]) for row in rows(page)] == sorted(ascending, reverse=True)

    page.select_option("#filter-game", "tapx-0001")
    assert {row[0] for row in rows(page)} == {"tapx-0001"} and len(rows(page)) == 2
    page.select_option("#filter-config", TRICKY)
    assert [(row[0], row[1]) for row in rows(page)] == [("tapx-0001", TRICKY)]
    page.select_option("#filter-game", "")
    assert {row[1] for row in rows(page)} == {TRICKY} and len(rows(page)) == len(GAMES)
    page.select_option("#filter-config", "")
    screenshot(page, "view-runs", tmp_path)
    watched.assert_only_loopback()
    watched.assert_no_script_ran()


def shown(page: Page) -> tuple[int, str, str]:
    """The step shown, its frame's digest and its action text."""
    canvas = page.locator("#frame")
    step = int(canvas.get_attribute("data-step") or 0)
    return step, canvas.get_attribute("data-digest") or "", page.inner_text("#action")


def expected(step: dict[str, Any]) -> tuple[int, str, str]:
    action = step["action"]
    at = f" at x={action['x']}, y={action['y']}" if action["x"] is not None else ""
    return step["step"], digest(step["observation"]["frames"][-1]), f"{action['name']}{at}"


def pixels(page: Page, points: list[tuple[int, int]]) -> list[str]:
    """The colours of the frame canvas at these pixels, as #rrggbb (read back once: a canvas
    read back often makes the browser warn on the console)."""
    colours: list[str] = page.evaluate(
        """(points) => {
            const canvas = document.getElementById("frame");
            const { width, height } = canvas;
            const data = canvas.getContext("2d").getImageData(0, 0, width, height).data;
            const hex = (v) => v.toString(16).padStart(2, "0");
            const at = (x, y) => (y * width + x) * 4;
            const colour = (x, y) => [0, 1, 2].map((i) => hex(data[at(x, y) + i])).join("");
            return points.map(([x, y]) => "#" + colour(x, y));
        }""",
        points,
    )
    return colours


def test_the_run_page_steps_with_the_keyboard_drawing_each_frame_and_action(
    watched: Watched, url: str, runs_dir: Path
) -> None:
    folder = run_folders(runs_dir)[(PLAIN, "tapx-0001")]
    steps = steps_of(runs_dir, folder)
    page = opened(watched, f"{url}run/{folder}")
    assert shown(page) == expected(steps[0])
    frame = steps[0]["observation"]["frames"][-1]
    cells = [(0, 0), (20, 30), (63, 63), (40, 10)]
    action = steps[0]["action"]
    centres = [(x * CELL + CELL // 2, y * CELL + CELL // 2) for x, y in cells]
    mark = (action["x"] * CELL - 4, action["y"] * CELL + CELL // 2)  # the outer white square
    drawn = pixels(page, [*centres, mark])
    assert drawn == [*(PALETTE[int(frame[y][x], 16)] for x, y in cells), "#ffffff"]

    page.keyboard.press("ArrowRight")
    assert shown(page) == expected(steps[1])
    page.keyboard.press("ArrowRight")
    assert shown(page) == expected(steps[2])
    page.keyboard.press("ArrowLeft")
    assert shown(page) == expected(steps[1])
    page.keyboard.press("End")
    assert shown(page) == expected(steps[-1])
    page.keyboard.press("Home")
    assert shown(page) == expected(steps[0])
    assert len({expected(step)[1] for step in steps}) > 1  # the frames differ from step to step
    href = page.get_attribute("#step-json", "href")
    assert href == f"/run/{folder}/step_001.json"
    assert "1 of" in page.inner_text("#position")
    watched.assert_only_loopback()
    watched.assert_no_script_ran()


def test_markup_in_an_answer_shows_as_typed_and_a_compaction_shows_its_summary(
    watched: Watched, url: str, runs_dir: Path, tmp_path: Path
) -> None:
    folder = run_folders(runs_dir)[(TRICKY, "lamp-0001")]
    steps = steps_of(runs_dir, folder)
    page = opened(watched, f"{url}run/{folder}")
    assert page.inner_text("#answer").startswith(MARKUP)
    assert page.inner_text("#reasoning") == f"{MARKUP} thinking"
    assert page.locator("img").count() == 0 and page.locator("#details script").count() == 0
    assert page.inner_text("#retries") == "attempt 1: transient"

    compactions = [
        json.loads(path.read_text("utf-8"))
        for path in sorted((runs_dir / folder).glob("compaction_*.json"))
    ]
    assert compactions
    point = compactions[0]
    assert page.locator("#compaction").is_hidden()
    for _ in range(point["step_before"]):
        page.keyboard.press("ArrowRight")
    assert shown(page) == expected(steps[point["step_before"]])
    assert page.locator("#compaction").is_visible()
    assert page.inner_text("#compaction-summary") == point["summary"]
    assert point["summary"] in page.inner_text("#compaction-list")

    animated = next(i for i, step in enumerate(steps) if len(step["observation"]["frames"]) > 1)
    page.keyboard.press("Home")
    for _ in range(animated):
        page.keyboard.press("ArrowRight")
    thumbnails = page.locator("#thumbnails canvas")
    assert thumbnails.count() == len(steps[animated]["observation"]["frames"])
    thumbnails.first.click()
    assert page.get_attribute("#frame", "data-digest") == digest(
        steps[animated]["observation"]["frames"][0]
    )
    screenshot(page, "view-run", tmp_path)
    watched.assert_only_loopback()
    watched.assert_no_script_ran()


def test_the_report_page_draws_its_three_plots_offline(
    watched: Watched, url: str, tmp_path: Path
) -> None:
    page = watched.page
    answer = page.goto(f"{url}report")
    assert answer is not None and answer.ok
    assert page.locator("svg").count() == 3
    assert all(
        box is not None and box["width"] > 100
        for box in map(lambda svg: svg.bounding_box(), page.locator("svg").all())
    )
    assert PLAIN in page.inner_text("body") and TRICKY in page.inner_text("body")
    screenshot(page, "view-report", tmp_path)
    watched.assert_only_loopback()
    watched.assert_no_script_ran()


def test_the_report_file_opens_from_disk_with_its_plots_and_fetches_nothing(
    watched: Watched, runs_dir: Path, tmp_path: Path
) -> None:
    page_file = tmp_path / "report.html"
    made = subprocess.run(
        [sys.executable, "-m", "satchel", "report", str(runs_dir), "--html", str(page_file)],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    answer = watched.page.goto(page_file.as_uri())
    assert answer is not None and answer.ok
    assert watched.page.locator("svg").count() == 3
    assert PLAIN in watched.page.inner_text("body")
    assert watched.requests == [page_file.as_uri()]  # the page itself, and nothing more
    watched.assert_no_script_ran()
