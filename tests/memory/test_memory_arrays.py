"""Array literals: PostgreSQL reads back exactly the values a list parameter would carry."""

from __future__ import annotations

import uuid

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from satchel.memory.store.arrays import int_array, text_array, uuid_array

# PostgreSQL text holds any character but NUL.
texts = st.lists(st.text(st.characters(exclude_characters="\x00")), max_size=12)
ints = st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=12)
uuids = st.lists(st.uuids(), max_size=12)
# The database is only read, so one for all the examples of a test is as good as one each.
READS_ONLY = HealthCheck.function_scoped_fixture


def read_back(url: str, literal: str, kind: str) -> list[object]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT %s::{kind}[]", (literal,)).fetchone()
    assert row is not None
    return list(row[0])


@settings(max_examples=60, deadline=None, suppress_health_check=[READS_ONLY])
@given(values=texts)
def test_texts_come_back_as_they_were_sent(db_url: str, values: list[str]) -> None:
    assert read_back(db_url, text_array(values), "text") == values


def test_quotes_backslashes_commas_braces_and_the_word_null_stay_text(db_url: str) -> None:
    values = ['a"b', "c\\d", "x,y", "{z}", " padded ", "NULL", "", "é 中", '\\"', "tab\tnl\n"]
    assert read_back(db_url, text_array(values), "text") == values


@settings(max_examples=30, deadline=None, suppress_health_check=[READS_ONLY])
@given(values=ints, ids=uuids)
def test_integers_and_uuids_come_back_as_they_were_sent(
    db_url: str, values: list[int], ids: list[uuid.UUID]
) -> None:
    assert read_back(db_url, int_array(values), "bigint") == values
    assert read_back(db_url, uuid_array(ids), "uuid") == ids
