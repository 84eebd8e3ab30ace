"""Theme reports stop for new turns: a turn stored while reports are being written is formed
and embedded before the rest of the reports."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from formation_kit import claim, observe, rows, with_model
from memory_kit import Letters, LiveServer
from model_server import ModelServer, Reply

from satchel.memory.config import MemorySettings
from satchel.memory.formation.reports import REPORT_PROMPT
from satchel.memory.formation.worker import Worker

ANN = "person-ann"
THEMES = {
    "garden": [
        claim("tomatoes", "located_in", "raised bed", "The tomatoes grow in the raised bed."),
        claim("compost", "related_to", "raised bed", "The compost feeds the raised bed."),
    ],
    "work": [
        claim("Dana", "works_at", "Acme Corp", "Dana works at Acme Corp."),
        claim("Dana", "manages", "billing service", "Dana manages the billing service."),
    ],
    "music": [
        claim("Eve", "plays", "cello", "Eve plays the cello."),
        claim("Eve", "member_of", "city orchestra", "Eve is a member of the city orchestra."),
    ],
}


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def test_a_turn_stored_while_reports_are_written_is_formed_before_the_other_reports(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    model.reply(*({"claims": claims} for claims in THEMES.values()))
    for claims in THEMES.values():
        observe(http, ANN, ("user", " ".join(c["quote"] for c in claims)))
    asked: list[str] = []

    def respond(body: dict[str, Any]) -> Reply:
        system, facts = (m["content"] for m in body["messages"][:2])
        if system != REPORT_PROMPT:
            return {"claims": []}
        if not asked:  # the first report is being written: a new turn arrives
            observe(http, ANN, ("user", "Late news: I moved to Galway."))
        asked.append(facts)
        return {"title": facts.split(" ")[0], "summary": facts}

    model.respond = respond
    settings = with_model(MemorySettings(form_on_store=False), model)
    seen: list[tuple[int, int, int]] = []  # after each pass: formed, embedded, reports
    stopped: list[bool] = []  # each pass: whether its reports stopped for the new turn

    async def run() -> None:
        worker = Worker(url, settings, embedder=Letters())
        try:
            for _ in range(20):
                tally = await worker.run_once()
                seen.append(progress(url))
                stopped.append(tally.stopped == 1)
                if tally.work == 0:
                    return
        finally:
            await worker.close()
        raise AssertionError("the worker still had work after 20 passes")

    asyncio.run(run())
    reports = seen[-1][2]
    assert reports == len(THEMES)
    late = len(THEMES)  # the new turn's offset
    first = next(n for n, (formed, _, _) in enumerate(seen) if formed >= late)
    assert seen[first][1] >= late  # formed and embedded in the same pass
    assert seen[first][2] < reports  # before the other reports were written
    assert stopped[first - 1]  # the pass before stopped its reports for it


def progress(url: str) -> tuple[int, int, int]:
    """How far turns are formed and embedded, and how many reports there are."""
    ((formed, embedded, reports),) = rows(
        url,
        "SELECT coalesce(p.formed, -1), coalesce(g.vectors_through, -1),"
        " (SELECT count(*) FROM reports) FROM projects p"
        " LEFT JOIN passage_progress g ON g.project_id = p.id WHERE p.name = 'alpha'",
    )
    return formed, embedded, reports
