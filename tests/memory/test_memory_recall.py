"""Recall over real HTTP: anchoring, hops, time, roles, budget, surfaces, isolation."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest
from memory_kit import LiveServer
from records_kit import api, assert_records, claim, error
from taisce.client import Client, TaisceError

from satchel.memory.config import MemorySettings
from satchel.memory.service.questions import terms

SUBJECT = "person-1"
ARRAYS = ("anchors", "facts", "reports", "passages", "degraded")


def ask(client: httpx.Client, question: str, **controls: Any) -> dict[str, Any]:
    answer = client.post("/v1/recalls", json={"question": question, **controls})
    assert answer.status_code == 200, answer.text
    bundle: dict[str, Any] = answer.json()
    assert all(isinstance(bundle[name], list) for name in ARRAYS)
    return bundle


def objects(bundle: dict[str, Any]) -> list[str]:
    return [fact["object"] for fact in bundle["facts"]]


async def test_the_conformance_seed_is_recalled_through_the_published_client(
    live_server: LiveServer,
) -> None:
    with api(live_server) as client:
        (seed,) = assert_records(
            client,
            claim(
                "Marta", "works_at", "Ensera", "Marta works at Ensera.", data_subject_id="case-1"
            ),
        )
        token = live_server.token("alpha")
    async with Client(live_server.base_url, token) as taisce:
        bundle = await taisce.recall(question="Where does Marta work?", data_subject_id="case-1")
        (fact,) = bundle["facts"]
        assert fact["fact_id"] == seed["id"]
        assert (fact["subject"], fact["predicate"], fact["object"]) == (
            "Marta",
            "works_at",
            "Ensera",
        )
        assert fact["statement"] == "Marta works at Ensera."
        assert fact["valid_until"] is None and fact["hops"] == 1
        assert fact["path"] == [] and fact["via"] == [] and fact["co_derived_with"] == []
        assert fact["evidence"] == {
            "observation_id": seed["source_observation_id"],
            "source_ordinal": 0,
            "quote": "Marta works at Ensera.",
            "byte_start": 0,
            "byte_end": 22,
            "context": "Marta works at Ensera.",
            "context_start": 0,
            "context_complete": True,
        }
        (anchor,) = bundle["anchors"]
        assert (anchor["name"], anchor["matched"]) == ("Marta", "marta")
        assert fact["anchored_on"] == anchor["entity_id"]
        assert bundle["controls"] == {
            "max_characters": 16000,
            "max_rows": 200,
            "source_roles": ["user"],
            "hops": 1,
            "surfaces": ["facts", "reports", "passages"],
            "themes": False,
        }
        assert bundle["reports"] == [] and bundle["passages"] == [] and bundle["degraded"] == []
        assert bundle["truncated"] is False
        charged = sum(len(fact[k]) for k in ("subject", "predicate", "object", "statement"))
        charged += len("user") + 2 * len("Marta works at Ensera.")
        assert bundle["characters"] == charged
        assert bundle["reach"] == {
            "terms": len(terms("Where does Marta work?")),
            "anchored": 1,
            "named_nothing_known": False,
            "facts_per_anchor": {anchor["entity_id"]: 1},
        }
        # Another person's recall sees none of it.
        other = await taisce.recall(question="Where does Marta work?", data_subject_id="case-2")
        assert other["facts"] == [] and other["anchors"] == []
        assert other["reach"]["named_nothing_known"] is True
        with pytest.raises(TaisceError) as refused:
            await taisce.recall(question="  ")
        assert (refused.value.status, refused.value.code) == (400, "invalid_question")


def test_terms_are_windows_of_normalized_words() -> None:
    assert terms("Where's  Dr. O'Brien-Smith?") == [
        "where's",
        "where's dr",
        "where's dr o'brien-smith",
        "dr",
        "dr o'brien-smith",
        "o'brien-smith",
    ]
    assert terms("-- ?? ''") == []
    assert terms("a b c d e")[:4] == ["a", "a b", "a b c", "a b c d"]


def test_recall_refuses_bad_questions_and_controls(live_server: LiveServer) -> None:
    with api(live_server) as client:
        question_refusals = [
            {},
            {"question": ""},
            {"question": "\n\t "},
            {"question": "é" * 4097},
            {"question": " ".join(f"w{i}" for i in range(200))},
        ]
        for body in question_refusals:
            answer = client.post("/v1/recalls", json=body)
            assert error(answer) == (400, "invalid_question"), body
        control_refusals = [
            {"max_characters": 0},
            {"max_characters": 16001},
            {"source_roles": []},
            {"source_roles": ["user", "user"]},
            {"source_roles": ["bot"]},
            {"source_roles": ["user", "assistant", "system", "tool", "user"]},
            {"surfaces": []},
            {"surfaces": ["facts", "facts"]},
            {"surfaces": ["themes"]},
        ]
        for controls in control_refusals:
            answer = client.post("/v1/recalls", json={"question": "Marta?", **controls})
            assert error(answer) == (400, "invalid_recall_controls"), controls
        for controls in ({"hops": "2"}, {"hops": 1.5}, {"themes": "yes"}, {"surface": ["facts"]}):
            answer = client.post("/v1/recalls", json={"question": "Marta?", **controls})
            assert error(answer) == (400, "invalid_body"), controls
        assert ask(client, "Marta?", hops=7)["controls"]["hops"] == 2
        assert ask(client, "Marta?", hops=-3)["controls"]["hops"] == 1
        nulls = ask(client, "Marta?", max_characters=None, source_roles=None, surfaces=None)
        assert nulls["controls"]["source_roles"] == ["user"]
        assert nulls["controls"]["max_characters"] == 16000


def test_two_hops_follow_objects_and_subjects(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (works, located, knows, part) = assert_records(
            client,
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim("Ensera", "located_in", "Dublin", "Ensera is in Dublin."),
            claim("Olga", "works_at", "Ensera", "Olga works at Ensera too."),
            claim("Dublin", "part_of", "Ireland", "Dublin is in Ireland."),
        )
        one = ask(client, "Where does Marta work?", data_subject_id=SUBJECT)
        assert [f["fact_id"] for f in one["facts"]] == [works["id"]]
        two = ask(client, "Where does Marta work?", data_subject_id=SUBJECT, hops=2)
        by_id = {f["fact_id"]: f for f in two["facts"]}
        assert set(by_id) == {works["id"], located["id"], knows["id"]}
        assert two["facts"][0]["fact_id"] == works["id"]
        for fact_id in (located["id"], knows["id"]):
            fact = by_id[fact_id]
            assert fact["hops"] == 2
            assert fact["path"] == ["Marta", "Ensera"] and fact["via"] == [works["id"]]
            assert fact["anchored_on"] == two["anchors"][0]["entity_id"]
        # Walking from the object side: a question about Dublin reaches Marta through Ensera.
        dublin = ask(client, "What is in Dublin?", hops=2)
        assert {f["fact_id"]: f["hops"] for f in dublin["facts"]} == {
            located["id"]: 1,
            part["id"]: 1,
            works["id"]: 2,
            knows["id"]: 2,
        }
        assert by_id[located["id"]]["co_derived_with"] == []


def test_retraction_and_supersession_change_what_is_recalled(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (works, paris) = assert_records(
            client,
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim(
                "Marta",
                "lives_in",
                "Paris",
                "Marta lives in Paris.",
                valid_from="2020-01-01T00:00:00Z",
            ),
        )
        paris_known = client.post("/v1/records/history", json={"id": paris["id"]}).json()
        believed_then = paris_known["current"]["known"]["from"]
        (rome,) = assert_records(
            client,
            claim(
                "Marta",
                "lives_in",
                "Rome",
                "Marta lives in Rome.",
                valid_from="2023-06-01T00:00:00Z",
            ),
        )
        assert objects(ask(client, "Marta")) == ["Rome", "Ensera"]
        past = ask(client, "Marta", as_of="2021-01-01T00:00:00Z")
        assert [(f["object"], f["valid_until"]) for f in past["facts"]] == [
            ("Paris", "2023-06-01T00:00:00Z")
        ]
        assert ask(client, "Marta", as_of="2019-01-01T00:00:00+02:00")["facts"] == []
        # Believed at the time Paris was asserted: Paris, with no end yet.
        then = ask(client, "Marta", as_known_at=believed_then)
        assert sorted(objects(then)) == ["Ensera", "Paris"]
        assert [f["valid_until"] for f in then["facts"] if f["object"] == "Paris"] == [None]

        item = {"id": works["id"], "expected_version": works["version"]}
        answer = client.post("/v1/records/retract", json={"records": [item]})
        assert answer.status_code == 200
        assert objects(ask(client, "Marta")) == ["Rome"]
        assert "Ensera" in objects(ask(client, "Marta", as_known_at=believed_then))
        assert rome["id"] in [f["fact_id"] for f in ask(client, "Marta")["facts"]]


def test_budget_cuts_facts_in_a_stable_order(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            *[claim("Marta", "knows", f"Person {i}", f"Marta knows Person {i}.") for i in range(5)],
        )
        full = ask(client, "Marta")
        assert len(full["facts"]) == 5 and full["truncated"] is False
        assert ask(client, "Marta")["facts"] == full["facts"]
        costs = [
            sum(len(f[k]) for k in ("subject", "predicate", "object", "statement", "source_role"))
            + len(f["evidence"]["quote"])
            + len(f["evidence"]["context"])
            for f in full["facts"]
        ]
        assert full["characters"] == sum(costs)
        budget = costs[0] + costs[1] + costs[2] - 1
        cut = ask(client, "Marta", max_characters=budget)
        assert cut["facts"] == full["facts"][:2]
        assert cut["truncated"] is True and cut["characters"] == costs[0] + costs[1]
        assert cut["reach"]["facts_per_anchor"] == {cut["anchors"][0]["entity_id"]: 2}
        nothing = ask(client, "Marta", max_characters=1)
        assert nothing["facts"] == [] and nothing["truncated"] is True
        assert nothing["characters"] == 0


@pytest.fixture
def memory_settings(request: pytest.FixtureRequest) -> MemorySettings:
    """The default settings, or those a test names with indirect parametrization."""
    settings: MemorySettings = getattr(request, "param", MemorySettings())
    return settings


@pytest.mark.parametrize("memory_settings", [MemorySettings(max_rows=3)], indirect=True)
def test_rows_over_the_server_cap_are_cut(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client, *[claim("Marta", "knows", f"P{i}", f"Marta knows P{i}.") for i in range(4)]
        )
        bundle = ask(client, "Marta")
        assert len(bundle["facts"]) == 3 and bundle["truncated"] is True
        assert bundle["controls"]["max_rows"] == 3


def test_roles_surfaces_and_degraded(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works at Ensera."))
        assert ask(client, "Marta", source_roles=["assistant"])["facts"] == []
        assert len(ask(client, "Marta", source_roles=["tool", "user"])["facts"]) == 1

        facts_only = ask(client, "Marta", surfaces=["facts"])
        assert len(facts_only["facts"]) == 1 and facts_only["degraded"] == []
        named = ask(client, "Marta", surfaces=["passages", "facts", "reports"])
        assert named["degraded"] == [] and named["passages"] == []  # records are not passages
        themed = ask(client, "Marta", surfaces=["reports"], themes=True)
        assert themed["degraded"] == [] and themed["facts"] == []  # no reports yet: none
        assert themed["reports"] == []
        assert themed["anchors"] == [] and themed["reach"]["anchored"] == 1
        unknown = ask(client, "Who is Olga?", surfaces=["facts", "reports"])
        assert unknown["degraded"] == ["semantic_anchors"]
        assert unknown["reach"]["named_nothing_known"] is True
        subject = ask(client, "Who is Olga?", surfaces=["reports"], data_subject_id=SUBJECT)
        assert subject["degraded"] == ["reports_withheld_for_subject"]
        assert ask(client, "Who is Olga?")["degraded"] == []
        empty = ask(client, "?!")
        assert empty["reach"] == {
            "terms": 0,
            "anchored": 0,
            "named_nothing_known": False,
            "facts_per_anchor": {},
        }


def test_recall_never_crosses_projects(live_server: LiveServer) -> None:
    with api(live_server, "alpha") as alpha, api(live_server, "beta") as beta:
        assert_records(alpha, claim("Marta", "works_at", "Ensera", "Marta works at Ensera."))
        assert len(ask(alpha, "Where does Marta work?")["facts"]) == 1
        theirs = ask(beta, "Where does Marta work?", hops=2)
        assert theirs["facts"] == [] and theirs["anchors"] == []
        assert theirs["reach"]["anchored"] == 0
    with api(live_server, "alpha", read_only=True) as reader:
        assert len(ask(reader, "Where does Marta work?")["facts"]) == 1


def test_each_fact_cites_its_earliest_evidence_on_both_hops(live_server: LiveServer) -> None:
    with api(live_server) as client:
        said = "Earlier, Marta said she works at Ensera."
        turn = client.post(
            "/v1/observations",
            json={"data_subject_id": SUBJECT, "messages": [{"role": "user", "content": said}]},
        )
        assert turn.status_code == 201, turn.text
        works, based = assert_records(
            client,
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim("Ensera", "located_in", "Cork", "Ensera is in Cork."),
        )
        with psycopg.connect(live_server.database_url) as conn:
            for fact in (works, based):  # later pieces of evidence, in the fact's own source
                conn.execute(
                    "INSERT INTO fact_evidence (fact_id, observation_id, source_ordinal, quote,"
                    " byte_start, byte_end) SELECT %s, %s, n, 'x', 0, 1"
                    " FROM generate_series(1, 3) n",
                    (fact["id"], fact["source_observation_id"]),
                )
            # the earliest: in a turn logged before either record
            start = said.index("Marta")
            conn.execute(
                "INSERT INTO fact_evidence (fact_id, observation_id, source_ordinal, quote,"
                " byte_start, byte_end) VALUES (%s, %s, 0, 'Marta', %s, %s)",
                (works["id"], turn.json()["id"], start, start + 5),
            )
        bundle = ask(client, "Where does Marta work?", hops=2, data_subject_id=SUBJECT)
        cited = {fact["object"]: fact["evidence"] for fact in bundle["facts"]}
        assert cited["Ensera"]["observation_id"] == turn.json()["id"]
        assert (cited["Ensera"]["quote"], cited["Ensera"]["byte_start"]) == ("Marta", start)
        assert cited["Ensera"]["context"] == said and cited["Ensera"]["context_complete"]
        assert cited["Cork"]["observation_id"] == based["source_observation_id"]
        assert (cited["Cork"]["source_ordinal"], cited["Cork"]["quote"]) == (
            0,
            "Ensera is in Cork.",
        )
