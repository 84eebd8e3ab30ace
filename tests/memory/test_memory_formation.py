"""Extraction: claims from a loopback model admitted as facts citing their spans, or refused with
their reasons; quote location; the extractor pinned per turn; the host allowlist."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from formation_kit import MODEL, claim, freshness, observe, passes, rows, with_model
from memory_kit import LiveServer
from model_server import ModelServer

from satchel.memory.config import MemorySettings, ModelClientSettings, formation_from_env
from satchel.memory.domain import StoredMessage
from satchel.memory.formation.extraction import (
    CODE_VERSION,
    PROMPT_ID,
    find_span,
    locate,
    output_tokens,
)
from satchel.memory.formation.model import ChatModel, HostNotAllowed
from satchel.memory.formation.worker import Worker

ANN = "person-ann"
HOME = "Hi! We moved in spring and   I live in\n  Cork now. My sister Maeve works at Ensera."


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(form_on_store=False)


def recall(http: httpx.Client, question: str, **controls: Any) -> list[dict[str, Any]]:
    answer = http.post(
        "/v1/recalls",
        json={"question": question, "data_subject_id": ANN, "surfaces": ["facts"], **controls},
    )
    assert answer.status_code == 200, answer.text
    facts: list[dict[str, Any]] = answer.json()["facts"]
    return facts


def test_admitted_claims_become_facts_citing_their_spans(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    receipt = observe(http, ANN, ("user", HOME), ("assistant", "Cork is lovely in spring."))
    assert freshness(http) == (0, None, 0)
    model.reply(
        {
            "claims": [
                claim("I", "lives_in", "Cork", "I live in Cork now"),
                claim("Maeve", "works at", "Ensera", "My sister Maeve works at Ensera."),
            ]
        }
    )
    settings = with_model(MemorySettings(), model)
    [tally] = passes(live_server.database_url, settings, model)
    assert (tally.formed, tally.facts, tally.refused) == (1, 2, 0)
    assert freshness(http) == (0, 0, 0)

    [request] = model.requests
    assert request["model"] == MODEL and request["temperature"] == 0
    asked = request["response_format"]
    assert asked["type"] == "json_schema" and asked["json_schema"]["name"] == "claims"
    claims = asked["json_schema"]["schema"]["properties"]["claims"]
    assert "lives_in" in claims["items"]["properties"]["predicate"]["enum"]
    assert claims["maxItems"] > 1 and request["max_tokens"] == output_tokens(claims["maxItems"])
    assert "lives_in" in request["messages"][0]["content"]
    assert HOME in request["messages"][1]["content"]

    [maeve] = recall(http, "Where does Maeve work?")
    triple = (maeve["subject"], maeve["predicate"], maeve["object"])
    assert triple == ("Maeve", "works_at", "Ensera")
    assert maeve["source_role"] == "user"
    evidence = maeve["evidence"]
    assert evidence["observation_id"] == receipt["id"]
    data = HOME.encode()
    assert data[evidence["byte_start"] : evidence["byte_end"]].decode() == evidence["quote"]
    assert evidence["quote"] == "My sister Maeve works at Ensera."

    [home] = recall(http, "Where do I live?")
    assert (home["subject"], home["predicate"], home["object"]) == ("I", "lives_in", "Cork")
    quote = home["evidence"]["quote"]
    assert quote == "I live in\n  Cork now"  # the message's own text, found whitespace-collapsed
    start, end = home["evidence"]["byte_start"], home["evidence"]["byte_end"]
    assert data[start:end].decode() == quote

    [identity] = rows(
        live_server.database_url,
        "SELECT extractor_model, extractor_prompt, extractor_code FROM observations",
    )
    assert identity == (MODEL, PROMPT_ID, CODE_VERSION)


def test_every_refused_claim_is_stored_with_its_reason(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    observe(
        http,
        ANN,
        ("user", "I live in Cork. Maybe I will move to Dublin. I used to work at Acme."),
        ("assistant", "I live in the cloud. Ensera is based in Cork."),
    )
    cases = {
        "malformed": claim("I", "lives_in", "", "I live in Cork."),
        "unmapped_predicate": claim("I", "adores", "Cork", "I live in Cork."),
        "unresolvable_subject": claim("she", "lives_in", "Cork", "I live in Cork."),
        "unlocatable_quote": claim("I", "lives_in", "Cork", "I live in Galway."),
        "not_asserted": claim(
            "I", "intends_to", "move to Dublin", "Maybe I will move to Dublin.", asserted=False
        ),
        "not_current": claim("I", "works_at", "Acme", "I used to work at Acme.", current=False),
        "not_spoken_by_person": claim("I", "lives_in", "the cloud", "I live in the cloud.", 1),
        "duplicate": claim("I", "lives_in", "cork", "I live in Cork."),
    }
    admitted = [
        claim("I", "lives_in", "Cork", "I live in Cork."),
        claim("Ensera", "located_in", "Cork", "Ensera is based in Cork.", 1),
    ]
    model.reply({"claims": [*admitted, *cases.values(), "not an object"]})
    [tally] = passes(live_server.database_url, with_model(MemorySettings(), model), model)
    assert (tally.formed, tally.facts, tally.refused) == (1, 2, len(cases) + 1)

    refused = rows(
        live_server.database_url,
        "SELECT reason, claim FROM rejected_claims WHERE data_subject_id = %s ORDER BY reason",
        ANN,
    )
    reasons = [reason for reason, _ in refused]
    assert sorted(reasons) == sorted([*cases, "malformed"])
    stored = {reason: body for reason, body in refused if reason != "malformed"}
    assert stored["unmapped_predicate"]["predicate"] == "adores"
    assert stored["not_spoken_by_person"]["quote"] == "I live in the cloud."

    # A third-person claim from the assistant is admitted, and recalled as the assistant's.
    [ensera] = recall(http, "Where is Ensera?", source_roles=["assistant"])
    assert (ensera["object"], ensera["source_role"]) == ("Cork", "assistant")
    assert recall(http, "Where is Ensera?") == []

    receipt = http.post("/v1/erasures", json={"data_subject_id": ANN}).json()
    assert receipt["deleted"]["rejected_claim"] == len(cases) + 1
    assert receipt["residual"]["rejected_claim"] == 0 and receipt["clean"]
    assert rows(live_server.database_url, "SELECT count(*) FROM rejected_claims") == [(0,)]


def test_quotes_are_located_exactly_then_with_whitespace_collapsed() -> None:
    text = "Ná bí buartha:  I moved to\tGaillimh\n in 2021."
    start = text.index("I moved")
    assert locate("I moved to", text) == (start, start + 10)
    assert locate("I moved to Gaillimh in 2021.", text) == (start, len(text))
    assert locate("  moved   to  ", text) == (start + 2, start + 10)
    assert locate("I moved to Galway", text) is None
    assert locate("   ", text) is None

    at = datetime(2026, 1, 1, tzinfo=UTC)
    said = [
        StoredMessage(1, 0, "assistant", "You said: I moved to Gaillimh.", at),
        StoredMessage(2, 1, "user", text, at),
    ]
    span = find_span("I moved to Gaillimh", said, 1)
    assert span is not None and span.message.ordinal == 1
    assert span.quote == "I moved to\tGaillimh"
    assert text.encode()[span.byte_start : span.byte_end].decode() == span.quote
    assert span.byte_start == len("Ná bí buartha:  ".encode())  # bytes, not characters
    unnamed = find_span("I moved to Gaillimh", said, None)
    assert unnamed is not None and unnamed.message.ordinal == 0


def test_single_valued_relations_are_superseded_over_time(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    observe(http, ANN, ("user", "I live in Cork."))
    observe(http, ANN, ("user", "Big news: I live in Dublin now."))
    model.reply(
        {"claims": [claim("I", "lives_in", "Cork", "I live in Cork.")]},
        {"claims": [claim("me", "lives in", "Dublin", "I live in Dublin now.")]},
    )
    passes(live_server.database_url, with_model(MemorySettings(), model), model)
    assert [fact["object"] for fact in recall(http, "Where do I live?")] == ["Dublin"]
    closed = rows(
        live_server.database_url,
        "SELECT object FROM facts WHERE valid_until IS NOT NULL OR known_until IS NOT NULL",
    )
    assert closed == [("Cork",)]


def test_without_a_model_turns_are_formed_without_facts(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    for text in ("I live in Cork.", "I work at Ensera."):
        observe(http, ANN, ("user", text))
    [tally] = passes(live_server.database_url, MemorySettings(), model)
    assert (tally.formed, tally.facts) == (2, 0)
    assert freshness(http) == (1, 1, 0)
    assert model.requests == []
    assert rows(live_server.database_url, "SELECT count(*) FROM facts") == [(0,)]
    identities = rows(
        live_server.database_url,
        "SELECT extractor_model, extractor_prompt, extractor_code FROM observations",
    )
    assert identities == [(None, None, CODE_VERSION)] * 2


def test_the_extractor_is_pinned_on_each_turn_it_formed(
    live_server: LiveServer, http: httpx.Client, model: ModelServer
) -> None:
    observe(http, ANN, ("user", "I live in Cork."))
    passes(live_server.database_url, MemorySettings(), model)
    observe(http, ANN, ("user", "I work at Ensera."))
    passes(live_server.database_url, with_model(MemorySettings(), model), model)
    pinned = rows(
        live_server.database_url,
        "SELECT log_offset, extractor_model, extractor_prompt FROM observations"
        " ORDER BY log_offset",
    )
    assert pinned == [(0, None, None), (1, MODEL, PROMPT_ID)]
    assert len(model.requests) == 1  # a formed turn is never formed again


def test_text_goes_only_to_allowed_hosts(db_url: str) -> None:
    outside = ModelClientSettings(model="m", base_url="https://models.example.com/v1")
    with pytest.raises(HostNotAllowed):
        ChatModel(outside)
    with pytest.raises(HostNotAllowed):
        Worker(db_url, MemorySettings(formation=outside))
    for url in ("ftp://127.0.0.1/v1", "http:///v1"):
        with pytest.raises(HostNotAllowed):
            ChatModel(ModelClientSettings(model="m", base_url=url))
    allowed = ModelClientSettings(
        model="m", base_url=outside.base_url, allowed_hosts=("models.example.com",)
    )
    assert ChatModel(allowed).url == "https://models.example.com/v1/chat/completions"

    env = {
        "SATCHEL_FORMATION_MODEL": "m",
        "SATCHEL_FORMATION_BASE_URL": "https://models.example.com/v1",
        "SATCHEL_FORMATION_API_KEY_ENV": "MY_KEY",
        "SATCHEL_FORMATION_ALLOWED_HOSTS": " Models.Example.com , other.example ",
    }
    configured = formation_from_env(env)
    assert configured is not None
    assert configured.allowed_hosts == ("models.example.com", "other.example")
    assert configured.api_key_env == "MY_KEY"
    assert formation_from_env({"SATCHEL_FORMATION_MODEL": "m"}) is None
    loopback = formation_from_env({**env, "SATCHEL_FORMATION_ALLOWED_HOSTS": ""})
    assert loopback is not None and "models.example.com" not in loopback.allowed_hosts
