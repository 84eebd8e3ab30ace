"""`satchel bench formation` scores the worker's extraction over its corpus: a table, then one
JSON object with precision, recall, F1 and the parked share of the turns, as its last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from formation_kit import claim
from model_server import ModelServer, Reply, text_of

ROOT = Path(__file__).parents[2]
KINDS = {
    "plain",
    "others",
    "first_person",
    "questions",
    "hypotheticals",
    "denials",
    "past",
    "corrections",
    "dates",
    "none",
}


def scripted(body: dict[str, Any]) -> Reply:
    """Right on the first turn, one right and one wrong fact on the second, invalid JSON on the
    third, nothing on the fourth."""
    turn = body["messages"][-1]["content"]
    if "I live in Cork." in turn:
        return {"claims": [claim("I", "lives_in", "Cork", "I live in Cork.")]}
    if "I work at Ensera" in turn:
        return {
            "claims": [
                claim("I", "works_at", "Ensera", "I work at Ensera"),
                claim("I", "uses", "Ensera", "I work at Ensera"),
            ]
        }
    if "I speak Irish" in text_of(body):
        return "{not json"
    return {"claims": []}


def test_the_benchmark_scores_admitted_facts_and_parks_failed_turns(model: ModelServer) -> None:
    model.respond = scripted
    command = [sys.executable, "-m", "satchel", "bench", "formation", "--limit", "4"]
    command += ["--base-url", model.base_url, "--model", "scripted-extractor"]
    done = subprocess.run(
        command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert "precision" in done.stdout and "parked" in done.stdout  # the table's columns
    assert (result["turns"], result["expected"], result["admitted"]) == (4, 6, 3)
    assert (result["precision"], result["recall"]) == (0.667, 0.333)
    assert result["f1"] == 0.444 and result["parked_share"] == 0.25
    assert result["parked_reasons"] == {"reply is not JSON": 1}
    assert result["json_form"] == "json_schema" and result["quote_rejections"] == 0
    assert len(model.requests) == 4


def test_the_corpus_has_every_kind_of_turn() -> None:
    corpus = yaml.safe_load((ROOT / "benchmarks" / "formation_corpus.yaml").read_text())
    assert len(corpus) >= 60
    assert set(Counter(turn["kind"] for turn in corpus)) == KINDS
    for turn in corpus:
        assert all(len(fact.split(";")) == 3 for fact in turn["facts"]), turn
