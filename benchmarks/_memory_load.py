"""The memory benchmark's bulk data, written straight to PostgreSQL: authored facts about
generated people (row for row what `records/assert` writes), and formed turns of one subject with
the segments a worker would write over them."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from satchel.memory.service.tokens import create_token

# First, middle and last names: up to 80,000 people; 20,000 of them hold 5 facts each at 100k.
FIRST_TEXT = """
Aoife Ciara Niamh Saoirse Orla Roisin Siobhan Eimear Grainne Maeve Cian Oisin Darragh Eoin Fionn
Ruairi Padraig Tadhg Colm Diarmuid Ada Grace Alan Edsger Barbara Donald Frances Margaret Katherine
Dorothy John Leslie Tony Radia Sophie Hedy Annie Mary Karen Lynn
"""
LAST_TEXT = """
Brennan Byrne Carroll Doherty Duffy Dunne Farrell Flanagan Gallagher Healy Hogan Kavanagh Keane
Kelleher Lynch Madden Moran Nolan Quinn Regan Sheehan Walsh Whelan Lovelace Hopper Turing Dijkstra
Liskov Knuth Allen Hamilton Johnson Vaughan Hoare Lamport Perlman Wilson Lamarr Easley Keller Jones
Conway Ritchie Thompson Kernighan Pike Cerf Kahn Postel Clark
"""
FIRST_NAMES, LAST_NAMES = FIRST_TEXT.split(), LAST_TEXT.split()
PREDICATES = {
    "works_at": [f"Company {n}" for n in range(400)],
    "lives_in": [f"Town {n}" for n in range(300)],
    "speaks": [f"Language {n}" for n in range(40)],
    "uses": [f"Tool {n}" for n in range(250)],
    "knows": [],  # another person
}


@dataclass(frozen=True, slots=True)
class Loaded:
    people: list[str]
    seconds: float


def project(conn: psycopg.Connection[Any], name: str, url: str) -> tuple[int, str]:
    token = create_token(url, name)
    row = conn.execute("SELECT id FROM projects WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return row[0], token


def load_facts(url: str, project_id: int, count: int, seed: int) -> Loaded:
    """`count` authored facts about generated people, as `records/assert` would store them."""
    began = time.perf_counter()
    rng = random.Random(seed)
    people = [
        f"{first} {middle} {last}"
        for first in FIRST_NAMES
        for middle in FIRST_NAMES
        for last in LAST_NAMES
        if first != middle
    ]
    rng.shuffle(people)
    people = people[: max(1, count // 5)]
    entities: dict[str, uuid.UUID] = {}
    principal = uuid.uuid4()
    now = datetime.now(UTC)

    def entity(name: str) -> uuid.UUID:
        if name not in entities:
            entities[name] = uuid.uuid4()
        return entities[name]

    observations, messages, facts, evidence, sources = [], [], [], [], set()
    for offset in range(count):
        person = people[offset % len(people)]
        predicate = list(PREDICATES)[offset // len(people) % len(PREDICATES)]
        choices = PREDICATES[predicate] or people
        obj = rng.choice(choices)
        statement = f"{person} {predicate.replace('_', ' ')} {obj}."
        at = now - timedelta(seconds=count - offset)
        observation, message, fact = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        subject_entity, object_entity = entity(person), entity(obj)
        observations.append((observation, project_id, offset, "curated", at, at))
        messages.append((message, observation, project_id, 0, "user", statement, 0, at, False))
        sources.update({(subject_entity, observation), (object_entity, observation)})
        facts.append(
            (
                fact,
                project_id,
                subject_entity,
                predicate,
                obj,
                object_entity,
                statement,
                1.0,
                "user",
                observation,
                uuid.uuid4(),
                at,
                at,
                True,
                at,
            )
        )
        evidence.append(
            (
                fact,
                observation,
                message,
                0,
                statement,
                0,
                len(statement.encode()),
                principal,
                "curated/v1",
            )
        )
    with psycopg.connect(url) as conn:
        copy(
            conn,
            "observations (id, project_id, log_offset, kind, occurred_at, formed_at)",
            observations,
        )
        copy(
            conn,
            "messages (id, observation_id, project_id, ordinal, role, content, group_ordinal,"
            " occurred_at, turn)",
            messages,
        )
        copy(
            conn,
            "entities (id, project_id, name, normalized)",
            [(i, project_id, n, " ".join(n.lower().split())) for n, i in entities.items()],
        )
        copy(conn, "entity_sources (entity_id, observation_id)", sorted(sources))
        copy(
            conn,
            "facts (id, project_id, subject_entity_id, predicate, object, object_entity_id,"
            " statement, confidence, source_role, source_observation_id, version, valid_from,"
            " known_from, authored, recorded_at)",
            facts,
        )
        copy(
            conn,
            "fact_evidence (fact_id, observation_id, message_id, source_ordinal, quote,"
            " byte_start, byte_end, authored_by, extractor_version)",
            evidence,
        )
        conn.execute(
            "UPDATE projects SET stored = %s, formed = %s WHERE id = %s",
            (count - 1, count - 1, project_id),
        )
    return Loaded(people, time.perf_counter() - began)


def load_turns(url: str, project_id: int, subject: str, count: int, segments: bool) -> float:
    """`count` formed turns of one subject (two messages each), and optionally the segments a
    worker would write over all but the newest 8: level 1 per 8 turns, each level above per 8
    segments below. Returns the seconds spent."""
    began = time.perf_counter()
    now = datetime.now(UTC)
    observations, messages, ids = [], [], []
    for offset in range(count):
        at = now - timedelta(minutes=count - offset)
        observation = uuid.uuid4()
        ids.append(observation)
        observations.append((observation, project_id, offset, subject, "turn", at, at))
        messages.append(
            (
                uuid.uuid4(),
                observation,
                project_id,
                subject,
                0,
                "user",
                f"Turn {offset}: can we move the design review to Thursday at 3?",
                0,
                at,
            )
        )
        messages.append(
            (
                uuid.uuid4(),
                observation,
                project_id,
                subject,
                1,
                "assistant",
                "Done: Thursday 15:00, and I told the others in the channel.",
                1,
                at,
            )
        )
    rows: list[tuple[Any, ...]] = []
    links: list[tuple[uuid.UUID, uuid.UUID]] = []
    if segments:
        below = [(offset, offset, [ids[offset]]) for offset in range(count - 8)]
        for level in range(1, 7):
            above = []
            for start in range(0, len(below) - len(below) % 8, 8):
                group = below[start : start + 8]
                segment = uuid.uuid4()
                sources = [s for _, _, members in group for s in members]
                low, high = group[0][0], group[-1][1]
                summary = f"Level {level} summary of turns {low}..{high}: " + "scheduling; " * 30
                rows.append((segment, project_id, subject, level, low, high, len(sources), summary))
                links.extend((segment, source) for source in sources)
                above.append((low, high, sources))
            if len(above) < 8:
                break
            below = above
    with psycopg.connect(url) as conn:
        copy(
            conn,
            "observations (id, project_id, log_offset, data_subject_id, kind, occurred_at,"
            " formed_at)",
            observations,
        )
        copy(
            conn,
            "messages (id, observation_id, project_id, data_subject_id, ordinal, role, content,"
            " group_ordinal, occurred_at)",
            messages,
        )
        copy(
            conn,
            "segments (id, project_id, data_subject_id, level, from_offset, to_offset, covered,"
            " summary)",
            rows,
        )
        copy(conn, "segment_sources (segment_id, observation_id)", links)
        conn.execute(
            "UPDATE projects SET stored = %s, formed = %s WHERE id = %s",
            (count - 1, count - 1, project_id),
        )
    return time.perf_counter() - began


def copy(conn: psycopg.Connection[Any], target: str, rows: list[Any]) -> None:
    with conn.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as writer:
        for row in rows:
            writer.write_row(row)
