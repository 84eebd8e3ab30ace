"""A project with old and new turns of two people, every kind of row derived from the old ones,
and what each read of the memory API shows of them; for the retention tests."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import datetime, timedelta

import httpx
import memory_seed as seed
import psycopg
from memory_kit import Letters, LiveServer
from memory_world import client, observe

from satchel.memory.config import MemorySettings
from satchel.memory.formation.worker import Worker

ANN = "person-ann-retained"
BOB = "person-bob-retained"
OLD = "Oldmarker"  # in every old turn, and so in everything derived from them
NEW = "Newmarker"


def worker_pass(url: str, settings: MemorySettings) -> None:
    async def run() -> None:
        worker = Worker(url, settings, embedder=Letters())
        try:
            await worker.run_once()
        finally:
            await worker.close()

    asyncio.run(run())


class Garden:
    """Project alpha: Ann's two old turns (stored `age` days ago, with a fact, a segment, their
    vectors and lexeme counts) and a new one; Bob's new turn."""

    def __init__(self, server: LiveServer, age: float) -> None:
        self.url = server.database_url
        self.http = client(server, server.token("alpha"))
        self.old = [
            observe(self.http, ANN, f"{OLD}-1 my heron is called Quill and she fishes."),
            observe(self.http, ANN, f"{OLD}-2 the heron Quill lives by the canal."),
        ]
        self.new = [
            observe(self.http, ANN, f"{NEW}-1 my heron moved to the lake."),
            observe(self.http, BOB, f"{NEW}-2 Bob keeps a heron too."),
        ]
        worker_pass(self.url, MemorySettings().for_worker())
        with psycopg.connect(self.url, autocommit=True) as conn:
            project = seed.project_id(conn, "alpha")
            self.fact = seed.fact(conn, project, ANN, self.old[0], ("Ann", "Quill"), "owns")
            self.segment = seed.segment(conn, project, ANN, self.old, f"{OLD}-summary")
            conn.execute(
                "UPDATE observations SET stored_at = stored_at - %s WHERE id = ANY(%s::uuid[])",
                (timedelta(days=age), self.old),
            )
        assert self.vectors(self.old) == 2  # the worker embedded the old turns' messages

    def through(self, http: httpx.Client) -> Garden:
        """The same garden read through another client."""
        other = copy.copy(self)
        other.http = http
        return other

    def vectors(self, turns: list[str]) -> int:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM message_vectors v JOIN messages m ON m.id = v.message_id"
                " WHERE m.observation_id = ANY(%s::uuid[])",
                (turns,),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def stored(self, turns: list[str]) -> int:
        """How many of `turns` the database still holds."""
        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM observations WHERE id = ANY(%s::uuid[])", (turns,)
            ).fetchone()
        assert row is not None
        return int(row[0])

    def database_now(self) -> datetime:
        return database_now(self.url)

    def post(self, path: str, body: dict[str, object]) -> str:
        answer = self.http.post(path, json=body)
        assert answer.status_code == 200, (path, answer.text)
        return answer.text

    def reads(self) -> dict[str, str]:
        """What each read answers, as text: recall, passage search, contexts, export, records,
        and a message of an old turn."""
        question = "Where does the heron Quill live?"
        message = self.message_of(self.old[0])
        window = self.http.post("/v1/messages/get", json={"chunk_id": message})
        return {
            "recall": self.post("/v1/recalls", {"question": question, "data_subject_id": ANN}),
            "recall, project-wide": self.post("/v1/recalls", {"question": question}),
            "passages": self.post("/v1/passages/search", {"question": question}),
            "passages of Ann": self.post(
                "/v1/passages/search", {"question": question, "data_subject_id": ANN}
            ),
            "contexts": self.post("/v1/contexts", {"data_subject_id": ANN}),
            "export": self.post("/v1/exports", {"data_subject_id": ANN}),
            "records": self.post("/v1/records/list", {}),
            "message": window.text if window.status_code == 200 else "",
        }

    def message_of(self, turn: str) -> str:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(
                "SELECT id FROM messages WHERE observation_id = %s", (turn,)
            ).fetchone()
        return str(row[0]) if row else "00000000-0000-0000-0000-000000000000"

    def showing(self, marker: str) -> list[str]:
        """The reads whose answer holds `marker`."""
        return [name for name, text in self.reads().items() if marker in text]


def database_now(url: str) -> datetime:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


def receipts(lines: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines.splitlines() if line.strip()]


def later(moment: datetime, days: float) -> str:
    return (moment + timedelta(days=days)).isoformat()
