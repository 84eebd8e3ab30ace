"""A question's words and terms, as recall and entity candidates read it."""

from __future__ import annotations

import unicodedata

from satchel.memory.spelling import WINDOW
from satchel.memory.store.entities import normalize

MAX_QUESTION_BYTES = 8_192
MAX_TERMS = 512
MAX_TERM_BYTES = 32_768


class QuestionRefused(ValueError):
    """The question cannot be recalled on (blank, too long, too many terms or names)."""


def written(question: str) -> list[str]:
    """Words as written: split on whitespace and punctuation (but ' and -), trimmed of ' and -."""
    found: list[str] = []
    current: list[str] = []
    for char in [*question, " "]:
        if char.isspace() or (unicodedata.category(char).startswith("P") and char not in "'-"):
            word = "".join(current).strip("'-")
            if word:
                found.append(word)
            current = []
        else:
            current.append(char)
    return found


def words(question: str) -> list[str]:
    """The question's words, normalized (lowercase)."""
    return [normalize(word) for word in written(question)]


def terms(question: str) -> list[str]:
    """Every run of 1..4 consecutive words, distinct, by start then length."""
    split = words(question)
    found: dict[str, None] = {}
    for start in range(len(split)):
        for length in range(1, WINDOW + 1):
            if start + length <= len(split):
                found.setdefault(" ".join(split[start : start + length]))
        if len(found) > MAX_TERMS:
            raise QuestionRefused(f"question has more than {MAX_TERMS} distinct terms")
    if sum(len(term.encode("utf-8")) for term in found) > MAX_TERM_BYTES:
        raise QuestionRefused(f"question terms exceed {MAX_TERM_BYTES} UTF-8 bytes")
    return list(found)
