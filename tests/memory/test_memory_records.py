"""Authored records over real HTTP: assert, correct, retract, list, history."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
from memory_kit import LiveServer
from records_kit import api, assert_records, claim, error, stored


def test_assert_writes_a_curated_source_per_item_and_replays(live_server: LiveServer) -> None:
    with api(live_server) as client:
        assert stored(client) is None
        first = claim("Marta", "works_at", "Ensera", "Marta works at Ensera.")
        second = claim("Marta", "speaks", "Irish", "Marta speaks Irish.")
        receipts = assert_records(client, first, second)
        assert [r["replayed"] for r in receipts] == [False, False]
        freshness = client.get("/v1/freshness").json()
        assert (freshness["stored"], freshness["formed"]) == (1, 1)

        again = assert_records(client, first, second)
        assert [r["replayed"] for r in again] == [True, True]
        assert [r["id"] for r in again] == [r["id"] for r in receipts]
        assert [r["source_observation_id"] for r in again] == [
            r["source_observation_id"] for r in receipts
        ]
        assert stored(client) == 1

        changed = {**first, "statement": "Marta works at Ensera, in Dublin."}
        refused = client.post("/v1/records/assert", json={"records": [changed]})
        assert error(refused) == (409, "idempotency_conflict")
        assert stored(client) == 1

        # The source observation holds the statement as one user message.
        source = receipts[0]["source_observation_id"]
        with psycopg.connect(live_server.database_url) as conn:
            row = conn.execute(
                "SELECT o.kind, o.formed_at IS NOT NULL, m.role, m.content FROM observations o"
                " JOIN messages m ON m.observation_id = o.id WHERE o.id = %s",
                (source,),
            ).fetchone()
        assert row == ("curated", True, "user", "Marta works at Ensera.")

        # Once the source is erased (its key left as a tombstone), the key stays refused.
        with psycopg.connect(live_server.database_url) as conn:
            conn.execute(
                "UPDATE retry_keys SET observation_id = NULL, fingerprint = ''::bytea"
                " WHERE observation_id = %s",
                (source,),
            )
            conn.execute("DELETE FROM facts WHERE source_observation_id = %s", (source,))
        refused = client.post("/v1/records/assert", json={"records": [first]})
        assert error(refused) == (409, "idempotency_conflict")


def test_assert_refuses_what_the_contract_refuses(live_server: LiveServer) -> None:
    good = claim("Marta", "works_at", "Ensera", "Marta works at Ensera.")
    key = str(uuid.uuid4())
    bad_batches = [
        [],
        [claim("Marta", "works_at", f"E{i}", "s") for i in range(21)],
        [{**good, "idempotency_key": "not-a-uuid"}],
        [{**good, "idempotency_key": str(uuid.uuid4()).replace("-", "")}],
        [{**good, "idempotency_key": key}, {**good, "idempotency_key": key}],
        [{**good, "predicate": "admires"}],
        [{**good, "statement": "   "}],
        [{**good, "object": "x" * 1025}],
        [{**good, "subject": "Mar\u0000ta"}],
        [{**good, "subject": "She"}],
        [{**good, "data_subject_id": " "}],
        [{key: value for key, value in good.items() if key != "statement"}],
    ]
    with api(live_server) as client:
        for batch in bad_batches:
            answer = client.post("/v1/records/assert", json={"records": batch})
            assert error(answer) == (400, "invalid_record_mutation"), batch
        assert error(client.post("/v1/records/assert", json={})) == (
            400,
            "invalid_record_mutation",
        )
        wrong_type = {**good, "valid_from": "yesterday"}
        answer = client.post("/v1/records/assert", json={"records": [wrong_type]})
        assert error(answer) == (400, "invalid_body")
        assert stored(client) is None
    with api(live_server, read_only=True) as reader:
        answer = reader.post("/v1/records/assert", json={"records": [good]})
        assert error(answer) == (403, "forbidden")


def test_single_valued_predicates_supersede_and_many_valued_accumulate(
    live_server: LiveServer,
) -> None:
    with api(live_server) as client:
        (paris,) = assert_records(
            client,
            claim(
                "Marta",
                "lives_in",
                "Paris",
                "Marta lives in Paris.",
                valid_from="2020-01-01T00:00:00Z",
            ),
        )
        (rome, ensera, acme) = assert_records(
            client,
            claim(
                "marta ",
                "lives_in",
                "Rome",
                "Marta lives in Rome.",
                valid_from="2023-01-01T00:00:00Z",
            ),
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim("Marta", "works_at", "Acme", "Marta works at Acme."),
        )
        # Another person's "one" fact is not superseded.
        (other,) = assert_records(
            client,
            claim("Marta", "lives_in", "Oslo", "Marta lives in Oslo.", data_subject_id="person-2"),
        )
        statuses = {
            r["id"]: r["status"] for r in client.post("/v1/records/list", json={}).json()["records"]
        }
        assert statuses == {
            paris["id"]: "validity_closed",
            rome["id"]: "current",
            ensera["id"]: "current",
            acme["id"]: "current",
            other["id"]: "current",
        }
        history = client.post("/v1/records/history", json={"id": paris["id"]}).json()
        assert history["version"] != paris["version"]
        assert history["current"]["valid"]["until"] == "2023-01-01T00:00:00Z"
        assert history["current"]["known"]["until"] is None
        (previous,) = history["previous"]
        assert previous["valid"] == {
            "from": "2020-01-01T00:00:00Z",
            "until": None,
            "from_inclusive": True,
            "until_inclusive": False,
        }
        assert previous["ended_by_observation_id"] == rome["source_observation_id"]
        assert "retraction" not in history and "next" not in history

        # An older "one" fact asserted later is out of order: refused, nothing changes.
        before = client.post("/v1/records/list", json={}).json()
        answer = client.post(
            "/v1/records/assert",
            json={
                "records": [
                    claim(
                        "Marta",
                        "lives_in",
                        "Rome",
                        "Marta lives in Rome.",
                        valid_from="2019-01-01T00:00:00Z",
                    )
                ]
            },
        )
        assert error(answer) == (409, "record_conflict")
        assert client.post("/v1/records/list", json={}).json() == before


def test_retract_checks_versions_and_closes_knowledge(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (fact,) = assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works at E."))
        stale = {"id": fact["id"], "expected_version": str(uuid.uuid4())}
        answer = client.post("/v1/records/retract", json={"records": [stale]})
        assert error(answer) == (409, "record_conflict")
        unknown = {"id": str(uuid.uuid4()), "expected_version": fact["version"]}
        answer = client.post("/v1/records/retract", json={"records": [unknown]})
        assert error(answer) == (404, "not_found")
        for bad in (
            [],
            [{"id": "nope", "expected_version": fact["version"]}],
            [{"id": str(uuid.UUID(int=0)), "expected_version": fact["version"]}],
            [{"id": fact["id"], "expected_version": fact["version"]}] * 2,
        ):
            answer = client.post("/v1/records/retract", json={"records": bad})
            assert error(answer) == (400, "invalid_record_mutation")
        offsets = stored(client)

        item = {"id": fact["id"], "expected_version": fact["version"]}
        (done,) = client.post("/v1/records/retract", json={"records": [item]}).json()["records"]
        assert done["id"] == fact["id"] and done["version"] != fact["version"]
        assert uuid.UUID(done["operation_id"]) and uuid.UUID(done["principal_id"])
        assert "replacement_record_id" not in done
        assert stored(client) == offsets

        answer = client.post("/v1/records/retract", json={"records": [item]})
        assert error(answer) == (409, "record_conflict")
        again = {"id": fact["id"], "expected_version": done["version"]}
        answer = client.post("/v1/records/retract", json={"records": [again]})
        assert error(answer) == (409, "record_conflict")

        (row,) = client.post("/v1/records/list", json={}).json()["records"]
        assert row["status"] == "retracted" and row["version"] == done["version"]
        history = client.post("/v1/records/history", json={"id": fact["id"]}).json()
        assert history["retraction"] == done
        assert history["current"]["known"]["until"] == done["retracted_at"]
    with api(live_server, read_only=True) as reader:
        answer = reader.post("/v1/records/retract", json={"records": [again]})
        assert error(answer) == (403, "forbidden")


def test_correct_replaces_a_record_atomically(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (fact, other) = assert_records(
            client,
            claim("Marta", "works_at", "Ensera", "Marta works at Ensera."),
            claim("Marta", "speaks", "Irish", "Marta speaks Irish."),
        )
        offsets = stored(client)
        item = {
            "id": fact["id"],
            "expected_version": fact["version"],
            "object": "Ensera Labs",
            "statement": "Marta works at Ensera Labs.",
        }
        # One bad item refuses the whole batch.
        stale = {**item, "id": other["id"], "expected_version": str(uuid.uuid4())}
        answer = client.post("/v1/records/correct", json={"records": [item, stale]})
        assert error(answer) == (409, "record_conflict")
        missing = {**item, "id": str(uuid.uuid4())}
        answer = client.post("/v1/records/correct", json={"records": [stale, missing]})
        assert error(answer) == (404, "not_found")
        answer = client.post("/v1/records/correct", json={"records": [{**item, "object": ""}]})
        assert error(answer) == (400, "invalid_record_mutation")
        assert stored(client) == offsets

        answer = client.post("/v1/records/correct", json={"records": [item]})
        assert answer.status_code == 200, answer.text
        (done,) = answer.json()["records"]
        assert done["original_id"] == fact["id"] and done["id"] != fact["id"]
        assert stored(client) == (offsets or 0) + 1

        rows = {r["id"]: r for r in client.post("/v1/records/list", json={}).json()["records"]}
        assert rows[fact["id"]]["status"] == "retracted"
        replacement = rows[done["id"]]
        assert replacement["status"] == "current"
        assert replacement["predicate"] == "works_at"
        assert replacement["subject_entity_id"] == rows[fact["id"]]["subject_entity_id"]
        assert replacement["statement_preview"] == "Marta works at Ensera Labs."

        history = client.post("/v1/records/history", json={"id": fact["id"]}).json()
        assert history["retraction"]["replacement_record_id"] == done["id"]
        assert (
            history["retraction"]["replacement_source_observation_id"]
            == done["source_observation_id"]
        )
        # The corrected record is closed: correcting it again conflicts.
        item["expected_version"] = history["version"]
        answer = client.post("/v1/records/correct", json={"records": [item]})
        assert error(answer) == (409, "record_conflict")


def test_changes_to_records_with_too_much_evidence_are_refused(live_server: LiveServer) -> None:
    with api(live_server) as client:
        (fact,) = assert_records(client, claim("Marta", "works_at", "Ensera", "Marta works."))
        with psycopg.connect(live_server.database_url) as conn:
            conn.execute(
                "INSERT INTO fact_evidence (fact_id, observation_id, source_ordinal, quote,"
                " byte_start, byte_end) SELECT %s, %s, n, 'Marta', 0, 5"
                " FROM generate_series(1, 128) n",
                (fact["id"], fact["source_observation_id"]),
            )
        item = {"id": fact["id"], "expected_version": fact["version"]}
        answer = client.post("/v1/records/retract", json={"records": [item]})
        assert error(answer) == (413, "record_mutation_limit")


def test_list_pages_and_history_validation(live_server: LiveServer) -> None:
    with api(live_server) as client:
        receipts = assert_records(
            client,
            *[claim("Marta", "knows", f"P{i}", f"Marta knows P{i}.") for i in range(3)],
            claim("Olga", "knows", "Marta", "Olga knows Marta.", data_subject_id="person-2"),
        )
        first = client.post("/v1/records/list", json={"limit": 3}).json()
        assert len(first["records"]) == 3
        second = client.post("/v1/records/list", json={"after": first["next"], "limit": 3}).json()
        assert len(second["records"]) == 1 and "next" not in second
        listed = [r["id"] for r in first["records"] + second["records"]]
        assert listed == sorted(r["id"] for r in receipts)
        mine = client.post("/v1/records/list", json={"data_subject_id": "person-2"}).json()
        assert [r["id"] for r in mine["records"]] == [receipts[3]["id"]]
        record = mine["records"][0]
        assert record["statement_bytes"] == len("Olga knows Marta.")
        assert record["preview_truncated"] is False and record["source_role"] == "user"
        for body in (
            {"limit": 101},
            {"limit": -1},
            {"after": {"id": "x"}},
            {"data_subject_id": "  "},
        ):
            answer = client.post("/v1/records/list", json=body)
            assert error(answer) == (400, "invalid_record_page"), body
        for body in (
            {},
            {"id": "x"},
            {"id": receipts[0]["id"], "limit": 500},
            {"id": receipts[0]["id"], "before": {"history_id": str(uuid.uuid4())}},
        ):
            answer = client.post("/v1/records/history", json=body)
            assert error(answer) == (400, "invalid_record_page"), body
        answer = client.post("/v1/records/history", json={"id": str(uuid.uuid4())})
        assert error(answer) == (404, "not_found")


def test_history_pages_newest_change_first(live_server: LiveServer) -> None:
    with api(live_server) as client:
        for year in (2020, 2021, 2022):
            assert_records(
                client,
                claim(
                    "Marta",
                    "has_role",
                    f"role {year}",
                    f"Marta became role {year}.",
                    valid_from=f"{year}-01-01T00:00:00Z",
                ),
            )
        rows = client.post("/v1/records/list", json={}).json()["records"]
        by_text = {r["statement_preview"]: r["id"] for r in rows}
        # 2020's record changed once (closed by 2021); 2021's once (closed by 2022).
        first = by_text["Marta became role 2020."]
        page = client.post("/v1/records/history", json={"id": first, "limit": 1}).json()
        assert len(page["previous"]) == 1 and "next" not in page
        with psycopg.connect(live_server.database_url) as conn:
            conn.execute(
                "INSERT INTO fact_history (id, fact_id, valid_from, known_from, known_until)"
                " SELECT gen_random_uuid(), %s, '2020-01-01', now() - interval '2 days',"
                " now() - interval '1 day'",
                (first,),
            )
        page = client.post("/v1/records/history", json={"id": first, "limit": 1}).json()
        newest = page["previous"][0]
        rest = client.post(
            "/v1/records/history", json={"id": first, "limit": 1, "before": page["next"]}
        ).json()
        assert len(rest["previous"]) == 1 and "next" not in rest
        older = rest["previous"][0]
        assert older["known"]["until"] < newest["known"]["until"]


def test_records_are_invisible_to_other_projects(live_server: LiveServer) -> None:
    with api(live_server, "alpha") as alpha, api(live_server, "beta") as beta:
        (fact,) = assert_records(alpha, claim("Marta", "works_at", "Ensera", "Marta works."))
        item = {"id": fact["id"], "expected_version": fact["version"]}
        answer = beta.post("/v1/records/retract", json={"records": [item]})
        assert error(answer) == (404, "not_found")
        correction = {**item, "object": "Acme", "statement": "Marta works at Acme."}
        answer = beta.post("/v1/records/correct", json={"records": [correction]})
        assert error(answer) == (404, "not_found")
        answer = beta.post("/v1/records/history", json={"id": fact["id"]})
        assert error(answer) == (404, "not_found")
        assert beta.post("/v1/records/list", json={}).json() == {"records": []}
        # The same retry key in another project is another key.
        first = claim("Marta", "works_at", "Acme", "Marta works at Acme.")
        (mine,) = assert_records(beta, first)
        assert mine["replayed"] is False
        (theirs,) = assert_records(alpha, {**first, "statement": "Marta works at Acme now."})
        assert theirs["replayed"] is False
        assert stored(beta) == 0 and stored(alpha) == 1


def test_concurrent_asserts_with_one_key_make_one_record(live_server: LiveServer) -> None:
    item = claim("Marta", "works_at", "Ensera", "Marta works at Ensera.")
    with api(live_server) as client:

        def attempt(_: int) -> tuple[int, str]:
            answer = client.post("/v1/records/assert", json={"records": [item]})
            return answer.status_code, answer.json()["records"][0]["id"]

        with ThreadPoolExecutor(max_workers=6) as pool:
            results = list(pool.map(attempt, range(6)))
        assert {status for status, _ in results} == {200}
        assert len({fact_id for _, fact_id in results}) == 1
        assert stored(client) == 0
        assert len(client.post("/v1/records/list", json={}).json()["records"]) == 1
