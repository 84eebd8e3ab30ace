"""Formation against what real servers do: a model that rambles past the output limit, answers
invalid JSON or does not answer in time parks the turn with its reason while the worker forms the
next turn; a server refusing a JSON schema is asked for a JSON object, then for plain text, and
the form it took is kept; a failed request is sent again."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx
import pytest
from formation_kit import claim, freshness, observe, passes, rows, with_model
from memory_kit import LiveServer
from model_server import Failure, ModelServer, Reply, Slow, text_of

from satchel.memory.config import MemorySettings, SettingError
from satchel.memory.formation.extraction import CHARACTERS_PER_CLAIM, output_tokens

ANN = "person-ann"
BEN = "person-ben"
FACT = {"claims": [claim("I", "lives_in", "Cork", "I live in Cork.")]}


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def with_client(settings: MemorySettings, **changes: Any) -> MemorySettings:
    """`settings` with the model client's settings changed."""
    assert settings.formation is not None
    return replace(settings, formation=replace(settings.formation, **changes))


def parked_reasons(url: str) -> dict[str, str]:
    """Each parked turn's subject and the reason it was parked with."""
    sql = "SELECT data_subject_id, last_error FROM observations WHERE parked_at IS NOT NULL"
    return dict(rows(url, sql))


@pytest.mark.parametrize(
    ("misbehaving", "reason"),
    [
        ("word " * 5_000, "reply cut at the output limit of {limit} tokens"),
        ('{"claims": [{"subject": "I", "predicate": ', "reply is not JSON"),
        (Slow(30.0, FACT), "timeout: no reply within 0.5 s after 1 attempt(s); raise"),
    ],
    ids=["rambles", "invalid-json", "times-out"],
)
def test_a_misbehaving_model_parks_the_turn_and_the_worker_forms_the_next(
    live_server: LiveServer, http: httpx.Client, model: ModelServer, misbehaving: Reply, reason: str
) -> None:
    observe(http, ANN, ("user", "I live in Cork."))
    observe(http, BEN, ("user", "I live in Cork."))

    def respond(body: dict[str, Any]) -> Reply:
        return misbehaving if len(model.requests) == 1 else FACT

    model.respond = respond
    settings = with_client(with_model(MemorySettings(), model, formation_attempts=1), timeout=0.5)
    [tally] = passes(live_server.database_url, settings, model)

    assert (tally.failed, tally.parked, tally.formed, tally.facts) == (1, 1, 1, 1)
    assert freshness(http) == (1, 1, 1)
    limit = output_tokens(1)
    assert model.requests[0]["max_tokens"] == limit
    assert parked_reasons(live_server.database_url)[ANN].startswith(reason.format(limit=limit))
    assert rows(live_server.database_url, "SELECT data_subject_id FROM facts") == [(BEN,)]


def test_the_strongest_json_form_the_server_takes_is_asked_for_and_kept(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    url = live_server.database_url
    settings = with_model(MemorySettings(), model)
    observe(http, ANN, ("user", "I live in Cork."))
    observe(http, ANN, ("user", "I live in Cork."))
    model.reply(Failure(400), FACT, FACT)
    [tally] = passes(url, settings, model)
    assert (tally.formed, tally.facts, tally.refused) == (2, 1, 1)  # the second is a duplicate
    forms = [request["response_format"]["type"] for request in model.requests]
    assert forms == ["json_schema", "json_object", "json_object"]

    observe(http, BEN, ("user", "I live in Cork."))
    observe(http, BEN, ("user", "I live in Cork."))
    prose = f"Sure! Here are the claims:\n```json\n{json.dumps(FACT)}\n```"
    model.reply(Failure(422), Failure(400), prose, prose)
    del model.requests[:]
    [tally] = passes(url, settings, model)
    assert (tally.formed, tally.facts) == (2, 1)
    forms = [request.get("response_format", {}).get("type") for request in model.requests]
    assert forms == ["json_schema", "json_object", None, None]
    assert rows(url, "SELECT data_subject_id FROM facts ORDER BY 1") == [(ANN,), (BEN,)]


def test_a_failed_request_is_sent_again_and_the_claim_limit_follows_the_turn(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    settings = with_client(with_model(MemorySettings(), model), retries=2)
    long_turn = "I live in Cork. " * 8
    observe(http, ANN, ("user", long_turn))
    model.reply(Failure(503), Failure(429), FACT)
    [tally] = passes(live_server.database_url, settings, model)
    assert (tally.failed, tally.formed, tally.facts) == (0, 1, 1)
    assert len(model.requests) == 3
    limit = -(-len(long_turn) // CHARACTERS_PER_CLAIM)
    schema = model.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["claims"]["maxItems"] == limit
    assert f"at most {limit} claims" in text_of(model.requests[0])
    assert model.requests[0]["max_tokens"] == output_tokens(limit)


def test_timeouts_retries_and_attempts_come_from_the_environment() -> None:
    env = {
        "SATCHEL_FORMATION_MODEL": "m",
        "SATCHEL_FORMATION_BASE_URL": "http://127.0.0.1:1/v1",
        "SATCHEL_FORMATION_TIMEOUT": "300",
        "SATCHEL_FORMATION_RETRIES": "0",
        "SATCHEL_FORMATION_ATTEMPTS": "2",
        "SATCHEL_FORMATION_BACKOFF": "5",
    }
    settings = MemorySettings.from_env(env)
    assert settings.formation is not None
    assert (settings.formation.timeout, settings.formation.retries) == (300.0, 0)
    assert (settings.formation_attempts, settings.formation_backoff) == (2, 5.0)
    defaults = MemorySettings.from_env({k: env[k] for k in list(env)[:2]})
    assert defaults.formation is not None
    assert (defaults.formation.timeout, defaults.formation.retries) == (120.0, 1)
    with pytest.raises(SettingError, match="SATCHEL_FORMATION_RETRIES must be from 0 to 10"):
        MemorySettings.from_env({**env, "SATCHEL_FORMATION_RETRIES": "-1"})
