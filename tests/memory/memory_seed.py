"""Rows a formation worker would derive from stored turns (facts, segments), written in SQL,
and a scan of every table for traces of erased data."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]


def project_id(conn: Conn, name: str) -> int:
    row = conn.execute("SELECT id FROM projects WHERE name = %s", (name,)).fetchone()
    assert row is not None
    value: int = row[0]
    return value


def first_message(conn: Conn, observation_id: str) -> tuple[uuid.UUID, str]:
    row = conn.execute(
        "SELECT id, content FROM messages WHERE observation_id = %s ORDER BY ordinal LIMIT 1",
        (observation_id,),
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def entity(conn: Conn, project: int, subject: str | None, name: str, source: str) -> uuid.UUID:
    row = conn.execute(
        "INSERT INTO entities (id, project_id, data_subject_id, name, normalized)"
        " VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (project_id, data_subject_id, normalized)"
        " DO UPDATE SET normalized = EXCLUDED.normalized RETURNING id",
        (uuid.uuid4(), project, subject, name, name.lower()),
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO entity_sources (entity_id, observation_id) VALUES (%s, %s)"
        " ON CONFLICT DO NOTHING",
        (row[0], source),
    )
    entity_id: uuid.UUID = row[0]
    return entity_id


def fact(
    conn: Conn,
    project: int,
    subject: str | None,
    source: str,
    names: tuple[str, str],
    predicate: str = "works_at",
) -> uuid.UUID:
    """A fact `names[0] predicate names[1]` quoted from the first message of `source`."""
    message_id, content = first_message(conn, source)
    subject_entity = entity(conn, project, subject, names[0], source)
    object_entity = entity(conn, project, subject, names[1], source)
    fact_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO facts (id, project_id, data_subject_id, subject_entity_id, predicate,"
        " object, object_entity_id, statement, source_observation_id, version, valid_from)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())",
        (
            fact_id,
            project,
            subject,
            subject_entity,
            predicate,
            names[1],
            object_entity,
            content,
            source,
            uuid.uuid4(),
        ),
    )
    conn.execute(
        "INSERT INTO fact_evidence (fact_id, observation_id, message_id, source_ordinal, quote,"
        " byte_start, byte_end) VALUES (%s, %s, %s, 0, %s, 0, %s)",
        (fact_id, source, message_id, content, len(content.encode())),
    )
    conn.execute(
        "INSERT INTO fact_history (id, fact_id, valid_from, known_from, known_until,"
        " ended_by_observation_id) VALUES (%s, %s, now(), now(), now(), %s)",
        (uuid.uuid4(), fact_id, source),
    )
    return fact_id


def segment(conn: Conn, project: int, subject: str, sources: list[str], summary: str) -> uuid.UUID:
    offsets = conn.execute(
        "SELECT min(log_offset), max(log_offset) FROM observations WHERE id = ANY(%s::uuid[])",
        (sources,),
    ).fetchone()
    assert offsets is not None
    segment_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO segments (id, project_id, data_subject_id, level, from_offset, to_offset,"
        " covered, summary) VALUES (%s, %s, %s, 1, %s, %s, %s, %s)",
        (segment_id, project, subject, offsets[0], offsets[1], len(sources), summary),
    )
    for source in sources:
        conn.execute(
            "INSERT INTO segment_sources (segment_id, observation_id) VALUES (%s, %s)",
            (segment_id, source),
        )
    return segment_id


def artifact(conn: Conn, project: int, subject: str, content: bytes) -> uuid.UUID:
    """An artifact and its source observation (which takes a log offset)."""
    row = conn.execute(
        "UPDATE projects SET stored = COALESCE(stored, -1) + 1 WHERE id = %s RETURNING stored",
        (project,),
    ).fetchone()
    assert row is not None
    source = uuid.uuid4()
    conn.execute(
        "INSERT INTO observations (id, project_id, log_offset, data_subject_id, kind,"
        " occurred_at, formed_at) VALUES (%s, %s, %s, %s, 'artifact', now(), now())",
        (source, project, row[0], subject),
    )
    artifact_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO artifacts (id, project_id, data_subject_id, kind, name, content, version,"
        " creation_digest, last_digest, source_observation_id)"
        " VALUES (%s, %s, %s, 'state', 'session', %s, %s, '', '', %s)",
        (artifact_id, project, subject, content, uuid.uuid4(), source),
    )
    return artifact_id


def registry_entry(conn: Conn, project: int, external_reference: str) -> uuid.UUID:
    subject_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO subjects (id, project_id, key_digest, external_reference, label, version)"
        " VALUES (%s, %s, %s, %s, 'a person', %s)",
        (subject_id, project, uuid.uuid4().bytes, external_reference, uuid.uuid4()),
    )
    return subject_id


def tables(conn: Conn) -> list[str]:
    rows = conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name"
    ).fetchall()
    return [row[0] for row in rows]


def traces(conn: Conn, needles: list[str]) -> dict[str, list[str]]:
    """Per table, the needles found anywhere in its rows' text (bytea shown as hex)."""
    found: dict[str, list[str]] = {}
    for table in tables(conn):
        for needle in needles:
            row = conn.execute(
                f'SELECT count(*) FROM "{table}" t WHERE strpos(t::text, %s) > 0', (needle,)
            ).fetchone()
            assert row is not None
            if row[0]:
                found.setdefault(table, []).append(needle)
    return found
