"""`satchel rebuild reports`: the missing theme reports written now, up to --limit, by the
deployment's model (extractively without one)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from formation_kit import rows, with_model
from memory_kit import LiveServer
from memory_process import environment, satchel
from model_server import ModelServer
from test_memory_reports import EXTRACTIVE, settle, themed_corpus

from satchel.memory.config import MemorySettings


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def rebuild(url: str, *args: str) -> dict[str, Any]:
    done = satchel(
        "rebuild", "reports", "--project", "alpha", *args, "--json", env=environment(url)
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_rebuild_reports_writes_the_missing_ones_up_to_its_limit(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    themed_corpus(http, model)
    url = live_server.database_url
    settle(url, with_model(MemorySettings(), model))
    rows(url, "DELETE FROM reports RETURNING id")  # as a deployment from before reports
    first = rebuild(url, "--limit", "1")["written"]
    assert len(first) == 1 and first[0]["written_by"] == EXTRACTIVE and first[0]["embedded"]
    rest = rebuild(url)["written"]
    assert len(rest) == 3 and first[0]["community_id"] not in {r["community_id"] for r in rest}
    assert rebuild(url)["written"] == []
    assert rows(url, "SELECT count(*) FROM reports WHERE embedding IS NOT NULL") == [(4,)]
