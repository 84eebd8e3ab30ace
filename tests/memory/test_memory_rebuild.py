"""Rebuilding facts under a new model: `satchel rebuild project|facts|status|cancel` as real
processes against the live server's database, a loopback model scripted per setup."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from formation_kit import claim, observe, passes, with_model
from memory_kit import LiveServer
from memory_process import environment, satchel
from model_server import ModelServer, Reply, text_of

from satchel.memory.config import MemorySettings

ANN = "person-ann-rebuild"
HOME = "I live in Cork these days."
WORK = "I work at Ensera on the data team."
TONGUE = "I speak Irish at home."


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def scripted(setup: str) -> ModelServer:
    """A model answering each turn's claims, its statements marked with `setup`."""
    server = ModelServer()

    def respond(body: dict[str, Any]) -> Reply:
        text = text_of(body)
        claims = []
        if "Cork" in text:
            claims.append(
                claim("I", "lives_in", "Cork", "I live in Cork", statement=f"{setup}: Cork")
            )
        if "Ensera" in text:
            claims.append(
                claim("I", "works_at", "Ensera", "I work at Ensera", statement=f"{setup}: Ensera")
            )
        if "Irish" in text:
            claims.append(
                claim("I", "speaks", "Irish", "I speak Irish", statement=f"{setup}: Irish")
            )
        return {"claims": claims}

    server.respond = respond
    return server


def rebuild(url: str, model: ModelServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **environment(url),
        "SATCHEL_FORMATION_MODEL": "setup-b",
        "SATCHEL_FORMATION_BASE_URL": model.base_url,
    }
    return satchel("rebuild", *args, "--json", env=env)


def job_of(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def recall(http: httpx.Client, predicate: str, **controls: Any) -> list[dict[str, Any]]:
    """The person's facts of `predicate` a recall about them finds."""
    answer = http.post(
        "/v1/recalls",
        json={
            "question": "Cork, Ensera, Ensera Labs, Irish",
            "data_subject_id": ANN,
            "surfaces": ["facts"],
            **controls,
        },
    )
    assert answer.status_code == 200, answer.text
    return [fact for fact in answer.json()["facts"] if fact["predicate"] == predicate]


def cite(http: httpx.Client, fact_id: str) -> dict[str, Any]:
    answer = http.post("/v1/citations/resolve", json={"id": fact_id})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def formed_under_a(live_server: LiveServer, http: httpx.Client) -> list[dict[str, Any]]:
    """Three turns formed by setup A; their receipts."""
    receipts = [observe(http, ANN, ("user", text)) for text in (HOME, WORK, TONGUE)]
    with scripted("A") as model_a:
        passes(live_server.database_url, with_model(MemorySettings(), model_a), model_a)
    return receipts


def test_a_project_rebuild_reinterprets_facts_keeping_history_and_human_edits(
    live_server: LiveServer, http: httpx.Client
) -> None:
    url = live_server.database_url
    receipts = formed_under_a(live_server, http)
    [home_a] = recall(http, "lives_in")
    assert home_a["statement"] == "A: Cork"
    [work_a] = recall(http, "works_at")
    version = cite(http, work_a["fact_id"])["version"]
    corrected = http.post(
        "/v1/records/correct",
        json={
            "records": [
                {
                    "id": work_a["fact_id"],
                    "expected_version": version,
                    "object": "Ensera Labs",
                    "statement": "I work at Ensera Labs.",
                }
            ]
        },
    )
    assert corrected.status_code == 200, corrected.text
    erased = http.post("/v1/erasures", json={"source_observation_ids": [receipts[2]["id"]]})
    assert erased.status_code == 200, erased.text
    before = datetime.now(UTC).isoformat()
    time.sleep(0.05)

    key = str(uuid.uuid4())
    with scripted("B") as model_b:
        first = job_of(
            rebuild(url, model_b, "project", "--project", "alpha", "--key", key, "--limit", "1")
        )
        assert first["status"] == "active" and first["sources_rebuilt"] == 1
        assert http.get("/v1/freshness").json()["rebuilding"] == {
            "reinterpreted_through": receipts[0]["log_offset"] + 1,
            "reinterpreting_through": first["through_offset"],
            "sources_acknowledged": 1,
            "sources_skipped": 0,
        }
        job = first
        for _ in range(5):
            job = job_of(rebuild(url, model_b, "project", "--project", "alpha", "--key", key))
            if job["status"] == "completed":
                break
        assert job["status"] == "completed"
        # The erased turn was skipped without a model call; the corrected one was asked again.
        assert len(model_b.requests) == 2
        assert TONGUE not in json.dumps(model_b.requests)
        assert "rebuilding" not in http.get("/v1/freshness").json()

        again = job_of(rebuild(url, model_b, "project", "--project", "alpha", "--key", key))
        assert again["status"] == "completed" and len(model_b.requests) == 2

    [home_b] = recall(http, "lives_in")
    assert home_b["statement"] == "B: Cork" and home_b["fact_id"] != home_a["fact_id"]
    [then] = recall(http, "lives_in", as_known_at=before)
    assert then["fact_id"] == home_a["fact_id"] and then["statement"] == "A: Cork"

    new, old = cite(http, home_b["fact_id"]), cite(http, home_a["fact_id"])
    assert new["generation"]["extractor_version"].startswith("setup-b|")
    assert "reinterpreted_by" not in new
    assert old["reinterpreted_by"] == new["generation"]
    assert old["status"] == "reinterpreted" and old["known"]["until"] is not None

    # The correction made before the rebuild still wins: setup B's Ensera claim was refused.
    works = recall(http, "works_at")
    assert [f["object"] for f in works] == ["Ensera Labs"]


def test_one_job_per_project_status_cancel_and_one_source(
    live_server: LiveServer, http: httpx.Client
) -> None:
    url = live_server.database_url
    receipts = formed_under_a(live_server, http)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    with scripted("B") as model_b:
        job = job_of(
            rebuild(url, model_b, "project", "--project", "alpha", "--key", first, "--limit", "1")
        )
        assert job["status"] == "active"
        refused = rebuild(url, model_b, "project", "--project", "alpha", "--key", second)
        assert refused.returncode == 1
        assert f"already has an active rebuild (key {first})" in refused.stderr
        status = job_of(rebuild(url, model_b, "status", "--project", "alpha"))
        assert (status["rebuild_key"], status["sources_rebuilt"]) == (first, 1)
        cancelled = job_of(rebuild(url, model_b, "cancel", "--project", "alpha", "--key", first))
        assert cancelled["status"] == "cancelled" and cancelled["cancel_requested"] is True
        assert "rebuilding" not in http.get("/v1/freshness").json()
        calls = len(model_b.requests)

        one_source = ("facts", "--project", "alpha", "--source", receipts[1]["id"], "--key", second)
        one = job_of(rebuild(url, model_b, *one_source))
        assert (one["facts_admitted"], one["facts_retired"], one["replayed"]) == (1, 1, False)
        replay = job_of(rebuild(url, model_b, *one_source))
        assert replay == {**one, "replayed": True}
        assert len(model_b.requests) == calls + 1
    [work] = recall(http, "works_at")
    assert work["statement"] == "B: Ensera"


def test_a_rebuilt_sources_lost_facts_come_back_from_its_rebuild(
    live_server: LiveServer, http: httpx.Client
) -> None:
    """A rebuild keeps a receipt of what it admitted: its facts, deleted by hand, are put back
    as the rebuild wrote them (generation included), and the retired ones are left as they are."""
    url = live_server.database_url
    receipts = formed_under_a(live_server, http)
    source = receipts[0]["id"]
    with scripted("B") as model_b:
        args = ("facts", "--project", "alpha", "--source", source, "--key", str(uuid.uuid4()))
        assert job_of(rebuild(url, model_b, *args))["facts_admitted"] == 1
        calls = len(model_b.requests)
    [home_b] = recall(http, "lives_in")
    cited = cite(http, home_b["fact_id"])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM facts WHERE id = %s", (home_b["fact_id"],))
    assert recall(http, "lives_in") == []
    done = satchel(
        "recover", "facts", "--project", "alpha", "--source", source, "--json", env=environment(url)
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"] == 1
    [back] = recall(http, "lives_in")
    assert back["fact_id"] == home_b["fact_id"] and back["statement"] == "B: Cork"
    assert cite(http, back["fact_id"])["generation"] == cited["generation"]
    assert len(model_b.requests) == calls
