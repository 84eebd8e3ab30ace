"""Text embedders: the local all-MiniLM-L6-v2 model run in numpy, or an embeddings endpoint."""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import httpx
import numpy as np
from numpy.typing import NDArray

DIMENSIONS = 384
MODEL_FOLDER = Path(__file__).with_name("model")
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
REINSTALL = "pip install --force-reinstall satchel"
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


def _layer_norm(x: Vectors, weight: Vectors, bias: Vectors, eps: float) -> Vectors:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    result: Vectors = ((x - mean) / np.sqrt(var + eps) * weight + bias).astype(np.float32)
    return result


def _erf(x: Vectors) -> Vectors:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26), vectorized."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    result: Vectors = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return result


def _gelu(x: Vectors) -> Vectors:
    result: Vectors = (0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))).astype(np.float32)
    return result


class MiniLM:
    """all-MiniLM-L6-v2 (a 6-layer BERT) in float32 numpy: mean pooling, then L2 normalization.

    The shipped weights are float16 (see `model/NOTICE`); they are widened once, at load.
    """

    identity = "local/all-MiniLM-L6-v2"
    max_tokens = 256
    batch = 32

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        self.heads: int = config["num_attention_heads"]
        self.layers: int = config["num_hidden_layers"]
        self.eps: float = config["layer_norm_eps"]
        self.w = {
            k: np.ascontiguousarray(
                v.T if k.endswith("dense.weight") or ".self." in k else v
            ).astype(np.float32)
            for k, v in load_file(folder / "model.safetensors").items()
            if not k.endswith("position_ids")
        }
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            out[chunk] = self._forward([texts[i] for i in chunk])
        return out

    def _forward(self, texts: list[str]) -> Vectors:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        types = np.array([e.type_ids for e in encoded], dtype=np.int64)
        w = self.w
        length = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)[:, None]
        return _unit(pooled.astype(np.float32))

    def _dense(self, x: Vectors, name: str) -> Vectors:
        """`x @ W.T + b` as one 2-D matrix product (weights are stored transposed)."""
        weight = self.w[name + ".weight"]
        flat = x.reshape(-1, x.shape[-1]) @ weight + self.w[name + ".bias"]
        result: Vectors = flat.reshape(*x.shape[:-1], weight.shape[1])
        return result

    def _layer(self, x: Vectors, bias: Vectors, p: str) -> Vectors:
        batch, length, width = x.shape
        size = width // self.heads

        def split(t: Vectors) -> Vectors:
            return t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

        q = split(self._dense(x, p + "attention.self.query"))
        k = split(self._dense(x, p + "attention.self.key"))
        v = split(self._dense(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(size)) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        mixed = np.asarray(scores @ v, dtype=np.float32)
        context = mixed.transpose(0, 2, 1, 3).reshape(batch, length, width)
        attended = self._dense(context, p + "attention.output.dense")
        x = _layer_norm(
            attended + x,
            self.w[p + "attention.output.LayerNorm.weight"],
            self.w[p + "attention.output.LayerNorm.bias"],
            self.eps,
        )
        hidden = _gelu(self._dense(x, p + "intermediate.dense"))
        return _layer_norm(
            self._dense(hidden, p + "output.dense") + x,
            self.w[p + "output.LayerNorm.weight"],
            self.w[p + "output.LayerNorm.bias"],
            self.eps,
        )


def local_model_folder() -> Path:
    """Where satchel keeps the local model (shipped inside the package), or a clear refusal."""
    for module in ("safetensors", "tokenizers"):
        try:
            importlib.import_module(module)
        except ImportError:
            raise EmbedderUnavailable(
                f"the local embedding model needs {module}; reinstall satchel ({REINSTALL})"
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


def load_embedder(settings: EmbeddingSettings | None = None) -> Embedder:
    """The endpoint embedder when one is configured, else the local model (or a clear refusal)."""
    settings = EmbeddingSettings.from_env() if settings is None else settings
    if settings.base_url or settings.model:
        return EndpointEmbedder(settings)
    return MiniLM(local_model_folder())
