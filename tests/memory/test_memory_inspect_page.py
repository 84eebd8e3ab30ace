"""The memory inspector in a real browser against the real service on real PostgreSQL: signing
in (a wrong token refused), a subject's turns, facts with evidence and history after a
correction, segments, passage search, freshness and parked turns; stored markup shown as text;
another project's token shows nothing; the token only in session storage, never in a page or a
log line; every request on loopback."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from formation_kit import claim, observe, passes, with_model
from memory_kit import LiveServer
from model_server import Failure, ModelServer, Reply, text_of
from playwright.sync_api import Page, expect

from browser_kit import Watched, screenshot
from satchel.memory.config import MemorySettings
from satchel.memory.formation.segments import SUMMARY_PROMPT
from satchel.memory.logs import ACCESS_LOGGER

ANN = "person-ann"
MARKUP = "<script>console.log(1)</script><img src=x onerror=alert(1)>"
WRONG_TOKEN = "tsk_" + "A" * 43


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def scripted(body: dict[str, Any]) -> Reply:
    """Facts from the Cork turn, a failure for the SECRET one, a fixed summary for segments."""
    text = text_of(body)
    if body["messages"][0]["content"] == SUMMARY_PROMPT:
        return "Ann talked about watering her garden."
    if "SECRET" in text:
        return Failure(503)
    if "Cork" in text:
        return {"claims": [claim("Ann", "lives_in", "Cork", "I live in Cork")]}
    return {"claims": []}


def ann_remembered(live_server: LiveServer, http: httpx.Client, model: ModelServer) -> None:
    """Ann's turns formed (a fact, a segment), a parked turn, then her fact corrected."""
    observe(http, ANN, ("user", "I live in Cork."), ("assistant", "Noted: Cork."))
    observe(http, ANN, ("user", MARKUP))
    for day in range(15):
        observe(http, ANN, ("user", f"On day {day} I watered the garden."))
    observe(http, "person-zed", ("user", "SECRET launch plan"))
    model.respond = scripted
    settings = with_model(MemorySettings(), model, formation_attempts=1)
    # Playwright's sync API holds an event loop in this thread: the worker runs in another.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(passes, live_server.database_url, settings, model, 3).result()
    [record] = http.post("/v1/records/list", json={"data_subject_id": ANN}).json()["records"]
    corrected = http.post(
        "/v1/records/correct",
        json={
            "records": [
                {
                    "id": record["id"],
                    "expected_version": record["version"],
                    "object": "Galway",
                    "statement": "Ann lives in Galway.",
                }
            ]
        },
    )
    assert corrected.status_code == 200, corrected.text


def sign_in(page: Page, token: str) -> None:
    page.fill("#token", token)
    page.click("#signin-form button")


def open_subject(page: Page, subject: str) -> None:
    page.fill("#subject-id", subject)
    page.click("#open-form button")


def test_the_inspector_shows_a_subject_and_nothing_of_another_project(
    live_server: LiveServer,
    http: httpx.Client,
    model: ModelServer,
    watched: Watched,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    ann_remembered(live_server, http, model)
    alpha = live_server.token("alpha", read_only=True)
    beta = live_server.token("beta", read_only=True)
    page = watched.page
    page.goto(f"{live_server.base_url}/inspect")
    screenshot(page, "inspect-signin", tmp_path)

    sign_in(page, alpha)
    expect(page.locator("#subjects")).to_contain_text(ANN)
    expect(page.locator("#freshness")).to_contain_text("parked")
    expect(page.locator("#freshness")).to_contain_text("none running")
    expect(page.locator("#parked tbody tr")).to_have_count(1)
    expect(page.locator("#parked tbody")).to_contain_text("status 503")
    assert "SECRET" not in page.inner_text("#parked") and "zed" not in page.inner_text("#parked")

    page.click(f"#subjects button:has-text('{ANN}')")
    turns = page.locator("#turns li.turn")
    expect(turns).to_have_count(10)
    expect(turns.nth(0)).to_contain_text("I live in Cork.")
    expect(turns.nth(0).locator(".message")).to_have_count(2)
    expect(turns.nth(1).locator(".text")).to_have_text(MARKUP)
    expect(turns.nth(2)).to_contain_text("On day 0 I watered the garden.")
    page.click("#more-turns")
    expect(turns).to_have_count(17)

    facts = page.locator("#facts li.fact")
    expect(facts).to_have_count(2)
    cork = facts.filter(has_text="retracted")
    expect(cork.locator(".quote")).to_have_text("I live in Cork")
    galway = facts.filter(has_text="Ann lives in Galway.")
    expect(galway).to_contain_text("current")
    cork.locator("button:has-text('History')").click()
    expect(cork.locator(".history")).to_contain_text("corrected by")
    expect(page.locator("#segments")).to_contain_text("Ann talked about watering her garden.")
    expect(page.locator("#segments")).to_contain_text("level 1 · offsets 0\u20137 · 8 turns")

    page.fill("#question", "Cork")
    page.click("#search-form button")
    expect(page.locator("#passages")).to_contain_text("I live in Cork.")
    page.locator("#parked").scroll_into_view_if_needed()
    screenshot(page, "inspect-subject", tmp_path)

    assert page.evaluate("sessionStorage.getItem('satchel.inspect.token')") == alpha
    assert page.evaluate("localStorage.length") == 0
    assert page.context.cookies() == []
    assert alpha not in page.content()

    page.click("#signout")
    expect(page.locator("#signin")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0

    sign_in(page, beta)
    expect(page.locator("#subjects")).not_to_contain_text(ANN)
    open_subject(page, ANN)
    expect(page.locator("#turns")).to_contain_text("No turns stored.")
    expect(page.locator("#facts")).to_contain_text("No facts.")
    expect(page.locator("#segments")).to_contain_text("No segments.")
    expect(page.locator("#parked-none")).to_be_visible()
    page.fill("#question", "Cork")
    page.click("#search-form button")
    expect(page.locator("#search-note")).to_have_text("Nothing found.")
    assert "Cork" not in page.inner_text("main")

    watched.assert_only_loopback()
    watched.assert_no_script_ran()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/v1/inspect/turns" in logged
    assert alpha not in logged and beta not in logged and "Bearer" not in logged


def test_a_wrong_token_is_refused_and_nothing_is_shown(
    live_server: LiveServer, http: httpx.Client, watched: Watched
) -> None:
    observe(http, ANN, ("user", "I live in Cork."))
    page = watched.page
    page.goto(f"{live_server.base_url}/inspect")
    sign_in(page, WRONG_TOKEN)
    expect(page.locator("#signin-error")).to_contain_text(
        "Refused: unauthenticated: the bearer token is not accepted"
    )
    expect(page.locator("#inspector")).to_be_hidden()
    assert page.evaluate("sessionStorage.length") == 0
    assert ANN not in page.inner_text("body") and WRONG_TOKEN not in page.content()
    watched.assert_only_loopback()
    # The browser notes the refused request itself; no script wrote anything.
    assert [line for line in watched.console if "status of 401" not in line] == []
    assert not watched.dialogs and not watched.errors
