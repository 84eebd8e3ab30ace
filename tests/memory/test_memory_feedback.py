"""Feedback over real HTTP: recording changes nothing, pages and cursors, promotion (once, even
racing), refusals naming the field, erasure and export with the record's subject."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
import memory_seed as seed
import psycopg
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from memory_kit import LiveServer
from records_kit import api, assert_records, claim, error

from satchel.memory.store.feedback import page_sql

ITEM_KEYS = {"id", "record_id", "note", "recorded_by", "recorded_at"}
PROMOTION_KEYS = {"id", "record_id", "operation", "version", "promoted_at"}


def ok(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def report(
    client: httpx.Client, record_id: str, note: str, proposed: str | None = None
) -> dict[str, Any]:
    body = {"record_id": record_id, "note": note}
    if proposed is not None:
        body["proposed_object"] = proposed
    return ok(client.post("/v1/feedback/record", json=body))


def listed(client: httpx.Client, **body: Any) -> dict[str, Any]:
    return ok(client.post("/v1/feedback/list", json=body))


def promote(client: httpx.Client, feedback_id: str, version: str) -> httpx.Response:
    return client.post(
        "/v1/feedback/promote", json={"id": feedback_id, "expected_version": version}
    )


def cite(client: httpx.Client, record_id: str) -> dict[str, Any]:
    return ok(client.post("/v1/citations/resolve", json={"id": record_id}))


def where_does_ann_work(client: httpx.Client) -> dict[str, Any]:
    return ok(
        client.post(
            "/v1/recalls",
            json={"question": "Where does Ann Lynch work?", "data_subject_id": "person-1"},
        )
    )


def ann_works_at(client: httpx.Client, company: str = "Ensera") -> dict[str, Any]:
    item = claim("Ann Lynch", "works_at", company, f"Ann Lynch works at {company}.")
    return assert_records(client, item)[0]


def test_recording_changes_nothing_else(live_server: LiveServer) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
        before = {
            "freshness": client.get("/v1/freshness").json(),
            "recall": where_does_ann_work(client),
            "records": ok(client.post("/v1/records/list", json={})),
            "history": ok(client.post("/v1/records/history", json={"id": record["id"]})),
            "citation": cite(client, record["id"]),
        }
        rows = ok(client.post("/v1/exports", json={"data_subject_id": "person-1"}))["rows"]
        written = report(client, record["id"], "She left Ensera last spring.", "Ensera Labs")
        assert set(written) == ITEM_KEYS | {"proposed_object"}
        assert written["record_id"] == record["id"]
        assert (written["note"], written["proposed_object"]) == (
            "She left Ensera last spring.",
            "Ensera Labs",
        )
        uuid.UUID(written["id"])
        uuid.UUID(written["recorded_by"])
        assert written["recorded_at"].endswith("Z")
        after = {
            "freshness": client.get("/v1/freshness").json(),
            "recall": where_does_ann_work(client),
            "records": ok(client.post("/v1/records/list", json={})),
            "history": ok(client.post("/v1/records/history", json={"id": record["id"]})),
            "citation": cite(client, record["id"]),
        }
        assert after == before
        assert [f["object"] for f in after["recall"]["facts"]] == ["Ensera"]
        exported = ok(client.post("/v1/exports", json={"data_subject_id": "person-1"}))
        assert exported["rows"] == {**rows, "feedback": 1}
        retraction = report(client, record["id"], "Not sure this was ever true.")
        assert set(retraction) == ITEM_KEYS
        assert listed(client)["feedback"] == [retraction, written]


def test_pages_follow_the_cursor_newest_first_even_after_an_erasure(
    live_server: LiveServer,
) -> None:
    with api(live_server) as client:
        ann = ann_works_at(client)
        bob = assert_records(
            client,
            claim("Bob", "works_at", "Acme", "Bob works at Acme.", data_subject_id="person-2"),
        )[0]
        targets = [ann, bob, ann, bob, ann]
        made = [report(client, t["id"], f"note {n}") for n, t in enumerate(targets)]
        newest = [f["id"] for f in reversed(made)]
        everything = listed(client, limit=100)
        assert [f["id"] for f in everything["feedback"]] == newest
        assert "next" not in everything
        assert [f["id"] for f in listed(client)["feedback"]] == newest  # default 20

        seen: list[str] = []
        page = listed(client, limit=2)
        while True:
            seen += [f["id"] for f in page["feedback"]]
            if "next" not in page:
                break
            assert set(page["next"]) == {"recorded_at", "id"}
            page = listed(client, limit=2, after=page["next"])
        assert seen == newest

        only_bob = listed(client, record_id=bob["id"])
        assert [f["id"] for f in only_bob["feedback"]] == [made[3]["id"], made[1]["id"]]
        first = listed(client, record_id=ann["id"], limit=2)
        assert [f["id"] for f in first["feedback"]] == [made[4]["id"], made[2]["id"]]
        rest = listed(client, record_id=ann["id"], limit=2, after=first["next"])
        assert [f["id"] for f in rest["feedback"]] == [made[0]["id"]]

        # An erasure removes rows behind and ahead of a cursor; the next page is still right.
        page = listed(client, limit=2)
        assert [f["id"] for f in page["feedback"]] == [made[4]["id"], made[3]["id"]]
        ok(client.post("/v1/erasures", json={"data_subject_id": "person-1"}))
        after = listed(client, limit=2, after=page["next"])
        assert [f["id"] for f in after["feedback"]] == [made[1]["id"]]
        assert "next" not in after
        assert [f["id"] for f in listed(client)["feedback"]] == [made[3]["id"], made[1]["id"]]
        assert listed(client, record_id=ann["id"])["feedback"] == []


def test_open_only_leaves_out_promoted_reports(live_server: LiveServer) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
        other = ann_works_at(client, "Acme")
        first = report(client, record["id"], "Wrong company.", "Ensera Labs")
        second = report(client, other["id"], "Never worked there.")
        ok(promote(client, first["id"], record["version"]))
        open_ = listed(client, open_only=True)
        assert [f["id"] for f in open_["feedback"]] == [second["id"]]
        assert [f["id"] for f in listed(client, open_only=False)["feedback"]] == [
            second["id"],
            first["id"],
        ]
        assert listed(client, record_id=record["id"], open_only=True)["feedback"] == []


def test_read_only_lists_but_neither_records_nor_promotes(live_server: LiveServer) -> None:
    with api(live_server) as writer, api(live_server, read_only=True) as reader:
        record = ann_works_at(writer)
        made = report(writer, record["id"], "Wrong company.")
        assert [f["id"] for f in listed(reader)["feedback"]] == [made["id"]]
        refused = reader.post(
            "/v1/feedback/record", json={"record_id": record["id"], "note": "Wrong."}
        )
        assert error(refused) == (403, "forbidden")
        assert error(promote(reader, made["id"], record["version"])) == (403, "forbidden")
        assert len(listed(writer)["feedback"]) == 1
        assert cite(writer, record["id"])["status"] == "current"


def test_promoting_a_proposed_object_corrects_the_record_for_the_promoter(
    live_server: LiveServer,
) -> None:
    with api(live_server) as reporter, api(live_server) as promoter:
        record = ann_works_at(reporter)
        made = report(reporter, record["id"], "Ann Lynch works at Ensera Labs now.", "Ensera Labs")
        answer = ok(promote(promoter, made["id"], record["version"]))
        assert set(answer) == PROMOTION_KEYS | {"replacement_record_id"}
        assert (answer["id"], answer["record_id"]) == (made["id"], record["id"])
        assert answer["operation"] == "record.correct"
        replacement = cite(promoter, answer["replacement_record_id"])
        assert replacement["version"] == answer["version"]
        assert replacement["statement"] == "Ann Lynch works at Ensera Labs now."
        assert replacement["status"] == "current"
        original = cite(promoter, record["id"])
        assert original["status"] == "retracted"
        assert [f["object"] for f in where_does_ann_work(promoter)["facts"]] == ["Ensera Labs"]

        promoted = listed(promoter)["feedback"][0]
        assert promoted["promoted_at"] == answer["promoted_at"]
        assert promoted["replacement_record_id"] == answer["replacement_record_id"]
        assert promoted["promoted_by"] != promoted["recorded_by"]
        # The new record is the promoter's, not the reporter's.
        assert replacement["evidence"][0]["authored_by"] == promoted["promoted_by"]
        history = ok(promoter.post("/v1/records/history", json={"id": record["id"]}))
        assert history["retraction"]["principal_id"] == promoted["promoted_by"]
        assert history["retraction"]["replacement_record_id"] == answer["replacement_record_id"]


def test_promoting_without_a_proposed_object_retracts_the_record(live_server: LiveServer) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
        made = report(client, record["id"], "This was never true.")
        answer = ok(promote(client, made["id"], record["version"]))
        assert set(answer) == PROMOTION_KEYS
        assert answer["operation"] == "record.retract"
        history = ok(client.post("/v1/records/history", json={"id": record["id"]}))
        assert history["version"] == answer["version"]
        assert history["retraction"]["retracted_at"] == answer["promoted_at"]
        assert cite(client, record["id"])["status"] == "retracted"
        assert where_does_ann_work(client)["facts"] == []
        promoted = listed(client)["feedback"][0]
        assert "replacement_record_id" not in promoted
        assert promoted["promoted_at"] == answer["promoted_at"]


def test_a_stale_version_is_a_record_conflict_and_the_report_stays_open(
    live_server: LiveServer,
) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
        made = report(client, record["id"], "Wrong company.", "Ensera Labs")
        assert error(promote(client, made["id"], str(uuid.uuid4()))) == (409, "record_conflict")
        assert "promoted_at" not in listed(client)["feedback"][0]
        assert cite(client, record["id"])["status"] == "current"

        # The record changed under the report: its old version no longer promotes it.
        other = report(client, record["id"], "Withdraw it.")
        ok(promote(client, other["id"], record["version"]))
        assert error(promote(client, made["id"], record["version"])) == (409, "record_conflict")
        closed = cite(client, record["id"])["version"]
        assert error(promote(client, made["id"], closed)) == (409, "record_conflict")
        assert [f["id"] for f in listed(client, open_only=True)["feedback"]] == [made["id"]]


def test_a_replacement_out_of_order_is_a_record_conflict_and_nothing_changes(
    live_server: LiveServer,
) -> None:
    """A proposed object replaces the record from now on. Correcting a later record of a
    single-valued predicate would overlap the earlier one it closed, so the promotion is refused
    whole."""
    with api(live_server) as client:
        past, future = assert_records(
            client,
            claim(
                "Ann Lynch",
                "lives_in",
                "Cork",
                "Ann lived in Cork.",
                valid_from="2020-01-01T00:00:00Z",
            ),
            claim(
                "Ann Lynch",
                "lives_in",
                "Galway",
                "Ann will live in Galway.",
                valid_from="2090-01-01T00:00:00Z",
            ),
        )
        before, earlier = cite(client, future["id"]), cite(client, past["id"])
        made = report(client, future["id"], "It will be Kerry.", "Kerry")
        answer = promote(client, made["id"], before["version"])
        assert error(answer) == (409, "record_conflict")
        assert "correct that record" in answer.json()["error"]["message"]
        assert cite(client, future["id"]) == before
        assert cite(client, past["id"]) == earlier
        assert [f["id"] for f in listed(client, open_only=True)["feedback"]] == [made["id"]]
        assert len(ok(client.post("/v1/records/list", json={}))["records"]) == 2


def test_a_second_promotion_is_refused(live_server: LiveServer) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
        made = report(client, record["id"], "Wrong company.", "Ensera Labs")
        answer = ok(promote(client, made["id"], record["version"]))
        again = promote(client, made["id"], record["version"])
        assert error(again) == (409, "feedback_already_promoted")
        # Even with the version the record has now (the replacement's), it is not applied twice.
        now = cite(client, record["id"])["version"]
        assert error(promote(client, made["id"], now)) == (409, "feedback_already_promoted")
        assert error(promote(client, made["id"], answer["version"])) == (
            409,
            "feedback_already_promoted",
        )
        records = ok(client.post("/v1/records/list", json={}))["records"]
        assert len(records) == 2  # the original and one replacement


def race(
    start: threading.Barrier,
    answers: list[httpx.Response],
    client: httpx.Client,
    feedback_id: str,
    version: str,
) -> None:
    """One racer: wait for the others, then promote."""
    start.wait()
    answers.append(promote(client, feedback_id, version))


def test_racing_promotions_promote_once(live_server: LiveServer) -> None:
    with api(live_server) as setup:
        cases = []
        for n in range(4):
            record = ann_works_at(setup, f"Company {n}")
            proposed = f"Company {n} Labs" if n % 2 else None
            cases.append((record, report(setup, record["id"], f"Wrong, {n}.", proposed)))
    racers = [api(live_server) for _ in range(2)]
    try:
        for record, made in cases:
            start = threading.Barrier(len(racers))
            answers: list[httpx.Response] = []

            threads = [
                threading.Thread(
                    target=race, args=(start, answers, client, made["id"], record["version"])
                )
                for client in racers
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            codes = sorted(a.status_code for a in answers)
            assert codes == [200, 409], [a.text for a in answers]
            lost = next(a for a in answers if a.status_code == 409)
            assert error(lost) == (409, "feedback_already_promoted")
            history = ok(racers[0].post("/v1/records/history", json={"id": record["id"]}))
            assert len(history["previous"]) == 1  # the record changed exactly once
        records = ok(racers[0].post("/v1/records/list", json={"limit": 100}))["records"]
        assert len(records) == len(cases) + 2  # two corrections added one replacement each
    finally:
        for client in racers:
            client.close()


LONG_NOTE = "é" * 8192 + "x"  # 16,385 bytes
RECORD_REFUSALS = [
    ({"note": "Wrong."}, "record_id", "is required"),
    ({"record_id": "not-a-uuid", "note": "Wrong."}, "record_id", "must be a UUID"),
    (
        {"record_id": "00000000-0000-0000-0000-000000000000", "note": "Wrong."},
        "record_id",
        "nil UUID",
    ),
    ({"record_id": "{id}"}, "note", "is required"),
    ({"record_id": "{id}", "note": " \t\n"}, "note", "blank"),
    ({"record_id": "{id}", "note": ""}, "note", "blank"),
    ({"record_id": "{id}", "note": "Wr\u0000ong."}, "note", "NUL"),
    ({"record_id": "{id}", "note": LONG_NOTE}, "note", "16384 UTF-8 bytes"),
    ({"record_id": "{id}", "note": "n", "proposed_object": ""}, "proposed_object", "blank"),
    ({"record_id": "{id}", "note": "n", "proposed_object": " "}, "proposed_object", "blank"),
    (
        {"record_id": "{id}", "note": "n", "proposed_object": "x" * 1025},
        "proposed_object",
        "1024 UTF-8 bytes",
    ),
    ({"record_id": "{id}", "note": "n", "proposed_object": "a\u0000"}, "proposed_object", "NUL"),
]
LIST_REFUSALS = [
    ({"limit": 0}, "limit", "at least 1"),
    ({"limit": 101}, "limit", "at most 100"),
    ({"record_id": "nope"}, "record_id", "must be a UUID"),
    ({"after": {"id": str(uuid.uuid4())}}, "after.recorded_at", "is required"),
    ({"after": {"recorded_at": "2026-01-01T00:00:00Z", "id": "x"}}, "after.id", "UUID"),
]
PROMOTE_REFUSALS = [
    ({"expected_version": "{version}"}, "id", "is required"),
    ({"id": "x", "expected_version": "{version}"}, "id", "must be a UUID"),
    ({"id": "{feedback}"}, "expected_version", "is required"),
    ({"id": "{feedback}", "expected_version": "v1"}, "expected_version", "must be a UUID"),
]


def _fill(body: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    return {
        k: v.format(**values) if isinstance(v, str) and "{" in v else v for k, v in body.items()
    }


@pytest.mark.parametrize(
    ("path", "body", "field", "words"),
    [("/v1/feedback/record", *case) for case in RECORD_REFUSALS]
    + [("/v1/feedback/list", *case) for case in LIST_REFUSALS]
    + [("/v1/feedback/promote", *case) for case in PROMOTE_REFUSALS],
)
def test_malformed_feedback_is_refused_naming_the_field(
    live_server: LiveServer, path: str, body: dict[str, Any], field: str, words: str
) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
        made = report(client, record["id"], "Wrong.", "Acme")
        values = {"id": record["id"], "version": record["version"], "feedback": made["id"]}
        answer = client.post(path, json=_fill(body, values))
        assert error(answer) == (400, "invalid_feedback"), answer.text
        message = answer.json()["error"]["message"]
        assert message.startswith(f"{field}: ") and words in message, message
        assert len(listed(client)["feedback"]) == 1
        assert "promoted_at" not in listed(client)["feedback"][0]


def test_unknown_or_foreign_records_and_reports_are_not_found(live_server: LiveServer) -> None:
    with api(live_server, "alpha") as alpha, api(live_server, "beta") as beta:
        record = ann_works_at(alpha)
        made = report(alpha, record["id"], "Wrong.", "Acme")
        for client, record_id in ((alpha, str(uuid.uuid4())), (beta, record["id"])):
            answer = client.post(
                "/v1/feedback/record", json={"record_id": record_id, "note": "Wrong."}
            )
            assert error(answer) == (404, "not_found")
        for client, feedback_id in ((alpha, str(uuid.uuid4())), (beta, made["id"])):
            assert error(promote(client, feedback_id, record["version"])) == (404, "not_found")
        assert listed(beta)["feedback"] == []
        assert listed(beta, record_id=record["id"])["feedback"] == []
        assert "promoted_at" not in listed(alpha)["feedback"][0]


def test_feedback_is_exported_and_erased_with_its_subject(live_server: LiveServer) -> None:
    with api(live_server) as client:
        ann = ann_works_at(client)
        bob = assert_records(
            client,
            claim("Bob", "works_at", "Acme", "Bob works at Acme.", data_subject_id="person-2"),
        )[0]
        corrected = report(client, ann["id"], "Ann moved to Ensera Labs.", "Ensera Labs")
        promotion = ok(promote(client, corrected["id"], ann["version"]))
        about_replacement = report(client, promotion["replacement_record_id"], "Doubtful.")
        about_bob = report(client, bob["id"], "Bob left Acme.")

        exported = ok(client.post("/v1/exports", json={"data_subject_id": "person-1"}))
        rows = exported["sections"]["feedback"]
        assert [r["id"] for r in rows] == [corrected["id"], about_replacement["id"]]
        assert rows[0]["note"] == "Ann moved to Ensera Labs."
        assert rows[0]["proposed_object"] == "Ensera Labs"
        assert rows[0]["fact_id"] == ann["id"]
        assert rows[0]["replacement_record_id"] == promotion["replacement_record_id"]
        assert all("project_id" not in r for r in rows)
        assert exported["rows"]["feedback"] == 2
        bobs = ok(client.post("/v1/exports", json={"data_subject_id": "person-2"}))
        assert [r["id"] for r in bobs["sections"]["feedback"]] == [about_bob["id"]]

        receipt = ok(client.post("/v1/erasures", json={"data_subject_id": "person-1"}))
        assert receipt["deleted"]["feedback"] == 2
        assert receipt["residual"]["feedback"] == 0
        assert receipt["clean"] is True
        assert receipt["deleted"] == exported["rows"]
        assert [f["id"] for f in listed(client)["feedback"]] == [about_bob["id"]]
        assert error(promote(client, corrected["id"], ann["version"])) == (404, "not_found")


def test_feedback_goes_with_an_erasure_of_the_record_source(live_server: LiveServer) -> None:
    with api(live_server) as client:
        ann = ann_works_at(client)
        kept = ann_works_at(client, "Acme")
        gone = report(client, ann["id"], "Wrong.")
        stays = report(client, kept["id"], "Also wrong.")
        by_source = {"source_observation_ids": [ann["source_observation_id"]]}
        exported = ok(client.post("/v1/exports", json=by_source))
        assert [r["id"] for r in exported["sections"]["feedback"]] == [gone["id"]]
        receipt = ok(client.post("/v1/erasures", json=by_source))
        assert (receipt["deleted"]["feedback"], receipt["residual"]["feedback"]) == (1, 0)
        assert [f["id"] for f in listed(client)["feedback"]] == [stays["id"]]


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", []) for node in _nodes(child))]


@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize(
    ("by_record", "open_only", "index"),
    [
        (False, True, "feedback_open"),
        (True, False, "feedback_record"),
        (True, True, "feedback_record"),
        (False, False, "feedback_page"),
    ],
)
def test_pages_read_an_index_in_page_order(
    live_server: LiveServer, by_record: bool, open_only: bool, after: bool, index: str
) -> None:
    with api(live_server) as client:
        record = ann_works_at(client)
    with psycopg.connect(live_server.database_url, autocommit=True) as conn:
        project = seed.project_id(conn, "alpha")
        # 2,000 records with 20 reports each and one with 5,000, a tenth of them promoted: the
        # busy record holds a ninth of the reports, so reading the open queue for it is plainly
        # dearer than reading its own index (at a third, the two costs lay within a few per cent
        # and the planner's choice turned on the random ids' order)
        conn.execute(
            "CREATE TEMP TABLE many AS SELECT gen_random_uuid() AS id FROM generate_series(1, 2000)"
        )
        conn.execute(
            "INSERT INTO facts (id, project_id, data_subject_id, subject_entity_id, predicate,"
            " object, statement, source_observation_id, version, valid_from)"
            " SELECT m.id, f.project_id, f.data_subject_id, f.subject_entity_id, f.predicate,"
            " f.object, f.statement, f.source_observation_id, gen_random_uuid(), f.valid_from"
            " FROM many m, facts f WHERE f.id = %s",
            (record["id"],),
        )
        conn.execute(
            "INSERT INTO feedback (id, project_id, fact_id, note, recorded_by, recorded_at,"
            " promoted_by, promoted_at)"
            " SELECT gen_random_uuid(), %s, m.id, 'n', gen_random_uuid(),"
            " now() - n * interval '1 second', CASE WHEN n %% 10 = 0 THEN gen_random_uuid() END,"
            " CASE WHEN n %% 10 = 0 THEN now() END FROM many m, generate_series(1, 20) n",
            (project,),
        )
        conn.execute(
            "INSERT INTO feedback (id, project_id, fact_id, note, recorded_by, recorded_at,"
            " promoted_by, promoted_at)"
            " SELECT gen_random_uuid(), %s, %s, 'n', gen_random_uuid(),"
            " now() - n * interval '1 second', CASE WHEN n %% 10 = 0 THEN gen_random_uuid() END,"
            " CASE WHEN n %% 10 = 0 THEN now() END FROM generate_series(1, 5000) n",
            (project, record["id"]),
        )
        conn.execute("ANALYZE feedback")
        hot = uuid.UUID(record["id"])
        params = {"p": project, "f": hot, "at": "2100-01-01T00:00:00Z", "id": hot, "n": 21}
        sql = page_sql(by_record=by_record, open_only=open_only, after=after)
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()
    assert row is not None
    nodes = _nodes(row[0][0]["Plan"])
    assert nodes[0]["Node Type"] == "Limit"
    assert not [n for n in nodes if "Sort" in n["Node Type"] or n["Node Type"] == "Seq Scan"]
    assert [n.get("Index Name") for n in nodes if "Index Name" in n] == [index]


class Promotions(RuleBasedStateMachine):
    """Reports recorded and promoted against a model: a report is open until its one promotion;
    a promotion needs the record's current version and an open record (else 409 record_conflict,
    the report staying open); a second is 409 feedback_already_promoted; nothing else changes."""

    server: LiveServer

    def __init__(self) -> None:
        super().__init__()
        self.http = api(self.server, f"p{uuid.uuid4().hex[:12]}")
        self.current: dict[str, str] = {}  # open record id -> its version
        self.reports: dict[str, tuple[str, bool]] = {}  # report -> (record, proposes an object)
        self.promoted: set[str] = set()

    records = Bundle("records")
    made = Bundle("made")

    def new_record(self, company: str) -> str:
        record = ann_works_at(self.http, company)
        self.current[record["id"]] = record["version"]
        return str(record["id"])

    @initialize(target=records)
    def a_record(self) -> str:
        return self.new_record("Ensera")

    @rule(target=records, company=st.sampled_from(["Acme", "Ensera"]))
    def another_record(self, company: str) -> str:
        return self.new_record(company)

    @rule(target=made, record=records, proposes=st.booleans())
    def record_feedback(self, record: str, proposes: bool) -> str:
        written = report(self.http, record, "Wrong.", "Ensera Labs" if proposes else None)
        self.reports[written["id"]] = (record, proposes)
        return str(written["id"])

    @rule(feedback=made, stale=st.booleans())
    def promote(self, feedback: str, stale: bool) -> None:
        record, proposes = self.reports[feedback]
        if stale:
            version = str(uuid.uuid4())
        else:  # the version the record has now, closed or not
            version = self.current.get(record) or cite(self.http, record)["version"]
        answer = promote(self.http, feedback, version)
        if feedback in self.promoted:
            assert error(answer) == (409, "feedback_already_promoted")
        elif stale or record not in self.current:
            assert error(answer) == (409, "record_conflict")
        else:
            promotion = ok(answer)
            self.promoted.add(feedback)
            del self.current[record]
            assert promotion["operation"] == ("record.correct" if proposes else "record.retract")
            if proposes:
                self.current[promotion["replacement_record_id"]] = promotion["version"]

    @invariant()
    def the_queue_is_the_model(self) -> None:
        every = listed(self.http, limit=100)["feedback"]
        assert {f["id"] for f in every} == set(self.reports)
        assert {f["id"] for f in every if "promoted_at" in f} == self.promoted
        open_ = listed(self.http, open_only=True, limit=100)["feedback"]
        assert {f["id"] for f in open_} == set(self.reports) - self.promoted

    @invariant()
    def only_promotions_change_records(self) -> None:
        rows = ok(self.http.post("/v1/records/list", json={"limit": 100}))["records"]
        current = {r["id"]: r["version"] for r in rows if r["status"] == "current"}
        assert current == self.current

    def teardown(self) -> None:
        self.http.close()


def test_a_report_is_promoted_at_most_once(live_server: LiveServer) -> None:
    Promotions.server = live_server
    run_state_machine_as_test(
        Promotions,
        settings=settings(
            max_examples=12, stateful_step_count=10, deadline=None, derandomize=True, database=None
        ),
    )
