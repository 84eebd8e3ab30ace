"""Several processes on one external PostgreSQL: two API replicas (`satchel serve --role api`)
and two workers (`satchel worker`), connected as the login role `satchel bootstrap` makes, under
a load of observations and recalls spread over both.

One replica and one worker are killed outright mid-load, an erasure is made while the workers
run; then the PostgreSQL server itself is stopped at once and started again under load. Nothing
acknowledged is lost or stored twice, nothing is formed or embedded twice, and no request is
answered 500.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from external_postgres import ExternalPostgres, start_external
from formation_kit import claim
from memory_kit import with_database
from memory_process import SATCHEL, Served, environment, satchel
from model_server import ModelServer, Reply
from psycopg import conninfo
from replica_load import Load

from satchel.memory.service.tokens import create_token

PROJECTS = ("north", "south", "east", "west")
LEAVING = "leaving"  # the subject erased while the workers run
SEEDED = 12  # turns of `LEAVING` stored before the load starts
RECOVERY = 20.0  # seconds a replica may take to serve again once the database is back


@pytest.fixture(scope="module")
def server() -> Iterator[ExternalPostgres]:
    """A server of this module's own, as it is stopped and started again; its commits are
    durable (the shared test servers skip waiting for the log)."""
    running = start_external()
    try:
        with psycopg.connect(running.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_commit = on")
            conn.execute("SELECT pg_reload_conf()")
        yield running
    finally:
        running.stop()


@pytest.fixture
def database(server: ExternalPostgres) -> str:
    """A database made by `satchel bootstrap`: the processes connect as its login role."""
    name = f"satchel_replicas_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    admin = with_database(server.url, name)
    password = secrets.token_urlsafe(18)
    env = environment(None) | {"SATCHEL_APP_PASSWORD": password}
    made = satchel("bootstrap", "--admin-url", admin, env=env, timeout=300)
    assert made.returncode == 0, made.stderr
    return conninfo.make_conninfo(admin, user="satchel_app", password=password)


@pytest.fixture
def folder() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="satchel-replicas-"))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def model() -> Iterator[ModelServer]:
    """Formation's model: one claim a turn, quoting the whole turn; and the embeddings."""

    def whole_turn(body: dict[str, Any]) -> Reply:
        said = body["messages"][1]["content"].split(":\n", 1)[1]
        return {"claims": [claim("I", "uses", said, said)]}

    with ModelServer() as running:
        running.respond = whole_turn
        yield running


class Worked:
    """One `satchel worker` process."""

    def __init__(self, folder: Path, env: dict[str, str], number: int) -> None:
        self.log = folder / f"worker-{number}.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [str(SATCHEL), "worker"], env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def wait_running(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while "worker running" not in self.log.read_text():
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.05)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        return self.process.returncode


class Deployment:
    """Replicas and workers on one database, all ended by `close`."""

    def __init__(self, url: str, folder: Path, model: ModelServer) -> None:
        self.url = url
        self.folder = folder
        self.env = environment(url) | {
            "SATCHEL_POOL_SIZE": "4",
            "SATCHEL_FORMATION_MODEL": "scripted",
            "SATCHEL_FORMATION_BASE_URL": model.base_url,
            "SATCHEL_EMBEDDINGS_BASE_URL": model.base_url,
            "SATCHEL_EMBEDDINGS_MODEL": "scripted-embedder",
        }
        self.replicas: list[Served] = []
        self.workers: list[Worked] = []
        self.tokens = {project: create_token(url, project) for project in PROJECTS}

    def replica(self) -> Served:
        served = Served(self.folder / "data", self.env, None, "--role", "api")
        self.replicas.append(served)
        served.wait_ready()
        return served

    def worker(self) -> Worked:
        started = Worked(self.folder, self.env, len(self.workers))
        self.workers.append(started)
        started.wait_running()
        return started

    def client(self, replica: Served, project: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[project]}"}
        return httpx.Client(base_url=replica.base_url, headers=headers, timeout=60)

    def close(self) -> None:
        for replica in self.replicas:
            replica.stop(signal.SIGTERM)
        for started in self.workers:
            started.stop()

    def logs(self) -> str:
        parts = [replica.output() for replica in self.replicas]
        parts += [started.log.read_text() for started in self.workers]
        return "\n".join(parts)


@pytest.fixture
def deployment(database: str, folder: Path, model: ModelServer) -> Iterator[Deployment]:
    made = Deployment(database, folder, model)
    try:
        yield made
    finally:
        made.close()


def count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def drained(deployment: Deployment, replica: Served, timeout: float = 180) -> None:
    """Until every project's turns are formed and every message has its vector."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        formed = True
        for project in PROJECTS:
            with deployment.client(replica, project) as client:
                fresh = client.get("/v1/freshness").json()
            formed &= fresh["stored"] == fresh["formed"] and fresh["parked"] == 0
        vectors = count(deployment.url, "SELECT count(*) FROM message_vectors")
        if formed and vectors == count(deployment.url, "SELECT count(*) FROM messages"):
            return
        time.sleep(0.2)
    workers = "\n".join(started.log.read_text()[-3000:] for started in deployment.workers)
    raise AssertionError(f"the backlog did not drain ({fresh}, {vectors} vectors):\n{workers}")


def assert_kept_once(deployment: Deployment, replica: Served, load: Load) -> None:
    """Every acknowledged turn is read back through `replica`, once, with its content."""
    expected: dict[tuple[str, str], dict[str, str]] = {}
    for turn in load.acknowledged.values():
        expected.setdefault((turn.project, turn.subject), {})[turn.observation_id] = turn.content
    for (project, subject), turns in expected.items():
        with deployment.client(replica, project) as client:
            answer = client.post("/v1/exports", json={"data_subject_id": subject})
        assert answer.status_code == 200, answer.text
        sections = answer.json()["sections"]
        ids = [row["id"] for row in sections["observation"]]
        assert len(ids) == len(set(ids)) == len(turns), (project, subject)
        said = {row["observation_id"]: row["content"] for row in sections["message"]}
        assert said == turns


def test_a_replica_and_a_worker_killed_mid_load_lose_and_repeat_nothing(
    deployment: Deployment,
) -> None:
    first, second = deployment.replica(), deployment.replica()
    with deployment.client(first, PROJECTS[0]) as client:
        for number in range(SEEDED):
            body = {
                "data_subject_id": LEAVING,
                "messages": [{"role": "user", "content": f"I am leaving on day {number}."}],
            }
            assert client.post("/v1/observations", json=body).status_code == 201
    doomed, survivor = deployment.worker(), deployment.worker()
    with Load(deployment.tokens, [first.base_url, second.base_url]) as load:
        load.wait_for(40)
        load.mark_down(first.base_url)
        first.kill()
        doomed.kill()
        with deployment.client(second, PROJECTS[0]) as client:
            receipt = client.post("/v1/erasures", json={"data_subject_id": LEAVING})
        assert receipt.status_code == 200, receipt.text
        assert receipt.json()["clean"] is True
        assert set(receipt.json()["residual"].values()) == {0}
        load.wait_for(40)
    assert survivor.process.poll() is None, deployment.logs()
    assert set(load.statuses) <= {0, 200, 201}, load.statuses
    drained(deployment, second)
    assert_kept_once(deployment, second, load)
    url = deployment.url
    acknowledged = len(load.acknowledged)
    assert count(url, "SELECT count(*) FROM observations") == acknowledged
    assert count(url, "SELECT count(*) FROM facts") == acknowledged
    assert count(url, "SELECT count(DISTINCT source_observation_id) FROM facts") == acknowledged
    assert (
        count(
            url,
            "SELECT count(*) FROM (SELECT 1 FROM segments"
            " GROUP BY project_id, data_subject_id, level, from_offset HAVING count(*) > 1) twice",
        )
        == 0
    )
    for table in ("observations", "messages", "facts", "segments", "message_vectors"):
        left = count(url, f"SELECT count(*) FROM {table} WHERE data_subject_id = '{LEAVING}'")
        assert left == 0, table
    assert "Traceback" not in deployment.logs()


def test_a_database_restart_under_load_answers_503_and_recovers(
    server: ExternalPostgres, deployment: Deployment
) -> None:
    replicas = [deployment.replica(), deployment.replica()]
    deployment.worker()
    with Load(deployment.tokens, [replica.base_url for replica in replicas]) as load:
        load.wait_for(30)
        server.halt()
        try:
            time.sleep(1.0)
            for replica in replicas:
                answer = httpx.get(replica.base_url + "/ready", timeout=10)
                assert answer.status_code == 503, answer.text
            with deployment.client(replicas[0], PROJECTS[0]) as client:
                refused = client.post("/v1/recalls", json={"question": "jar"})
            assert refused.status_code == 503, refused.text
            assert refused.headers["Retry-After"]
            time.sleep(1.0)
        finally:
            server.resume()
        back = time.monotonic()
        for replica in replicas:
            while replica.ready() is None:
                assert time.monotonic() - back < RECOVERY, replica.output()
                time.sleep(0.1)
        load.wait_for(30, timeout=RECOVERY)
    unexpected = [line for line in deployment.logs().splitlines() if "unexpected" in line]
    assert 500 not in load.statuses and 0 not in load.statuses, (load.statuses, unexpected)
    assert load.statuses[503] > 0, load.statuses
    drained(deployment, replicas[1])
    assert_kept_once(deployment, replicas[1], load)
    assert count(deployment.url, "SELECT count(*) FROM facts") == len(load.acknowledged)
