"""What passage search keeps between calls: question vectors and each scope's common words,
remembered least recently used first out, and a remembered question not embedded again."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from satchel.memory.passages.caches import CommonWords, QuestionEmbedders, QuestionVectors
from satchel.memory.passages.embedder import (
    DIMENSIONS,
    EmbedderUnavailable,
    EmbeddingSettings,
    Vectors,
)
from satchel.memory.passages.search import embed_question
from satchel.memory.store.passage_scope import Scope
from satchel.memory.store.vectors import Packed, packed


class Counting:
    """A stand-in model that keeps every text it was given; it fails on "broken"."""

    identity = "test/counting"

    def __init__(self) -> None:
        self.given: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.given.extend(texts)
        if "broken" in texts:
            raise EmbedderUnavailable("no model")
        return np.full((len(texts), DIMENSIONS), DIMENSIONS**-0.5, dtype=np.float32)


def test_question_vectors_forget_the_least_recently_used() -> None:
    vectors = QuestionVectors(limit=2)
    one, two, three = (Packed(bytes([n])) for n in range(3))
    vectors.remember(("e", "one"), one)
    vectors.remember(("e", "two"), two)
    assert vectors.get(("e", "one")) == one  # now the most recently used
    vectors.remember(("e", "three"), three)
    assert vectors.get(("e", "two")) is None
    assert vectors.get(("e", "one")) == one and vectors.get(("e", "three")) == three
    assert vectors.get(("other", "one")) is None  # another embedder's space


def test_common_words_are_learned_per_scope_and_unlearned_when_kept() -> None:
    words = CommonWords(limit=2)
    ann, ben, cal = Scope(1, "ann"), Scope(1, "ben"), Scope(1, "cal")
    assert words.likely_focus(ann, "Did Ann go?") == "Did Ann go?"
    words.learn(ann, {"Ann", "Did"}, ["go?"])
    assert words.likely_focus(ann, "Did Ann go?") == "go?"
    assert words.likely_focus(ann, "Ann") == "Ann"  # nothing left: the question itself
    assert words.likely_focus(ben, "Did Ann go?") == "Did Ann go?"
    words.learn(ann, set(), ["Did"])
    assert words.likely_focus(ann, "Did Ann go?") == "Did go?"
    words.learn(ben, {"Ben"}, [])
    words.learn(ann, set(), [])  # ann used last, ben least recently
    words.learn(cal, {"Cal"}, [])
    assert words.likely_focus(ben, "Ben?") == "Ben?"
    assert words.likely_focus(ann, "Did Ann go?") == "Did go?"


def test_a_remembered_question_is_not_embedded_again() -> None:
    model = Counting()
    questions = QuestionVectors()

    async def run() -> list[Packed | None]:
        first = await embed_question(model, "where?", questions)
        again = await embed_question(model, "where?", questions)
        broken = await embed_question(model, "broken", questions)
        retried = await embed_question(model, "broken", questions)
        nothing = await embed_question(None, "where?", questions)
        return [first, again, broken, retried, nothing]

    first, again, broken, retried, nothing = asyncio.run(run())
    want = packed(np.full(DIMENSIONS, DIMENSIONS**-0.5, dtype=np.float32))
    assert first == again == want
    assert broken is None and retried is None and nothing is None
    assert model.given == ["where?", "broken", "broken"]  # a failure is not remembered


async def test_question_embedders_load_each_model_once_per_owner() -> None:
    local = EmbeddingSettings()
    owned = QuestionEmbedders()
    first = await owned.get(local)
    assert first is not None
    assert await owned.get(local) is first
    other = await QuestionEmbedders().get(local)
    assert other is not None and other is not first  # nothing is shared between applications


async def test_an_embedder_that_cannot_run_is_none_and_is_not_asked_again() -> None:
    refused = EmbeddingSettings(base_url="https://embeddings.invalid/v1", model="m")
    owned = QuestionEmbedders()
    assert await owned.get(refused) is None
    assert await owned.get(refused) is None
