"""What passage search remembers between calls: recent questions' vectors, the words each scope
finds common, and the HNSW settings each connection holds. One `SearchCaches` per application,
passed to every search it runs."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from satchel.memory.passages.embedder import (
    Embedder,
    EmbedderUnavailable,
    EmbeddingSettings,
    load_embedder,
)
from satchel.memory.store.passage_rankings import ScanSettings
from satchel.memory.store.passage_scope import Scope
from satchel.memory.store.vectors import Packed

RECENT_QUESTIONS = 256  # question vectors remembered, newest last
COMMON_SCOPES = 1024  # scopes whose common words are remembered

QuestionKey = tuple[str, str]  # an embedder's identity and a question's text


class QuestionVectors:
    """The vectors of the last `limit` questions embedded, by embedder and text: a retried or
    repeated question is not embedded again."""

    __slots__ = ("_vectors", "limit")

    def __init__(self, limit: int = RECENT_QUESTIONS) -> None:
        self.limit = limit
        self._vectors: OrderedDict[QuestionKey, Packed] = OrderedDict()

    def get(self, key: QuestionKey) -> Packed | None:
        """The vector remembered for `key`, now the most recently used; None if there is none."""
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
        return vector

    def remember(self, key: QuestionKey, vector: Packed) -> None:
        """Keep `vector` for `key`, forgetting the least recently used past `limit`."""
        self._vectors[key] = vector
        if len(self._vectors) > self.limit:
            self._vectors.popitem(last=False)


class CommonWords:
    """The words earlier questions found common in each of the last `limit` scopes searched:
    what a question's weighing will most likely leave out of the text the embedder reads."""

    __slots__ = ("_words", "limit")

    def __init__(self, limit: int = COMMON_SCOPES) -> None:
        self.limit = limit
        self._words: OrderedDict[Scope, set[str]] = OrderedDict()

    def likely_focus(self, scope: Scope, question: str) -> str:
        """`question` without the words found common in `scope` (the question itself when that
        leaves nothing), known before the database is asked, so the embedding can start at
        once."""
        common = self._words.get(scope, set())
        return " ".join(w for w in question.split() if w not in common) or question

    def learn(self, scope: Scope, dropped: set[str], kept: list[str]) -> None:
        """A question's weighing in `scope` `dropped` these words as common and `kept` those."""
        known = self._words.setdefault(scope, set())
        self._words.move_to_end(scope)
        known.difference_update(kept)
        known.update(dropped)
        if len(self._words) > self.limit:
            self._words.popitem(last=False)


log = logging.getLogger("satchel.memory")


class QuestionEmbedders:
    """The embedders questions are read with, each loaded once (off the event loop), or None
    where none can run (passage search then ranks by full text alone)."""

    def __init__(self) -> None:
        self._loaded: dict[EmbeddingSettings, Embedder | None] = {}

    async def get(self, settings: EmbeddingSettings | None = None) -> Embedder | None:
        """The embedder of `settings` (default: the environment's)."""
        chosen = EmbeddingSettings.from_env() if settings is None else settings
        if chosen not in self._loaded:
            self._loaded[chosen] = await asyncio.to_thread(_load, chosen)
        return self._loaded[chosen]


def _load(settings: EmbeddingSettings) -> Embedder | None:
    try:
        return load_embedder(settings)
    except EmbedderUnavailable as unavailable:
        log.warning("passage search uses full text only: %s", unavailable)
        return None


@dataclass(slots=True)
class SearchCaches:
    """Everything passage search keeps between calls, owned by the application that runs the
    searches (tests make their own)."""

    questions: QuestionVectors = field(default_factory=QuestionVectors)
    common_words: CommonWords = field(default_factory=CommonWords)
    scans: ScanSettings = field(default_factory=ScanSettings)
    embedders: QuestionEmbedders = field(default_factory=QuestionEmbedders)
