"""Formation receipts and `satchel recover facts`: lost facts put back exactly as they were with no
model call, retracted and corrected ones never; receipts exported, erased and swept with their
source."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from formation_kit import claim, observe, passes, rows, with_model
from memory_kit import LiveServer
from memory_process import environment, satchel
from model_server import ModelServer

from satchel.memory.config import MemorySettings

ANN = "person-ann-recovery"
BOB = "person-bob-recovery"
FACTS = (
    "SELECT f.id, f.data_subject_id, s.id, s.name, f.predicate, f.object, f.object_entity_id,"
    " f.statement, f.confidence, f.source_role, f.source_observation_id, f.valid_from,"
    " f.valid_until, f.known_from, f.known_until, f.superseded_by, f.recorded_at"
    " FROM facts f JOIN entities s ON s.id = f.subject_entity_id ORDER BY f.id"
)
EVIDENCE = (
    "SELECT fact_id, observation_id, message_id, source_ordinal, quote, byte_start, byte_end,"
    " extractor_version FROM fact_evidence ORDER BY fact_id"
)


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def form(live_server: LiveServer, http: httpx.Client, model: ModelServer) -> list[str]:
    """Ann's three turns and Bob's one, formed by the scripted model; the turns' ids."""
    turns = [
        observe(http, ANN, ("user", "I live in Cork. I work at Ensera.")),
        observe(http, ANN, ("user", "Big news: I live in Dublin now.")),
        observe(http, ANN, ("user", "I speak Irish.")),
        observe(http, BOB, ("user", "I use Python every day.")),
    ]
    model.reply(
        {
            "claims": [
                claim("I", "lives_in", "Cork", "I live in Cork."),
                claim("I", "works_at", "Ensera", "I work at Ensera."),
            ]
        },
        {"claims": [claim("I", "lives_in", "Dublin", "I live in Dublin now.")]},
        {"claims": [claim("I", "speaks", "Irish", "I speak Irish.")]},
        {"claims": [claim("I", "uses", "Python", "I use Python every day.")]},
    )
    passes(live_server.database_url, with_model(MemorySettings(), model), model)
    return [turn["id"] for turn in turns]


def recover(url: str, *args: str) -> dict[str, Any]:
    done = satchel("recover", "facts", "--project", "alpha", "--json", *args, env=environment(url))
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def without_version(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    return rows(url, FACTS), rows(url, EVIDENCE)


def test_lost_facts_come_back_exactly_as_they_were_with_no_model_call(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    form(live_server, http, model)
    before = without_version(url)
    assert len(before[0]) == 5 and len(before[1]) == 5
    cork = rows(url, "SELECT superseded_by FROM facts WHERE object = 'Cork'")
    assert cork == rows(url, "SELECT id FROM facts WHERE object = 'Dublin'")
    calls = len(model.requests)

    rows(url, "DELETE FROM entities RETURNING id")  # facts, evidence and history go with them
    assert rows(url, "SELECT count(*) FROM facts") == [(0,)]

    counted = recover(url, "--dry-run")
    assert (counted["restored"], counted["sources"], counted["dry_run"]) == (5, 4, True)
    assert rows(url, "SELECT count(*) FROM facts") == [(0,)]

    done = recover(url)
    assert (done["restored"], done["present"], done["withdrawn"], done["refused"]) == (5, 0, 0, [])
    assert without_version(url) == before  # ids, entities, statements, validity, evidence
    assert len(model.requests) == calls

    answer = http.post(
        "/v1/recalls",
        json={"question": "Where do I live?", "data_subject_id": ANN, "surfaces": ["facts"]},
    )
    current = {fact["object"] for fact in answer.json()["facts"]}
    assert "Dublin" in current and "Cork" not in current

    again = recover(url)
    assert (again["restored"], again["present"]) == (0, 5)
    assert without_version(url) == before


def test_only_the_missing_facts_of_one_source_come_back(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    cork_turn, _, irish_turn, _ = form(live_server, http, model)
    before = without_version(url)
    rows(url, "DELETE FROM facts WHERE object IN ('Cork', 'Irish') RETURNING id")

    done = recover(url, "--source", irish_turn)
    assert (done["sources"], done["restored"]) == (1, 1)
    assert rows(url, "SELECT count(*) FROM facts WHERE object = 'Cork'") == [(0,)]

    done = recover(url, "--source", cork_turn)
    assert (done["restored"], done["present"]) == (1, 1)
    assert without_version(url) == before  # Cork closed again, superseded by Dublin


def test_retracted_and_corrected_facts_never_come_back(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    form(live_server, http, model)
    [(irish, irish_version)] = rows(url, "SELECT id, version FROM facts WHERE object = 'Irish'")
    [(ensera, ensera_version)] = rows(url, "SELECT id, version FROM facts WHERE object = 'Ensera'")
    retract = {"records": [{"id": str(irish), "expected_version": str(irish_version)}]}
    assert http.post("/v1/records/retract", json=retract).status_code == 200
    item = {
        "id": str(ensera),
        "expected_version": str(ensera_version),
        "object": "Ensera Labs",
        "statement": "I work at Ensera Labs.",
    }
    answer = http.post("/v1/records/correct", json={"records": [item]})
    assert answer.status_code == 200, answer.text

    rows(url, "DELETE FROM facts WHERE NOT authored RETURNING id")
    done = recover(url)
    assert (done["restored"], done["withdrawn"]) == (3, 2)
    objects = rows(url, "SELECT object FROM facts ORDER BY object")
    assert objects == [("Cork",), ("Dublin",), ("Ensera Labs",), ("Python",)]


def test_receipts_are_exported_erased_and_swept_with_their_source(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    turns = form(live_server, http, model)
    exported = http.post("/v1/exports", json={"data_subject_id": ANN}).json()
    receipts = exported["sections"]["fact_receipt"]
    assert [receipt["observation_id"] for receipt in receipts] == turns[:3]
    assert [len(receipt["facts"]) for receipt in receipts] == [2, 1, 1]
    assert receipts[0]["facts"][0]["evidence"][0]["quote"] == "I live in Cork."

    erased = http.post("/v1/erasures", json={"data_subject_id": ANN}).json()
    assert erased["deleted"]["fact_receipt"] == 3
    assert erased["residual"]["fact_receipt"] == 0 and erased["clean"]
    assert rows(url, "SELECT data_subject_id FROM fact_receipts") == [(BOB,)]
    assert recover(url)["restored"] == 0  # nothing of Ann comes back

    env = environment(url)
    assert satchel("retention", "set", "--project", "alpha", "--days", "1", env=env).returncode == 0
    swept = satchel("retention", "sweep", "--now", "2100-01-01T00:00:00+00:00", "--json", env=env)
    assert swept.returncode == 0, swept.stderr
    receipt = json.loads(swept.stdout.splitlines()[-1])
    assert receipt["deleted"]["fact_receipt"] == 1
    assert receipt["residual"].get("fact_receipt", 0) == 0
    assert rows(url, "SELECT count(*) FROM fact_receipts") == [(0,)]


def test_refusals_say_what_was_wrong(live_server: LiveServer) -> None:
    env = environment(live_server.database_url)
    live_server.token("alpha")
    unknown = satchel("recover", "facts", "--project", "nowhere", env=env)
    assert unknown.returncode == 2 and "'nowhere'" in unknown.stderr
    bad = satchel("recover", "facts", "--project", "alpha", "--source", "x1", env=env)
    assert bad.returncode == 2 and "'x1'" in bad.stderr
    missing = str(uuid.uuid4())
    none = satchel("recover", "facts", "--project", "alpha", "--source", missing, env=env)
    assert none.returncode == 1 and missing in none.stderr
