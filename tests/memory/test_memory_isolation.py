"""Tenancy: a project's token never reads, changes, erases or learns of another project's data,
and `data_subject_id` narrows every read to one person."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import httpx
import memory_seed as seed
import psycopg
from memory_kit import LiveServer
from memory_world import ANN, BOB, World, client, observe

ALPHA_MARKERS = ["Ann-marker", "Ann-record", "Ann-correction", "Ann Lynch", "Ann-label", "Bob-"]
ALPHA_ONLY = "person-only-in-alpha"
VOLATILE = {"request_id", "completed_at", "source_observation_ids", "data_subject_id"}


def same_answer(first: httpx.Response, second: httpx.Response) -> None:
    """Two answers alike but for ids the caller sent and per-call stamps."""
    assert first.status_code == second.status_code, (first.text, second.text)
    one, two = first.json(), second.json()
    if isinstance(one, dict) and "error" not in one:
        one = {k: v for k, v in one.items() if k not in VOLATILE}
        two = {k: v for k, v in two.items() if k not in VOLATILE}
    assert one == two


class Probe:
    """Beta's token, recording every answer it gets."""

    def __init__(self, server: LiveServer) -> None:
        self.http = client(server, server.token("beta"))
        self.texts: list[str] = []

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        answer = self.http.post(path, json=body)
        assert answer.status_code < 500, (path, answer.text)
        told = answer.text
        for sent in sorted(strings(body), key=len, reverse=True):  # echoes are not leaks
            told = told.replace(sent, "")
        self.texts.append(told)
        return answer

    def both(self, path: str, alpha: dict[str, Any], missing: dict[str, Any]) -> httpx.Response:
        """Ask about alpha's thing and about one that never existed: the answers match."""
        seen, unseen = self.post(path, alpha), self.post(path, missing)
        same_answer(seen, unseen)
        return seen


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


def fresh() -> str:
    return str(uuid.uuid4())


def test_another_projects_token_sees_nothing_on_any_endpoint(live_server: LiveServer) -> None:
    alpha = World(live_server)
    only = observe(alpha.http, ALPHA_ONLY, "Ann-marker-only a person only alpha knows")
    message_id = alpha.export(data_subject_id=ANN)["sections"]["message"][0]["id"]
    before = alpha.export(data_subject_id=ANN)["rows"]
    beta = Probe(live_server)
    beta_turn = observe(beta.http, ANN, "beta-marker Ann as beta knows her")

    # lookups by id answer exactly as for an id that never existed
    beta.both("/v1/messages/get", {"chunk_id": message_id}, {"chunk_id": fresh()})
    beta.both("/v1/citations/resolve", {"id": alpha.record["id"]}, {"id": fresh()})
    beta.both("/v1/citations/resolve", {"id": alpha.correction["id"]}, {"id": fresh()})
    beta.both("/v1/records/history", {"id": alpha.record["id"]}, {"id": fresh()})
    for path in ("/v1/records/correct", "/v1/records/retract"):
        change: dict[str, Any] = {"expected_version": alpha.correction["version"]}
        if path.endswith("correct"):
            change |= {"object": "Elsewhere", "statement": "beta-marker moved"}
        assert (
            beta.both(
                path,
                {"records": [{"id": alpha.correction["id"], **change}]},
                {"records": [{"id": fresh(), **change}]},
            ).status_code
            == 404
        )
    for subject in ({}, {"data_subject_id": ANN}):
        beta.both(
            "/v1/artifacts/get", {"id": alpha.artifact, **subject}, {"id": fresh(), **subject}
        )
    versions = alpha.http.post("/v1/artifacts/get", json={"id": alpha.artifact}).json()
    beta.both(
        "/v1/artifacts/delete",
        {"id": alpha.artifact, "expected_version": versions["version"]},
        {"id": fresh(), "expected_version": versions["version"]},
    )
    beta.both("/v1/subjects/get", {"id": alpha.registry}, {"id": fresh()})
    beta.both("/v1/subjects/get", {"external_reference": ANN}, {"external_reference": "nobody"})
    registry = alpha.http.post("/v1/subjects/get", json={"id": alpha.registry}).json()
    beta.both(
        "/v1/subjects/update",
        {"id": alpha.registry, "expected_version": registry["version"], "label": "beta-marker"},
        {"id": fresh(), "expected_version": registry["version"], "label": "beta-marker"},
    )

    # erasure and export of alpha's turns or alpha's people match nothing
    beta.both(
        "/v1/exports",
        {"source_observation_ids": alpha.ann_turns},
        {"source_observation_ids": [fresh() for _ in alpha.ann_turns]},
    )
    beta.both("/v1/exports", {"data_subject_id": ALPHA_ONLY}, {"data_subject_id": "nobody"})
    beta.both(
        "/v1/erasures",
        {"source_observation_ids": [*alpha.ann_turns, only]},
        {"source_observation_ids": [fresh() for _ in range(4)]},
    )
    beta.both("/v1/erasures", {"data_subject_id": ALPHA_ONLY}, {"data_subject_id": "nobody"})

    # reads about alpha's people and names find nothing
    question = "Where does Ann Lynch work? Ensera or Ensera Labs, Cork?"
    for subject in ({}, {"data_subject_id": ANN}, {"data_subject_id": ALPHA_ONLY}):
        recall = beta.post("/v1/recalls", {"question": question, **subject}).json()
        assert (recall["anchors"], recall["facts"]) == ([], [])
        assert recall["reach"]["anchored"] == 0
        passages = beta.post("/v1/passages/search", {"question": question, **subject})
        assert passages.status_code in (200, 503)
    beta.both("/v1/contexts", {"data_subject_id": ALPHA_ONLY}, {"data_subject_id": "nobody"})
    context = beta.post("/v1/contexts", {"data_subject_id": ANN}).json()
    assert [t["messages"][0]["content"] for t in context["turns"]] == [
        "beta-marker Ann as beta knows her"
    ]
    assert beta.post("/v1/records/list", {}).json()["records"] == []
    assert beta.post("/v1/records/list", {"data_subject_id": ANN}).json()["records"] == []
    assert beta.post("/v1/artifacts/list", {}).json()["artifacts"] == []
    assert beta.post("/v1/artifacts/list", {"data_subject_id": ANN}).json()["artifacts"] == []
    assert beta.post("/v1/subjects/list", {}).json()["subjects"] == []
    exported = beta.post("/v1/exports", {"data_subject_id": ANN}).json()
    assert [o["id"] for o in exported["sections"]["observation"]] == [beta_turn]

    # alpha's keys and ids are free in beta: writes there create beta's own things
    freshness = beta.http.get("/v1/freshness").json()
    assert (freshness["scope"], freshness["stored"]) == ("beta", 0)
    replay = beta.http.post(
        "/v1/observations",
        json={
            "idempotency_key": alpha.key,
            "data_subject_id": ANN,
            "messages": [{"role": "user", "content": "Ann-marker-1 I work at Ensera."}],
        },
    )
    assert replay.status_code == 201
    assert replay.json()["id"] not in alpha.ann_turns
    assert replay.json()["log_offset"] == 1
    record = beta.post(
        "/v1/records/assert",
        {
            "records": [
                {
                    "idempotency_key": alpha.record_key,
                    "data_subject_id": ANN,
                    "subject": "Ann Lynch",
                    "predicate": "works_at",
                    "object": "Ensera",
                    "statement": "Ann-record works at Ensera",
                }
            ]
        },
    ).json()["records"][0]
    assert record["replayed"] is False
    assert record["id"] not in (alpha.record["id"], alpha.correction["id"])
    put = beta.post(
        "/v1/artifacts/put",
        {"id": alpha.artifact, "data_subject_id": ANN, "kind": "state", "content": "YmV0YQ=="},
    )
    assert put.status_code == 200
    assert put.json()["replayed"] is False
    registered = beta.post(
        "/v1/subjects/register",
        {"idempotency_key": alpha.registration_key, "external_reference": ANN, "label": "beta"},
    )
    assert registered.status_code == 200
    assert registered.json()["id"] != alpha.registry
    assert registered.json()["replayed"] is False

    # nothing beta was told mentions alpha's data, and alpha's data is as it was
    alpha_ids = [message_id, alpha.record["id"], alpha.correction["id"], alpha.registry, only]
    for text in beta.texts:
        for marker in [*ALPHA_MARKERS, *alpha_ids, *alpha.ann_turns]:
            assert marker not in text, marker
    assert alpha.export(data_subject_id=ANN)["rows"] == before
    assert alpha.http.get("/v1/freshness").json()["stored"] == 9
    artifact = alpha.http.post("/v1/artifacts/get", json={"id": alpha.artifact}).json()
    assert base64.b64decode(artifact["content"]) == b"Ann-artifact-bytes"


def recall_facts(http: httpx.Client, question: str, subject: str | None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"question": question}
    if subject is not None:
        body["data_subject_id"] = subject
    answer = http.post("/v1/recalls", json=body)
    assert answer.status_code == 200, answer.text
    facts: list[dict[str, Any]] = answer.json()["facts"]
    return facts


def test_a_data_subject_narrows_every_read(live_server: LiveServer) -> None:
    world = World(live_server)
    http = world.http
    question = "Who works at Ensera? Ann Lynch?"
    assert {f["statement"] for f in recall_facts(http, question, ANN)} >= {
        "Ann-correction works at Ensera Labs"
    }
    bob_facts = recall_facts(http, question, BOB)
    assert [f["statement"] for f in bob_facts] == ["Bob-record works at Ensera"]
    context = http.post("/v1/contexts", json={"data_subject_id": BOB}).json()
    contents = [m["content"] for t in context["turns"] for m in t["messages"]]
    assert "Bob-marker-1 I work at Ensera too." in contents
    assert all(c.startswith("Bob-") for c in contents)
    records = http.post("/v1/records/list", json={"data_subject_id": BOB}).json()["records"]
    assert [r["id"] for r in records] == [world.bob_record["id"]]
    hidden = http.post("/v1/artifacts/get", json={"id": world.artifact, "data_subject_id": BOB})
    assert hidden.status_code == 404
    assert http.post("/v1/artifacts/list", json={"data_subject_id": BOB}).json()["artifacts"] == []
    exported = http.post("/v1/exports", json={"data_subject_id": BOB}).text
    assert "Ann" not in exported
    passages = http.post("/v1/passages/search", json={"question": "Ensera", "data_subject_id": BOB})
    assert passages.status_code in (200, 503)
    assert "Ann" not in passages.text


def test_erasing_a_person_in_one_project_spares_the_same_id_in_another(
    live_server: LiveServer,
) -> None:
    alpha = World(live_server, "alpha")
    beta = World(live_server, "beta")
    beta_rows = beta.export(data_subject_id=ANN)["rows"]
    receipt = alpha.erase(data_subject_id=ANN).json()
    assert receipt["clean"] is True
    assert receipt["deleted"]["observation"] == beta_rows["observation"]
    assert beta.export(data_subject_id=ANN)["rows"] == beta_rows
    assert alpha.export(data_subject_id=ANN)["rows"] == {k: 0 for k in beta_rows}
    with psycopg.connect(live_server.database_url) as conn:
        left = conn.execute(
            "SELECT p.name, count(*) FROM observations o JOIN projects p ON p.id = o.project_id"
            " WHERE o.data_subject_id = %s GROUP BY p.name",
            (ANN,),
        ).fetchall()
        assert left == [("beta", beta_rows["observation"])]
        assert seed.traces(conn, [*alpha.ann_turns, str(alpha.formed_fact)]) == {}
