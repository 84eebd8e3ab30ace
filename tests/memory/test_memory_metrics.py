"""`GET /metrics`: the Prometheus text format read back with prometheus_client's own parser, its
counters moving under observes and recalls and a worker's passes, labels that never carry a
subject, a token, content or a path as sent, per-project series only when turned on, turned off,
and served on a listener of its own by a real `satchel serve`."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from formation_kit import observe, passes, with_model
from memory_kit import LiveServer, free_port
from memory_process import Served, environment, satchel, stop_embedded
from model_server import ModelServer
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from satchel.memory.config import MemorySettings

SUBJECT = "person-zq81-metrics"
CONTENT = "my locker code is 4471 and I like plums"
Samples = list[Sample]


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def scrape(base_url: str) -> Samples:
    answer = httpx.get(base_url + "/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return [s for f in text_string_to_metric_families(answer.text) for s in f.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample named `name` whose labels include `labels`."""
    found = [
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def recall(http: httpx.Client) -> None:
    answer = http.post("/v1/recalls", json={"question": "What does the person like?"})
    assert answer.status_code == 200, answer.text


def test_metrics_parse_and_move_under_observes_recalls_and_a_worker(
    live_server: LiveServer, model: ModelServer
) -> None:
    token = live_server.token("alpha")
    headers = {"Authorization": f"Bearer {token}"}
    before = scrape(live_server.base_url)
    assert value(before, "satchel_memory_database_up") == 1
    assert value(before, "satchel_memory_backlog_turns") == 0
    assert value(before, "satchel_memory_worker_heartbeat_age_seconds") == float("inf")
    with httpx.Client(base_url=live_server.base_url, headers=headers) as http:
        for n in range(5):
            observe(http, SUBJECT, ("user", f"{CONTENT} ({n})"))
        for _ in range(3):
            recall(http)
        assert http.get(f"/v1/{SUBJECT}/{token}").status_code == 404
    during = scrape(live_server.base_url)
    stored = ("satchel_memory_requests_total", {"route": "/v1/observations", "status": "201"})
    assert value(during, stored[0], method="POST", **stored[1]) == 5
    recalled = {"method": "POST", "route": "/v1/recalls", "status": "200"}
    assert value(during, "satchel_memory_requests_total", **recalled) == 3
    timed = {"method": "POST", "route": "/v1/recalls", "le": "+Inf"}
    assert value(during, "satchel_memory_request_duration_seconds_bucket", **timed) == 3
    assert value(during, "satchel_memory_request_duration_seconds_count", route="/v1/recalls") == 3
    lost = {"route": "unmatched", "status": "404"}
    assert value(during, "satchel_memory_requests_total", **lost) == 1
    assert value(during, "satchel_memory_stored_turns_total") == 5
    assert value(during, "satchel_memory_backlog_turns") == 5
    assert value(during, "satchel_memory_oldest_pending_age_seconds") >= 0
    assert value(during, "satchel_memory_parked_turns") == 0
    assert value(during, "satchel_memory_pool_max_connections") == 16
    pooled = [value(during, "satchel_memory_pool_connections", state=s) for s in ("in_use", "idle")]
    assert sum(pooled) >= 2
    assert value(during, "satchel_memory_database_errors_total", kind="request") == 0

    passes(live_server.database_url, with_model(MemorySettings(), model), model)
    after = scrape(live_server.base_url)
    assert value(after, "satchel_memory_backlog_turns") == 0
    assert value(after, "satchel_memory_formed_turns_total") == 5
    assert value(after, "satchel_memory_embedded_messages_total") == 5
    assert value(after, "satchel_memory_formation_failures_total") == 0
    assert value(after, "satchel_memory_workers_live") == 0  # the passes' worker has stopped
    scraped = {"method": "GET", "route": "/metrics", "status": "200"}
    assert value(after, "satchel_memory_requests_total", **scraped) == 2

    labels = {v for s in after for v in s.labels.values()}
    for secret in (SUBJECT, token, token[:12], CONTENT, "alpha"):
        assert not any(secret in label for label in labels), secret
    assert not any("project" in s.labels for s in after)


@pytest.fixture
def per_project() -> MemorySettings:
    return MemorySettings(form_on_store=False, metrics_per_project=True)


def test_per_project_series_only_when_turned_on(db_url: str, per_project: MemorySettings) -> None:
    server = LiveServer(db_url, per_project)
    server.start()
    try:
        for project, turns in (("alpha", 2), ("beta", 1)):
            token = server.token(project)
            with httpx.Client(
                base_url=server.base_url, headers={"Authorization": f"Bearer {token}"}
            ) as http:
                for _ in range(turns):
                    observe(http, SUBJECT, ("user", CONTENT))
        samples = scrape(server.base_url)
    finally:
        server.stop()
    assert value(samples, "satchel_memory_backlog_turns", project="alpha") == 2
    assert value(samples, "satchel_memory_backlog_turns", project="beta") == 1
    assert value(samples, "satchel_memory_stored_turns_total", project="beta") == 1
    observed = {"route": "/v1/observations", "status": "201"}
    assert value(samples, "satchel_memory_requests_total", project="alpha", **observed) == 2
    labels = {v for s in samples for v in s.labels.values()}
    assert not any(SUBJECT in label or CONTENT in label for label in labels)


def test_metrics_can_be_turned_off(db_url: str) -> None:
    server = LiveServer(db_url, MemorySettings(metrics=False))
    server.start()
    try:
        assert httpx.get(server.base_url + "/metrics").status_code == 404
        assert httpx.get(server.base_url + "/ready").status_code == 200
    finally:
        server.stop()


def test_settings_read_the_metrics_variables() -> None:
    read = MemorySettings.from_env
    assert read({}).metrics and not read({}).metrics_per_project
    assert read({"SATCHEL_METRICS": "off"}).metrics is False
    assert read({"SATCHEL_METRICS_PER_PROJECT": "true"}).metrics_per_project is True
    assert read({"SATCHEL_METRICS_ADDRESS": "[::1]:9464"}).metrics_address == ("::1", 9464)
    assert read({"SATCHEL_REQUIRE_WORKER": "true"}).require_worker == 300
    assert read({"SATCHEL_REQUIRE_WORKER": "45"}).require_worker == 45
    assert read({"SATCHEL_REQUIRE_WORKER": "off"}).require_worker is None
    for name, bad in (
        ("SATCHEL_METRICS", "sometimes"),
        ("SATCHEL_METRICS_ADDRESS", "9464"),
        ("SATCHEL_METRICS_ADDRESS", "host:99999"),
        ("SATCHEL_REQUIRE_WORKER", "soon"),
    ):
        with pytest.raises(ValueError, match=name) as refused:
            read({name: bad})
        assert repr(bad) in str(refused.value)


@pytest.fixture
def data_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="satchel-metrics-"))
    try:
        yield folder / "data"
    finally:
        stop_embedded(folder / "data")
        shutil.rmtree(folder, ignore_errors=True)


def test_serve_gives_metrics_a_listener_of_their_own(db_url: str, data_dir: Path) -> None:
    port = free_port()
    env = environment(db_url) | {"SATCHEL_METRICS_ADDRESS": f"127.0.0.1:{port}"}
    server = Served(data_dir, env, None, "--role", "api")
    try:
        server.wait_ready()
        assert httpx.get(server.base_url + "/metrics").status_code == 404
        httpx.get(server.base_url + "/health")
        samples = scrape(f"http://127.0.0.1:{port}")
    finally:
        assert server.terminate() == 0
    assert value(samples, "satchel_memory_database_up") == 1
    assert value(samples, "satchel_memory_requests_total", route="/health", status="200") == 1


def test_a_scrape_without_the_database_says_so_and_counts_its_errors() -> None:
    nowhere = f"postgresql://satchel@127.0.0.1:{free_port()}/none?connect_timeout=1"
    server = LiveServer(nowhere, MemorySettings())
    server.start()
    try:
        samples = scrape(server.base_url)
        assert httpx.get(server.base_url + "/ready").status_code == 503
    finally:
        server.stop()
    assert value(samples, "satchel_memory_database_up") == 0
    assert value(samples, "satchel_memory_database_errors_total", kind="connect") >= 1
    assert not any(s.name == "satchel_memory_backlog_turns" for s in samples)


def test_serve_refuses_a_metrics_address_in_use(db_url: str, data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = environment(db_url) | {"SATCHEL_METRICS_ADDRESS": f"127.0.0.1:{port}"}
        result = satchel("serve", "--data-dir", str(data_dir), "--port", str(free_port()), env=env)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert f"SATCHEL_METRICS_ADDRESS=127.0.0.1:{port}" in line and "already in use" in line
