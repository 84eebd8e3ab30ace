"""The memory benchmark's corpus loader leaves the project's vectors in working HNSW graphs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg

from satchel.memory.passages.embedder import DIMENSIONS, Vectors

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from _corpus import load_conversations


class Seeded:
    """Unit vectors drawn from each text's hash (the loader needs vectors, not meaning)."""

    identity = "test/seeded"

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [np.random.default_rng(abs(hash(text))).normal(size=DIMENSIONS) for text in texts]
        out = np.array(rows, dtype=np.float32).reshape(len(texts), DIMENSIONS)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_loaded_vectors_are_walked_through_their_partitions_graph(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("INSERT INTO projects (name) VALUES ('corpus') RETURNING id").fetchone()
        assert row is not None
        project = row[0]
    load_conversations(db_url, project, 0, 40, Seeded(), seed=3)
    with psycopg.connect(db_url, autocommit=True) as conn:
        graphs = conn.execute(
            "SELECT count(*) FILTER (WHERE i.indisvalid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
            " WHERE i.indrelid = %s::regclass AND a.amname = 'hnsw'",
            (f"message_vectors_{project}",),
        ).fetchone()
        assert graphs == (8,)
        invalid = conn.execute(
            "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relname LIKE 'message\\_vectors\\_%%' AND NOT i.indisvalid"
        ).fetchone()
        assert invalid == (0,)
        plan = conn.execute(
            "EXPLAIN SELECT message_id FROM message_vectors WHERE project_id = %s AND turn"
            " AND role = 'user' ORDER BY embedding <=> %s::vector LIMIT 5",
            (project, "[" + ",".join(["0.1"] * DIMENSIONS) + "]"),
        ).fetchall()
        assert any("Index Scan using" in line for (line,) in plan), plan
