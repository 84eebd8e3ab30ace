"""A real browser for page tests: Debian's `chromium` driven by Playwright, with every request the
page makes recorded and anything that would leave the machine refused.

`scripts/bootstrap` installs the browser (`apt-get install chromium`); a test never downloads one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, Route, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "images"
"""Where `SATCHEL_SCREENSHOTS=1` makes the tests write the docs' screenshots."""


@dataclass
class Watched:
    """A page and what it did: every request's URL, console lines, dialogs, uncaught errors."""

    page: Page
    requests: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_only_loopback(self) -> None:
        """Every request the page made went to this machine, and none was refused."""
        assert self.requests, "the page made no request at all"
        outside = [url for url in self.requests if not is_local(url)]
        assert not outside and not self.refused, (outside, self.refused)

    def assert_no_script_ran(self) -> None:
        """No dialog opened, nothing was written to the console and no error was thrown."""
        assert not self.dialogs, self.dialogs
        assert not self.console, self.console
        assert not self.errors, self.errors


def is_local(url: str) -> bool:
    """A URL of this machine: loopback, a file, or one with no network at all (`data:`, `blob:`,
    `about:`)."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "file"):
        return True
    return parts.scheme in ("http", "https", "ws") and (parts.hostname or "") in LOOPBACK_HOSTS


def screenshot(page: Page, name: str, tmp_path: Path) -> Path:
    """A full-page PNG of `page`: under `tmp_path`, and into docs/images/ when
    `SATCHEL_SCREENSHOTS=1`."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000, "the screenshot is empty"
    if os.environ.get("SATCHEL_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / path.name)
    return path


@pytest.fixture
def browser() -> Iterator[Browser]:
    """A browser for one test: Playwright's sync API keeps an event loop on the thread while it
    runs, so it is stopped after each test and leaves the next test's asyncio free."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no browser at {CHROMIUM}: run `bash scripts/bootstrap` (as root it installs "
            "Debian's chromium; otherwise `apt-get install chromium`)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=list(CHROMIUM_FLAGS), headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    """A fresh browser context and page; requests off this machine are aborted and noted."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen = Watched(page)

    def route(found: Route) -> None:
        url = found.request.url
        seen.requests.append(url)
        if is_local(url):
            found.continue_()
        else:
            seen.refused.append(url)
            found.abort("blockedbyclient")

    def dialog(opened: Dialog) -> None:
        seen.dialogs.append(opened.message)
        opened.dismiss()

    def console(message: ConsoleMessage) -> None:
        seen.console.append(f"{message.type}: {message.text}")

    context.route("**/*", route)
    page.on("dialog", dialog)
    page.on("console", console)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    try:
        yield seen
    finally:
        context.close()
