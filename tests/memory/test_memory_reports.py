"""Theme reports: one per community of a themed corpus, written by the formation model or
extractively, embedded with the real embedder, ranked first by recall and report candidates for a
question about their theme, removed when a fact changes and written again, erased with their
source."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from formation_kit import claim, observe, rows, with_model
from memory_kit import LiveServer
from model_server import Failure, ModelServer, Reply
from records_kit import api
from taisce.client import Client

from satchel.memory.config import MemorySettings
from satchel.memory.formation.reports import EXTRACTIVE, PROMPT_ID, REPORT_PROMPT
from satchel.memory.formation.worker import Worker
from satchel.memory.passages.embedder import EmbedderUnavailable, load_embedder

ANN = "person-ann"
GARDEN = (
    "The tomatoes grow in the raised bed. The raised bed is part of the garden."
    " The compost feeds the raised bed."
)
WORK = (
    "Dana works at Acme Corp. Dana manages the billing service."
    " The billing service depends on Postgres."
)
GARDEN_CLAIMS = [
    claim("tomatoes", "located_in", "raised bed", "The tomatoes grow in the raised bed."),
    claim("raised bed", "part_of", "garden", "The raised bed is part of the garden."),
    claim("compost", "related_to", "raised bed", "The compost feeds the raised bed."),
]
WORK_CLAIMS = [
    claim("Dana", "works_at", "Acme Corp", "Dana works at Acme Corp."),
    claim("Dana", "manages", "billing service", "Dana manages the billing service."),
    claim("billing service", "depends_on", "Postgres", "The billing service depends on Postgres."),
]
GARDEN_REPORT = {
    "title": "Vegetable gardening",
    "summary": "Tomatoes grow in a raised bed of the garden, fed with compost.",
}
WORK_REPORT = {
    "title": "Job at a software company",
    "summary": "Dana is employed at Acme Corp and manages the billing service on Postgres.",
}


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def reporting(model: ModelServer, *, garden_fails: bool = False) -> None:
    """The model answers report requests by theme (the garden's with a failure if asked)."""

    def respond(body: dict[str, Any]) -> Reply:
        system, facts = (m["content"] for m in body["messages"][:2])
        if system != REPORT_PROMPT:
            return {"claims": []}
        if "tomatoes" in facts:
            return Failure(500) if garden_fails else GARDEN_REPORT
        if "Acme" in facts and "Postgres" in facts:
            return WORK_REPORT
        return {"title": f"Detail: {facts.splitlines()[0]}", "summary": facts}

    model.respond = respond


def themed_corpus(http: httpx.Client, model: ModelServer) -> list[dict[str, Any]]:
    model.reply({"claims": GARDEN_CLAIMS}, {"claims": WORK_CLAIMS})
    return [observe(http, ANN, ("user", GARDEN)), observe(http, ANN, ("user", WORK))]


def settle(url: str, settings: MemorySettings, embedder: Any = None) -> int:
    """Worker passes with the real embedder (or `embedder`) until one does nothing; the reports
    they wrote (a pass writes reports only when nothing else was left to do)."""

    async def run() -> int:
        worker = Worker(url, settings, embedder=embedder or load_embedder())
        written = 0
        try:
            for _ in range(20):
                tally = await worker.run_once()
                written += tally.reports
                if tally.work == 0:
                    return written
        finally:
            await worker.close()
        raise AssertionError("the worker still had work after 20 passes")

    return asyncio.run(run())


def stored(url: str) -> dict[str, tuple[str, str]]:
    """Title to (written_by, embedder) of every report of the coarsest level (one per theme)."""
    found = rows(
        url, "SELECT title, written_by, coalesce(embedder, '') FROM reports WHERE level = 0"
    )
    return {title: (author, embedder) for title, author, embedder in found}


def recall(http: httpx.Client, question: str, **controls: Any) -> dict[str, Any]:
    answer = http.post("/v1/recalls", json={"question": question, **controls})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_a_themed_corpus_gets_a_report_per_theme_that_recall_and_candidates_rank_first(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    themed_corpus(http, model)
    reporting(model)
    url = live_server.database_url
    # Two themes, the job's in two finer communities (Dana at Acme; the service on Postgres).
    assert settle(url, with_model(MemorySettings(), model)) == 4
    identity = load_embedder().identity
    assert stored(url) == {
        GARDEN_REPORT["title"]: (f"{MODEL_ID} {PROMPT_ID}", identity),
        WORK_REPORT["title"]: (f"{MODEL_ID} {PROMPT_ID}", identity),
    }
    for question, title in [
        ("Which vegetables am I growing at home?", GARDEN_REPORT["title"]),
        ("What is my employer and what do I do at my job?", WORK_REPORT["title"]),
    ]:
        bundle = recall(http, question, themes=True, surfaces=["reports"])
        assert bundle["reports"][0]["title"] == title, bundle["reports"]
        first = bundle["reports"][0]
        assert first["level"] == 0 and "parent" not in first and first["sources"]
        assert bundle["characters"] == sum(
            len(r["title"]) + len(r["summary"]) for r in bundle["reports"]
        )
        with api(live_server, read_only=True) as reader:
            page = reader.post("/v1/reports/candidates", json={"question": question, "limit": 5})
        assert page.status_code == 200, page.text
        body = page.json()
        assert body["candidates"][0]["title_preview"] == title
        assert (body["target_count"], body["build_state"], body["approximate"]) == (
            4,
            "ready",
            False,
        )
        assert body["candidates"][0]["title_bytes"] == len(title.encode())
        assert not body["candidates"][0]["summary_truncated"]

    async def through_taisce() -> dict[str, Any]:
        async with Client(live_server.base_url, live_server.token("alpha")) as taisce:
            return await taisce.recall(question="Which vegetables am I growing?", themes=True)

    assert asyncio.run(through_taisce())["reports"][0]["title"] == GARDEN_REPORT["title"]
    # A recall of one person withholds reports; another project sees none.
    withheld = recall(http, "garden?", data_subject_id=ANN, themes=True, surfaces=["reports"])
    assert withheld["reports"] == [] and withheld["degraded"] == ["reports_withheld_for_subject"]
    with api(live_server, "beta") as other:
        assert recall(other, "vegetables?", themes=True)["reports"] == []
        page = other.post("/v1/reports/candidates", json={"question": "vegetables?"})
        assert page.json()["candidates"] == [] and page.json()["target_count"] == 0


MODEL_ID = "scripted-extractor"


def test_a_failing_model_leaves_that_report_extractive_and_writes_the_others(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    themed_corpus(http, model)
    reporting(model, garden_fails=True)
    url = live_server.database_url
    settle(url, with_model(MemorySettings(), model))
    found = stored(url)
    assert found[WORK_REPORT["title"]][0] == f"{MODEL_ID} {PROMPT_ID}"
    [(title, summary)] = rows(
        url, "SELECT title, summary FROM reports WHERE written_by = %s", EXTRACTIVE
    )  # the job's reports and its children's are the model's
    assert title == "raised bed, compost, garden"
    statements = [f"{c['subject']} {c['predicate']} {c['object']}." for c in GARDEN_CLAIMS]
    assert all(statement in summary for statement in statements)  # each whole
    assert len(summary) == len(" ".join(statements))


def test_a_fact_change_removes_the_report_and_erasure_leaves_none(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    garden, _ = themed_corpus(http, model)
    url = live_server.database_url
    settings = with_model(MemorySettings(), model)
    settle(url, settings)
    assert len(stored(url)) == 2  # no report replies: both extractive
    [(fact_id, version)] = rows(
        url, "SELECT id::text, version::text FROM facts WHERE predicate = 'depends_on'"
    )
    retracted = http.post(
        "/v1/records/retract",
        json={"records": [{"id": fact_id, "expected_version": version}]},
    )
    assert retracted.status_code == 200, retracted.text
    assert list(stored(url)) == ["raised bed, compost, garden"]  # removed at once
    settle(url, settings)
    assert set(stored(url)) == {"raised bed, compost, garden", "Dana, Acme Corp, billing service"}
    exported = http.post("/v1/exports", json={"source_observation_ids": [garden["id"]]})
    assert exported.status_code == 200, exported.text
    [report] = exported.json()["sections"]["report"]
    assert report["title"] == "raised bed, compost, garden" and "embedding" not in report
    erased = http.post("/v1/erasures", json={"source_observation_ids": [garden["id"]]})
    assert erased.status_code == 200, erased.text
    assert (erased.json()["deleted"]["report"], erased.json()["residual"]["report"]) == (1, 0)
    settle(url, settings)
    assert list(stored(url)) == ["Dana, Acme Corp, billing service"]


@pytest.mark.parametrize(
    "body",
    [
        {"question": "What themes point to growth?"},
        {"question": "Growth?", "limit": 32, "candidates": 1000},
        {"question": "Growth?", "limit": 5, "candidates": 0},
    ],
)
def test_report_candidates_answer_a_valid_body_and_need_an_embedder(
    live_server: LiveServer, body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with api(live_server, read_only=True) as reader:
        answer = reader.post("/v1/reports/candidates", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["candidates"] == [] and answer.json()["build_state"] == "ready"
    monkeypatch.setenv("SATCHEL_EMBEDDINGS_BASE_URL", "https://refused.example.com/v1")
    monkeypatch.setenv("SATCHEL_EMBEDDINGS_MODEL", "m")
    with api(live_server, read_only=True) as reader:
        answer = reader.post("/v1/reports/candidates", json=body)
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "report_candidates_unavailable"
        bundle = recall(reader, "growth?", surfaces=["reports"], themes=True)
    assert bundle["reports"] == [] and bundle["degraded"] == ["reports"]


class Unavailable:
    """An embedder that cannot run (a stopped embedding endpoint)."""

    identity = "test/unavailable"

    def embed(self, texts: list[str]) -> Any:
        raise EmbedderUnavailable("the embedding endpoint is down")


def test_reports_written_without_an_embedder_get_their_vectors_on_a_later_pass(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    themed_corpus(http, model)
    url = live_server.database_url
    settings = with_model(MemorySettings(), model)

    assert settle(url, settings, Unavailable()) == 4  # no report replies: all extractive
    written = rows(url, "SELECT id::text, embedder FROM reports ORDER BY id")
    assert [embedder for _, embedder in written] == [None] * 4
    page = http.post("/v1/reports/candidates", json={"question": "garden?"}).json()
    assert (page["build_state"], page["candidates"]) == ("building", [])
    settle(url, settings)
    identity = load_embedder().identity
    assert rows(url, "SELECT id::text, embedder FROM reports ORDER BY id") == [
        (report_id, identity) for report_id, _ in written
    ]  # the same reports, not written again
    page = http.post("/v1/reports/candidates", json={"question": "garden?"}).json()
    assert page["build_state"] == "ready"
    assert page["candidates"][0]["title_preview"] == "raised bed, compost, garden"
