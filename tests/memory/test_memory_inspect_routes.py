"""The inspector's read routes over real HTTP: a subject's turns in order with their messages,
segments, parked turns by metadata only, the worker's state; bounded pages with cursors; the
token's project only; 401 without a token. And `/inspect` itself: static, no token, its headers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from formation_kit import observe, passes, with_model
from memory_kit import LiveServer
from model_server import Failure, ModelServer, Reply, text_of
from records_kit import api

from satchel.memory.config import MemorySettings

ANN = "person-ann"
SECURITY = {
    "content-security-policy": (
        "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def failing_secret_turns(body: dict[str, Any]) -> Reply:
    return Failure(503) if "SECRET" in text_of(body) else {"claims": []}


def test_turns_come_in_log_order_a_page_at_a_time_with_every_message(
    live_server: LiveServer, http: httpx.Client
) -> None:
    for n in range(5):
        observe(http, ANN, ("user", f"question {n}"), ("assistant", f"answer {n}"))
    observe(http, "person-bob", ("user", "not Ann's"))
    first = post(http, "/v1/inspect/turns", {"data_subject_id": ANN, "limit": 2})
    assert [t["log_offset"] for t in first["turns"]] == [0, 1]
    assert [(m["role"], m["text"]) for m in first["turns"][1]["messages"]] == [
        ("user", "question 1"),
        ("assistant", "answer 1"),
    ]
    assert {t["state"] for t in first["turns"]} == {"waiting"}
    rest = post(
        http, "/v1/inspect/turns", {"data_subject_id": ANN, "after": first["next"]["log_offset"]}
    )
    assert [t["log_offset"] for t in rest["turns"]] == [2, 3, 4]
    assert "next" not in rest
    subjects = post(http, "/v1/inspect/subjects", {"limit": 1})
    assert subjects["subjects"][0]["data_subject_id"] == ANN
    assert subjects["subjects"][0]["turns"] == 5
    after = post(http, "/v1/inspect/subjects", {"after": subjects["next"]["data_subject_id"]})
    assert [s["data_subject_id"] for s in after["subjects"]] == ["person-bob"]


def test_pages_are_bounded(http: httpx.Client) -> None:
    for path, body in (
        ("/v1/inspect/turns", {"data_subject_id": ANN, "limit": 21}),
        ("/v1/inspect/subjects", {"limit": 101}),
        ("/v1/inspect/segments", {"data_subject_id": ANN, "limit": 101}),
        ("/v1/inspect/parked", {"limit": -1}),
        ("/v1/inspect/turns", {"data_subject_id": " "}),
        ("/v1/inspect/turns", {}),
    ):
        answer = http.post(path, json=body)
        assert answer.status_code == 400, (path, body, answer.text)
        assert answer.json()["error"]["code"] in ("invalid_inspection", "invalid_body"), path


def test_another_projects_token_sees_nothing_and_no_token_is_refused(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    observe(http, ANN, ("user", "I like tea."))
    observe(http, ANN, ("user", "SECRET plan"))
    model.respond = failing_secret_turns
    passes(
        live_server.database_url, with_model(MemorySettings(), model, formation_attempts=1), model
    )
    assert post(http, "/v1/inspect/parked", {})["parked"]
    with api(live_server, "beta", read_only=True) as beta:
        assert post(beta, "/v1/inspect/turns", {"data_subject_id": ANN}) == {"turns": []}
        assert post(beta, "/v1/inspect/segments", {"data_subject_id": ANN}) == {"segments": []}
        assert post(beta, "/v1/inspect/subjects", {}) == {"subjects": []}
        assert post(beta, "/v1/inspect/parked", {}) == {"parked": []}
    with httpx.Client(base_url=live_server.base_url) as anonymous:
        for path in ("/v1/inspect/turns", "/v1/inspect/subjects", "/v1/inspect/parked"):
            answer = anonymous.post(path, json={"data_subject_id": ANN})
            assert answer.status_code == 401, path
            assert answer.json()["error"]["code"] == "unauthenticated"
        assert anonymous.post("/v1/inspect/worker", json={}).status_code == 401


def test_a_parked_turn_is_listed_by_metadata_only(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    observe(http, ANN, ("user", "I like tea."))
    parked = observe(http, ANN, ("user", "SECRET plan for the launch"))
    model.respond = failing_secret_turns
    passes(
        live_server.database_url, with_model(MemorySettings(), model, formation_attempts=1), model
    )
    answer = http.post("/v1/inspect/parked", json={})
    [turn] = answer.json()["parked"]
    assert turn["id"] == parked["id"] and turn["log_offset"] == 1
    assert (turn["kind"], turn["attempts"], turn["failure"]) == ("turn", 1, "status 503")
    assert "SECRET" not in answer.text and ANN not in answer.text
    states = post(http, "/v1/inspect/turns", {"data_subject_id": ANN})["turns"]
    assert [t["state"] for t in states] == ["formed", "parked"]
    worker = http.post("/v1/inspect/worker", json={})
    assert worker.status_code == 200 and worker.json() == {"running": 0, "beat_age_seconds": None}


def test_a_subjects_segments_are_listed_in_turn_order(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    for n in range(17):
        observe(http, ANN, ("user", f"On day {n} I watered the garden."))
    settings = with_model(MemorySettings(), model)
    passes(live_server.database_url, settings, model, count=3)
    found = post(http, "/v1/inspect/segments", {"data_subject_id": ANN, "limit": 1})
    [segment] = found["segments"]
    assert (segment["level"], segment["from_offset"], segment["to_offset"]) == (1, 0, 7)
    assert segment["covered"] == 8 and segment["summary"]
    assert "next" not in found


def test_the_page_needs_no_token_and_sends_its_security_headers(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.base_url) as anonymous:
        for path, kind in (
            ("/inspect", "text/html"),
            ("/inspect/inspect.js", "text/javascript"),
            ("/inspect/inspect.css", "text/css"),
        ):
            answer = anonymous.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["content-type"].startswith(kind)
            assert {k: answer.headers[k] for k in SECURITY} == SECURITY, path
        missing = anonymous.get("/inspect/settings.js")
        assert missing.status_code == 404 and missing.headers["x-content-type-options"] == "nosniff"
        refused = anonymous.post("/inspect", content=b"{}")
        assert refused.status_code == 405
        assert refused.json()["error"]["code"] == "method_not_allowed"
        assert "/inspect" not in anonymous.get("/openapi.json").json()["paths"]
