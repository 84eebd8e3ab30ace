"""Entities over real HTTP: list, get, candidates, purge (preview then confirm), and recall
anchored on a similar spelling of a stored name."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from memory_kit import LiveServer
from records_kit import api, assert_records, at_once, claim, error

from satchel.memory.spelling import THRESHOLD, similarity

SUBJECT = "person-1"


def listed(client: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = client.post("/v1/entities/list", json=body)
    assert answer.status_code == 200, answer.text
    page: dict[str, Any] = answer.json()
    return page


def every_entity(client: httpx.Client, limit: int = 100) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    page = listed(client, limit=limit)
    found += page["entities"]
    while "next" in page:
        page = listed(client, after=page["next"], limit=limit)
        found += page["entities"]
    return found


def named(client: httpx.Client, name: str) -> str:
    (entity,) = [e for e in every_entity(client) if e["name_preview"] == name]
    entity_id: str = entity["id"]
    return entity_id


def recall(client: httpx.Client, question: str, **controls: Any) -> dict[str, Any]:
    answer = client.post(
        "/v1/recalls", json={"question": question, "data_subject_id": SUBJECT, **controls}
    )
    assert answer.status_code == 200, answer.text
    bundle: dict[str, Any] = answer.json()
    return bundle


def purge(client: httpx.Client, entity_id: str, **body: Any) -> httpx.Response:
    return client.post("/v1/entities/purge", json={"id": entity_id, **body})


def test_entities_are_listed_in_pages_by_id_and_got_by_id(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (record,) = assert_records(
            client, claim("Marta", "works_at", "Ensera", "Marta works at Ensera.")
        )
        assert_records(
            client,
            claim("Olga", "lives_in", "Cork", "Olga lives in Cork."),
            claim("Niamh", "knows", "Olga", "Niamh knows Olga."),
        )
        pages = [listed(client, limit=2)]
        while "next" in pages[-1]:
            pages.append(listed(client, after=pages[-1]["next"], limit=2))
        assert [len(page["entities"]) for page in pages] == [2, 2, 1]
        entities = [entity for page in pages for entity in page["entities"]]
        assert [e["id"] for e in entities] == sorted(e["id"] for e in entities)
        assert sorted(e["name_preview"] for e in entities) == [
            "Cork",
            "Ensera",
            "Marta",
            "Niamh",
            "Olga",
        ]
        assert set(entities[0]) == {
            "id",
            "identity_kind",
            "name_preview",
            "name_bytes",
            "name_truncated",
            "alias_count",
            "first_seen_at",
        }
        assert listed(client)["entities"] == entities  # the default page holds them all

        records = client.post("/v1/records/list", json={}).json()["records"]
        marta = next(r for r in records if r["id"] == record["id"])["subject_entity_id"]
        got = client.post("/v1/entities/get", json={"id": marta})
        assert got.status_code == 200, got.text
        answer = got.json()
        assert answer.pop("first_seen_at").endswith("Z")
        assert answer == {
            "id": marta,
            "identity_kind": "named",
            "canonical_name": "Marta",
            "aliases": [],
        }


def test_entity_pages_and_ids_are_checked(live_server: LiveServer) -> None:
    with api(live_server) as client, api(live_server, "beta") as beta:
        assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works at Ensera."))
        marta = named(client, "Marta")
        for body, field in [
            ({"limit": 0}, "limit"),
            ({"limit": 101}, "limit"),
            ({"after": {"id": "marta"}}, "after.id"),
        ]:
            answer = client.post("/v1/entities/list", json=body)
            assert error(answer) == (400, "invalid_entity_page"), body
            assert field in answer.json()["error"]["message"]
        # A value of the wrong type is an unreadable body, as on every route.
        assert error(client.post("/v1/entities/list", json={"after": "x"})) == (400, "invalid_body")
        answer = client.post("/v1/entities/get", json={"id": "not-an-id"})
        assert error(answer) == (400, "invalid_entity_page")
        assert "id" in answer.json()["error"]["message"]
        missing = client.post("/v1/entities/get", json={})
        assert error(missing) == (400, "invalid_entity_page")
        assert "id" in missing.json()["error"]["message"]
        unknown = str(uuid.uuid4())
        assert error(client.post("/v1/entities/get", json={"id": unknown})) == (404, "not_found")
        # Another project's entity is as unknown as one that never was.
        assert error(beta.post("/v1/entities/get", json={"id": marta})) == (404, "not_found")
        assert listed(beta)["entities"] == []
        assert error(purge(beta, marta, confirm=True)) == (404, "not_found")
        assert error(purge(client, "marta", confirm=True)) == (404, "not_found")
        assert error(purge(client, unknown, confirm=True)) == (404, "not_found")
        answer = purge(client, marta, confirm="yes")
        assert error(answer) == (400, "invalid_body")
        assert "confirm" in answer.json()["error"]["message"]
        assert client.post("/v1/entities/get", json={"id": marta}).status_code == 200


def test_read_only_tokens_inspect_but_cannot_purge(live_server: LiveServer) -> None:
    with api(live_server) as client, api(live_server, read_only=True) as reader:
        assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works at Ensera."))
        marta = named(reader, "Marta")
        assert reader.post("/v1/entities/get", json={"id": marta}).status_code == 200
        found = reader.post("/v1/entities/candidates", json={"question": "Marta"})
        assert found.status_code == 200
        assert error(purge(reader, marta)) == (403, "forbidden")
        assert error(purge(reader, marta, confirm=True)) == (403, "forbidden")
        assert len(recall(reader, "Where does Marta work?")["facts"]) == 1


def test_a_purge_previews_then_removes_the_entity_and_its_facts(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim("Marta", "lives_in", "Cork", "Marta lives in Cork."),
            claim("Niamh", "knows", "Marta", "Niamh knows Marta."),
            claim("Niamh", "lives_in", "Cork", "Niamh lives in Cork."),
        )
        marta = named(client, "Marta")
        exported = client.post("/v1/exports", json={"data_subject_id": SUBJECT}).json()["rows"]
        before = every_entity(client)

        preview = purge(client, marta, reason="two people merged")
        assert preview.status_code == 200, preview.text
        previewed = preview.json()
        assert previewed["previewed"] is True
        assert previewed["entity_id"] == marta and previewed["canonical_name"] == "Marta"
        assert previewed["reason"] == "two people merged"
        assert previewed["removed"] == {
            "fact_evidence": 3,
            "fact_history": 0,
            "record_retraction": 0,
            "fact": 3,
            "entity_source": 3,
            "entity": 1,
        }
        assert set(previewed["residual"].values()) == {0}
        assert previewed["contributing_subjects"] == 1
        assert previewed["claims_from_unattributed_turns"] == 0
        assert previewed["source_turns_kept"] == 3
        # A preview changes nothing.
        assert every_entity(client) == before
        assert len(recall(client, "Where does Marta work?")["facts"]) == 3

        confirmed = purge(client, marta, reason="two people merged", confirm=True).json()
        assert confirmed["previewed"] is False
        for field in ("removed", "residual", "contributing_subjects", "source_turns_kept"):
            assert confirmed[field] == previewed[field]
        assert error(client.post("/v1/entities/get", json={"id": marta})) == (404, "not_found")
        assert [e["name_preview"] for e in every_entity(client)] == [
            e["name_preview"] for e in before if e["id"] != marta
        ]
        gone = recall(client, "Where does Marta work?")
        assert gone["facts"] == [] and gone["anchors"] == []
        assert gone["reach"]["named_nothing_known"] is True
        (left,) = recall(client, "Where does Niamh live?")["facts"]
        assert left["object"] == "Cork"
        # The words stay: the turns and messages the facts were drawn from are kept.
        after = client.post("/v1/exports", json={"data_subject_id": SUBJECT}).json()["rows"]
        assert after["message"] == exported["message"] == 4
        assert after["fact"] == exported["fact"] - 3
        assert error(purge(client, marta, confirm=True)) == (404, "not_found")


def test_a_purge_counts_claims_from_turns_of_nobody(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            claim(
                "Acme",
                "located_in",
                "Cork",
                "Acme is in Cork.",
                data_subject_id=None,
                valid_from="2020-01-01T00:00:00Z",
            ),
            claim(
                "Acme",
                "located_in",
                "Dublin",
                "Acme is in Dublin.",
                data_subject_id=None,
                valid_from="2024-01-01T00:00:00Z",
            ),
        )
        answer = purge(client, named(client, "Acme")).json()
        assert answer["contributing_subjects"] == 0
        # Dublin superseded Cork: the closed fact and its history go too.
        assert answer["claims_from_unattributed_turns"] == 2
        assert answer["removed"]["fact"] == 2 and answer["removed"]["fact_history"] == 1
        assert "reason" not in answer


def test_a_purge_racing_an_erasure_both_finish_and_leave_nothing(live_server: LiveServer) -> None:
    """A purge and an erasure of the subject whose facts name the entity take the same locks in
    the same order: both answer (the purge may find the entity already gone), none deadlocks."""
    with api(live_server) as setup:
        racers = [api(live_server) for _ in range(2)]
        try:
            for n in range(6):
                subject = f"person-{n}"
                assert_records(
                    setup,
                    claim(
                        "Marta",
                        "works_at",
                        "Ensera",
                        "Marta works at Ensera.",
                        data_subject_id=subject,
                    ),
                    claim(
                        "Marta", "lives_in", "Cork", "Marta lives in Cork.", data_subject_id=subject
                    ),
                )
                marta = named(setup, "Marta")
                purged, erased = at_once(
                    (racers[0], "/v1/entities/purge", {"id": marta, "confirm": True}),
                    (racers[1], "/v1/erasures", {"data_subject_id": subject}),
                )
                assert erased.status_code == 200, erased.text
                assert purged.status_code in (200, 404), purged.text
                assert error(setup.post("/v1/entities/get", json={"id": marta})) == (
                    404,
                    "not_found",
                )
                rows = setup.post("/v1/exports", json={"data_subject_id": subject}).json()["rows"]
                assert rows["fact"] == 0 and rows["message"] == 0
        finally:
            for racer in racers:
                racer.close()


NAMES = ("Marta", "Olga", "Niamh", "Cork")


class Purges(RuleBasedStateMachine):
    """Claims, purge previews and confirmed purges against a model: a preview changes nothing
    and says what the purge will remove; a purge removes the entity and every fact naming it."""

    server: LiveServer

    def __init__(self) -> None:
        super().__init__()
        self.http = api(self.server, f"p{uuid.uuid4().hex[:12]}")
        self.facts: list[tuple[str, str]] = []  # (subject, object) of the facts kept
        self.names: set[str] = set()  # the entities kept

    @rule(subject=st.sampled_from(NAMES), obj=st.sampled_from(NAMES))
    def assert_a_claim(self, subject: str, obj: str) -> None:
        assert_records(self.http, claim(subject, "knows", obj, f"{subject} knows {obj}."))
        self.facts.append((subject, obj))
        self.names |= {subject, obj}

    @rule(name=st.sampled_from(NAMES), confirm=st.booleans())
    def purge(self, name: str, confirm: bool) -> None:
        if name not in self.names:
            return
        entity_id = named(self.http, name)
        answer = purge(self.http, entity_id, confirm=confirm)
        assert answer.status_code == 200, answer.text
        touching = [fact for fact in self.facts if name in fact]
        assert answer.json()["removed"]["fact"] == len(touching)
        assert answer.json()["previewed"] is not confirm
        if confirm:
            self.facts = [fact for fact in self.facts if name not in fact]
            self.names.discard(name)
            assert error(purge(self.http, entity_id)) == (404, "not_found")

    @invariant()
    def memory_matches_the_model(self) -> None:
        assert sorted(e["name_preview"] for e in every_entity(self.http, 2)) == sorted(self.names)
        kept = self.http.post("/v1/records/list", json={}).json()["records"]
        assert len(kept) == len(self.facts)

    def teardown(self) -> None:
        self.http.close()


def test_purges_follow_the_model(live_server: LiveServer) -> None:
    Purges.server = live_server
    run_state_machine_as_test(
        Purges,
        settings=settings(
            max_examples=10, stateful_step_count=8, deadline=None, derandomize=True, database=None
        ),
    )


def test_candidates_rank_close_spellings(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            claim("John", "works_at", "Ensera", "John works at Ensera."),
            claim("Joan", "works_at", "Acme", "Joan works at Acme."),
        )
        answer = client.post("/v1/entities/candidates", json={"question": "Where is Jon?"})
        assert answer.status_code == 200, answer.text
        found = answer.json()
        assert found["generation_id"] == "spelling/v1" and found["build_state"] == "built"
        assert found["target_count"] == 4 and found["approximate"] is False
        (john,) = found["candidates"]
        assert john == {
            "entity_id": named(client, "John"),
            "identity_kind": "named",
            "name_preview": "John",
            "name_bytes": 4,
            "name_truncated": False,
            "similarity": 0.875,
        }
        exact = client.post("/v1/entities/candidates", json={"question": "Joan", "limit": 1})
        assert [c["similarity"] for c in exact.json()["candidates"]] == [1.0]
        capped = client.post("/v1/entities/candidates", json={"question": "Jon", "candidates": 1})
        assert capped.json()["approximate"] is True
        for body, field in [
            ({"question": " "}, "question"),
            ({"question": "Jon", "limit": 0}, "limit"),
            ({"question": "Jon", "limit": 33}, "limit"),
            ({"question": "Jon", "candidates": -1}, "candidates"),
            ({"question": "x" * 8193}, "question"),
        ]:
            refused = client.post("/v1/entities/candidates", json=body)
            assert error(refused) == (400, "invalid_entity_candidate_query"), body
            assert field in refused.json()["error"]["message"]


def test_recall_anchors_on_a_similar_spelling(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (record,) = assert_records(
            client, claim("John", "works_at", "Ensera", "John works at Ensera.")
        )
        bundle = recall(client, "Where does Jon work?")
        (fact,) = bundle["facts"]
        assert fact["fact_id"] == record["id"] and fact["object"] == "Ensera"
        (anchor,) = bundle["anchors"]
        assert anchor["name"] == "John" and anchor["matched"] == "similar:0.88:jon"
        assert fact["anchored_on"] == anchor["entity_id"]
        # Only exact names count as anchored; a similar spelling is a guess, and says so.
        assert bundle["reach"]["anchored"] == 0 and bundle["reach"]["named_nothing_known"]
        other = recall(client, "Where does Jon work?", data_subject_id="person-2")
        assert other["facts"] == [] and other["anchors"] == []
        erased = client.post("/v1/erasures", json={"data_subject_id": SUBJECT})
        assert erased.status_code == 200 and erased.json()["clean"] is True
        after = recall(client, "Where does Jon work?")
        assert after["facts"] == [] and after["anchors"] == []


def test_an_exact_name_is_preferred_to_a_similar_one(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            claim("John", "works_at", "Ensera", "John works at Ensera."),
            claim("Jon", "works_at", "Acme", "Jon works at Acme."),
        )
        bundle = recall(client, "Where does Jon work?")
        assert [a["matched"] for a in bundle["anchors"]] == ["jon"]
        assert [f["object"] for f in bundle["facts"]] == ["Acme"]
        assert bundle["reach"]["anchored"] == 1


def test_common_words_and_short_words_do_not_anchor(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert_records(
            client,
            claim("John", "works_at", "Ensera", "John works at Ensera."),
            claim("Don", "lives_in", "Cork", "Don lives in Cork."),
            claim("Marta", "knows", "Olga", "Marta knows Olga."),
        )
        for question in [
            "How do I join the club?",
            "Join the club?",
            "Is it on?",
            "Where does Joan work?",
            "What did jon say?",  # a lowercase word is not written as a name
            "Who is Jane?",
            "Dan?",
            "Where does Martha's friend Olgaa live?",
        ]:
            bundle = recall(client, question)
            if question.startswith("Where does Martha"):
                assert {a["name"] for a in bundle["anchors"]} == {"Marta", "Olga"}
                continue
            assert bundle["anchors"] == [] and bundle["facts"] == [], question


@given(st.text(max_size=12), st.text(max_size=12))
def test_similarity_is_symmetric_and_bounded(first: str, second: str) -> None:
    score = similarity(first, second)
    assert score == similarity(second, first)
    assert 0.0 <= score <= 1.0
    assert (score == 1.0) == (first == second)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=12))
def test_a_name_is_always_its_own_best_match(name: str) -> None:
    assert similarity(name, name) == 1.0 >= THRESHOLD
    assert similarity(name, name + "x") < 1.0
