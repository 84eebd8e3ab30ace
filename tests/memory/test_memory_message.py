"""The memory message and the turn key are byte-compatible with the published taisce client."""

from __future__ import annotations

from typing import Any

import pytest
import taisce
from hypothesis import given
from hypothesis import strategies as st

from satchel.memory.message import (
    MEMORY_MESSAGE_PREFIX,
    NotAMemoryMessage,
    is_memory_text,
    parse_memory_message,
    recall_is_empty,
    render_context_message,
    render_memory_message,
    turn_key,
)

text = st.text(max_size=40)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), text)
value = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)
offset = st.one_of(st.none(), st.integers(-1, 2**40))
watermark = st.fixed_dictionaries(
    {"stored": offset, "formed": offset}, optional={"parked": st.integers(0, 100)}
)
recall = st.fixed_dictionaries(
    {},
    optional={
        "controls": value,
        "degraded": st.lists(text, max_size=3),
        "reach": value,
        "facts": st.lists(value, max_size=3),
        "reports": st.lists(value, max_size=3),
        "passages": st.lists(value, max_size=3),
        "truncated": st.booleans(),
    },
)
context = st.fixed_dictionaries(
    {},
    optional={
        "watermark": watermark,
        "segments": st.lists(value, max_size=3),
        "turns": st.lists(value, max_size=3),
        "characters": st.integers(0, 10**6),
        "truncated": st.booleans(),
    },
)
messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": text}),
    max_size=4,
)


@given(watermark, recall)
def test_a_recall_renders_the_same_bytes_and_parses_back(
    mark: dict[str, Any], answer: dict[str, Any]
) -> None:
    rendered = render_memory_message(mark, answer)
    assert rendered == taisce.render_memory_message(mark, answer)
    parsed = parse_memory_message(rendered)
    assert parsed.keys == ("watermark", "plan", "facts", "reports", "passages")
    assert parsed.facts == (answer.get("facts") or [])
    assert not parsed.is_context
    assert is_memory_text(rendered) and taisce.is_memory_text(rendered)


@given(context)
def test_a_context_renders_the_same_bytes_and_parses_back(answer: dict[str, Any]) -> None:
    rendered = render_context_message(answer)
    assert rendered == taisce.render_context_message(answer)
    parsed = parse_memory_message(rendered)
    assert parsed.is_context
    assert parsed.segments == (answer.get("segments") or [])
    assert parsed.turns == (answer.get("turns") or [])


@given(st.one_of(st.none(), text), st.one_of(st.none(), text), messages)
def test_the_turn_key_is_the_published_one(
    subject: str | None, run: str | None, said: list[dict[str, str]]
) -> None:
    key = turn_key(subject, run, said)
    assert key == taisce.turn_key(subject, run, said)
    assert key[14] == "5" and key[19] in "89ab"


def test_a_different_turn_has_a_different_key() -> None:
    said = [{"role": "user", "content": "I moved to Oslo."}]
    assert turn_key("s", "r", said) != turn_key("s", "r2", said)
    assert turn_key("s", "r", said) != turn_key("s2", "r", said)
    reply = [*said, {"role": "assistant", "content": "Noted."}]
    assert turn_key("s", "r", said) != turn_key("s", "r", reply)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("hello", "first line"),
        (MEMORY_MESSAGE_PREFIX, "first line"),
        (MEMORY_MESSAGE_PREFIX + "\n{oops", "not JSON"),
        (MEMORY_MESSAGE_PREFIX + "\n[1]", "not a JSON object"),
        (MEMORY_MESSAGE_PREFIX + '\n{"watermark": {}}', "'plan'"),
        (MEMORY_MESSAGE_PREFIX + '\n{"watermark": {}, "plan": {}, "facts": 3}', "'facts'"),
    ],
)
def test_anything_else_is_not_a_memory_message(content: str, why: str) -> None:
    with pytest.raises(NotAMemoryMessage, match="not a memory message") as raised:
        parse_memory_message(content)
    assert why in str(raised.value)


def test_an_empty_recall_is_told_apart() -> None:
    assert recall_is_empty({"facts": [], "reports": [], "passages": []})
    assert not recall_is_empty({"passages": [{"quote": "x"}]})
