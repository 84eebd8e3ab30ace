"""Text embedders: the local all-MiniLM-L6-v2 model (ONNX Runtime), or an embeddings endpoint."""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import httpx
import numpy as np
from numpy.typing import NDArray

DIMENSIONS = 384
MODEL_FOLDER = Path(__file__).with_name("model")
MODEL_FILES = ("model.onnx", "tokenizer.json")
SERVER_EXTRA = "pip install 'satchel[server]'"
REINSTALL = "pip install --force-reinstall 'satchel[server]'"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

Vectors = NDArray[np.float32]


class EmbedderUnavailable(RuntimeError):
    """No embedder can run: the model is not installed, or the endpoint is refused or failing."""


class Embedder(Protocol):
    """Turns texts into unit vectors of `DIMENSIONS` floats; `identity` names the vector space."""

    @property
    def identity(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    """Where embeddings come from: the local model unless an endpoint and model are configured.

    `api_key_env` is the NAME of the variable holding the key; `allowed_hosts` may receive text
    (loopback always may).
    """

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    allowed_hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> EmbeddingSettings:
        env = os.environ if env is None else env
        hosts = env.get("SATCHEL_EMBEDDINGS_ALLOWED_HOSTS", "")
        return cls(
            base_url=env.get("SATCHEL_EMBEDDINGS_BASE_URL") or None,
            model=env.get("SATCHEL_EMBEDDINGS_MODEL") or None,
            api_key_env=env.get("SATCHEL_EMBEDDINGS_API_KEY_ENV") or None,
            allowed_hosts=frozenset(h.strip().lower() for h in hosts.split(",") if h.strip()),
        )


def _unit(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


class MiniLM:
    """all-MiniLM-L6-v2 (a 6-layer BERT) run by ONNX Runtime: mean pooling, then L2
    normalization.

    The shipped graph holds int8 dense weights (see `model/NOTICE`); its vectors are close to
    the published model's but not the same, hence an identity of their own. Each text is one run
    on one ONNX thread; `threads` runs go at once, each on a thread of its own, when a call
    brings several texts (one session serves them all, and a text's vector is the same on any).
    """

    identity = "local/all-MiniLM-L6-v2-int8"
    max_tokens = 256

    def __init__(self, folder: Path, threads: int = 1) -> None:
        if threads < 1:
            raise ValueError(f"the embedder needs at least one thread, not {threads}")
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.no_padding()  # the published tokenizer pads every text to 128 tokens
        self.threads = threads
        self.helpers = (
            ThreadPoolExecutor(threads - 1, "embedder", initializer=_run_when_idle)
            if threads > 1
            else None
        )

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One text per run: activations are quantized with a scale per run, so in a batch a
        text's vector would depend on its neighbours (and padding costs what batching saves).
        With more threads, each thread (the caller's too) takes the next text not yet taken:
        a helper that other work holds back takes fewer, and the batch waits only for the text
        it holds."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        rows = iter(range(len(texts)))
        taking = threading.Lock()
        helpers = min(self.threads, len(texts)) - 1
        helping = (
            [self.helpers.submit(self._fill, out, texts, rows, taking) for _ in range(helpers)]
            if self.helpers is not None
            else []
        )
        self._fill(out, texts, rows, taking)
        for helper in helping:
            helper.result()
        return out

    def _fill(
        self, out: Vectors, texts: Sequence[str], rows: Iterator[int], taking: threading.Lock
    ) -> None:
        while True:
            with taking:
                row = next(rows, None)
            if row is None:
                return
            out[row] = self._forward(texts[row])

    def _forward(self, text: str) -> Vectors:
        encoded = self.tokenizer.encode(text)
        feed = {
            "input_ids": np.array([encoded.ids], dtype=np.int64),
            "attention_mask": np.array([encoded.attention_mask], dtype=np.int64),
            "token_type_ids": np.array([encoded.type_ids], dtype=np.int64),
        }
        (pooled,) = self.session.run(["pooled"], feed)
        vector: Vectors = _unit(np.asarray(pooled, dtype=np.float32))[0]
        return vector


def _run_when_idle() -> None:
    """Schedule the calling thread only on a core nothing else wants (Linux's SCHED_IDLE), so
    the extra threads of a worker's model never take a core from the API or the database."""
    if hasattr(os, "sched_setscheduler"):
        with contextlib.suppress(OSError):  # if refused, the thread keeps the process's priority
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def local_model_folder() -> Path:
    """Where satchel keeps the local model (shipped inside the package), or a clear refusal."""
    for module in ("onnxruntime", "tokenizers"):
        try:
            importlib.import_module(module)
        except ImportError:
            raise EmbedderUnavailable(
                f"the local embedding model needs {module}: install the server extra"
                f" ({SERVER_EXTRA})"
            ) from None
    for name in MODEL_FILES:
        if not (MODEL_FOLDER / name).is_file():
            raise EmbedderUnavailable(
                f"the local embedding model is incomplete ({name} is missing under "
                f"{MODEL_FOLDER}); reinstall satchel ({REINSTALL})"
            )
    return MODEL_FOLDER


class EndpointEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint asked for `DIMENSIONS`-float vectors."""

    batch = 64

    def __init__(self, settings: EmbeddingSettings, timeout: float = 30.0) -> None:
        if not settings.base_url or not settings.model:
            raise EmbedderUnavailable("an embeddings endpoint needs both a base URL and a model")
        host = (urlsplit(settings.base_url).hostname or "").lower()
        if host not in LOOPBACK and host not in settings.allowed_hosts:
            raise EmbedderUnavailable(
                f"embeddings host {host!r} is not in SATCHEL_EMBEDDINGS_ALLOWED_HOSTS"
            )
        key = os.environ.get(settings.api_key_env, "") if settings.api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.model = settings.model
        self.identity = f"endpoint/{host}/{settings.model}"
        self.client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/", headers=headers, timeout=timeout
        )

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            rows.extend(self._ask(list(texts[start : start + self.batch])))
        if not rows:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return _unit(np.array(rows, dtype=np.float32))

    def _ask(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.model, "input": texts, "dimensions": DIMENSIONS}
        try:
            answer = self.client.post("embeddings", json=body)
            answer.raise_for_status()
            data = sorted(answer.json()["data"], key=lambda item: item["index"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as failure:
            raise EmbedderUnavailable(
                f"the embeddings endpoint failed ({type(failure).__name__})"
            ) from None
        rows = [list(map(float, item["embedding"])) for item in data]
        if len(rows) != len(texts) or any(len(row) != DIMENSIONS for row in rows):
            raise EmbedderUnavailable(f"the embeddings endpoint must answer {DIMENSIONS} floats")
        return rows


def load_embedder(settings: EmbeddingSettings | None = None, threads: int = 1) -> Embedder:
    """The endpoint embedder when one is configured, else the local model running `threads`
    texts at once (or a clear refusal)."""
    settings = EmbeddingSettings.from_env() if settings is None else settings
    if settings.base_url or settings.model:
        return EndpointEmbedder(settings)
    return MiniLM(local_model_folder(), threads)
