"""Passages: every stored message found by full text and by meaning, fused."""

from __future__ import annotations

import asyncio
import logging

from satchel.memory.passages.embedder import (
    Embedder,
    EmbedderUnavailable,
    EmbeddingSettings,
    load_embedder,
)

log = logging.getLogger("satchel.memory")

_loaded: dict[EmbeddingSettings, Embedder | None] = {}


def _load(settings: EmbeddingSettings) -> Embedder | None:
    try:
        return load_embedder(settings)
    except EmbedderUnavailable as unavailable:
        log.warning("passage search uses full text only: %s", unavailable)
        return None


async def query_embedder(settings: EmbeddingSettings | None = None) -> Embedder | None:
    """The process's embedder for questions (loaded once, off the event loop), or None."""
    chosen = EmbeddingSettings.from_env() if settings is None else settings
    if chosen not in _loaded:
        _loaded[chosen] = await asyncio.to_thread(_load, chosen)
    return _loaded[chosen]
