"""Vectors sent in pgvector's binary form arrive exactly, as their exact text form does."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from satchel.memory.passages.embedder import DIMENSIONS
from satchel.memory.store.vectors import packed, vector_literal

FLOATS = st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_infinity=False)


# The database is only read: one for every example is enough.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(row=arrays(np.float32, st.integers(1, DIMENSIONS), elements=FLOATS))
def test_the_binary_form_arrives_exactly(db_url: str, row: np.ndarray) -> None:
    with psycopg.connect(db_url, autocommit=True, prepare_threshold=0) as conn:
        found = conn.execute(
            "SELECT %s::vector = %s::vector, vector_dims(%s::vector), %s::vector::text",
            (packed(row), vector_literal(row), packed(row), packed(row)),
        ).fetchone()
    assert found is not None
    same, dims, text = found
    assert same and dims == len(row)
    assert np.array_equal(np.array(text[1:-1].split(","), dtype=np.float32), row)


def test_a_vector_the_server_cannot_take_is_refused_by_name(db_url: str) -> None:
    nan = packed(np.array([0.5, np.nan], np.float32))
    with (
        psycopg.connect(db_url, autocommit=True) as conn,
        pytest.raises(psycopg.errors.DataException, match="NaN not allowed in vector"),
    ):
        conn.execute("SELECT %s::vector", (nan,))
