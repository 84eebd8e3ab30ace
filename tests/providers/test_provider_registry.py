"""The adapter registry: descriptors, and states refused by the adapter that did not make them."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from provider_kit import OPEN, REPO_ROOT, ROLLING, action, adapter, profile, session, user
from provider_kit import entry as entry_for

from chatwire import Answer, ChatServer
from satchel.providers import REGISTRY, OpenAIChatAdapter, OpenSourceChatAdapter
from satchel.providers import profiles as profiles_module
from satchel.providers.profiles import ProfileError, parse_profiles
from satchel.providers.responses.openai_responses import OpenAIResponsesAdapter
from satchel.providers.responses.xai_responses import XAIResponsesAdapter
from satchel.turns import AdapterRegistry, ConfigurationError, RuntimeState, Session, StateError

ROLLING_ID = "openai.chat_completions.v1"
OPEN_ID = "open_source.chat_completions.v1"


@pytest.mark.parametrize(
    ("adapter_id", "cls", "provider", "surface", "strategies", "compaction"),
    [
        (
            ROLLING_ID,
            OpenAIChatAdapter,
            "openai",
            "chat.completions",
            ("manual_rolling",),
            ("none",),
        ),
        (
            OPEN_ID,
            OpenSourceChatAdapter,
            "open_source",
            "chat.completions",
            ("continuous_conversation",),
            ("none", "harness_summary"),
        ),
        (
            "openai.responses.v1",
            OpenAIResponsesAdapter,
            "openai",
            "responses",
            ("continuous_conversation", "previous_response_id"),
            ("none", "harness_summary", "inline"),
        ),
        (
            "xai.responses.v1",
            XAIResponsesAdapter,
            "xai",
            "responses",
            ("continuous_conversation",),
            ("none", "native"),
        ),
    ],
    ids=["rolling", "open", "openai-responses", "xai-responses"],
)
def test_every_adapter_is_registered_with_its_descriptor(
    adapter_id: str,
    cls: type,
    provider: str,
    surface: str,
    strategies: tuple[str, ...],
    compaction: tuple[str, ...],
) -> None:
    assert adapter_id in REGISTRY
    descriptor = REGISTRY.descriptor(adapter_id)
    assert descriptor.adapter_id == adapter_id
    assert descriptor.provider == provider
    assert descriptor.api_surface == surface
    assert descriptor.strategies == strategies
    assert descriptor.compaction == compaction
    assert descriptor.review_status in ("unreviewed", "provider_reference", "provider_approved")
    assert descriptor.version.count(".") == 2
    assert all(part.isdigit() for part in descriptor.version.split("."))
    path = REPO_ROOT / descriptor.implementation_path
    assert not descriptor.implementation_path.startswith("/")
    assert path.is_file()
    assert path.resolve() == Path(inspect.getsourcefile(cls) or "").resolve()
    assert cls.descriptor == descriptor
    assert descriptor.to_dict()["adapter_id"] == adapter_id


def test_the_registry_lists_its_descriptors_and_refuses_unknown_ids() -> None:
    ids = [descriptor.adapter_id for descriptor in REGISTRY]
    assert {ROLLING_ID, OPEN_ID} <= set(ids)
    assert ids == sorted(ids)
    with pytest.raises(ConfigurationError, match=r"acme\.chat\.v9"):
        REGISTRY.get("acme.chat.v9")
    with pytest.raises(ConfigurationError, match="already registered"):
        REGISTRY.register(
            OpenAIChatAdapter.descriptor,
            lambda **options: None,  # type: ignore[arg-type, return-value]
            lambda request, strategy: request,
        )


def test_a_new_adapter_brings_its_request_check_with_its_registration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: request checks lived in a table beside the registry, so a profile naming a
    newly registered adapter failed with a KeyError instead of being checked."""
    registry = AdapterRegistry()
    for descriptor in REGISTRY:
        entry = REGISTRY.get(descriptor.adapter_id)
        registry.register(descriptor, entry.factory, entry.validate_request)
    new = dataclasses.replace(OpenSourceChatAdapter.descriptor, adapter_id="acme.chat.v2")
    seen: list[tuple[dict[str, Any], str]] = []

    def check(request: dict[str, Any], strategy: str, compaction: str) -> dict[str, Any]:
        seen.append((request, strategy))
        if request.get("temperature", 0) > 1:
            raise ConfigurationError("request.temperature: at most 1 for acme")
        return request

    registry.register(new, REGISTRY.get(OPEN_ID).factory, check)
    monkeypatch.setattr(profiles_module, "REGISTRY", registry)
    entry = {
        **entry_for(OPEN),
        "runtime": {**entry_for(OPEN)["runtime"], "adapter_id": "acme.chat.v2"},
    }
    loaded = parse_profiles([entry])
    assert seen == [(entry["request"], "continuous_conversation")]
    assert loaded[entry["id"]].runtime.adapter == "acme.chat.v2"
    hot = {**entry, "request": {**entry["request"], "temperature": 2}}
    with pytest.raises(ProfileError, match=r"request\.temperature: at most 1 for acme"):
        parse_profiles([hot])


def accepted_state(profile_id: str) -> RuntimeState:
    server = ChatServer(Answer("ACTION1", reasoning="r1"))
    run = session(profile(profile_id), server)
    run.turn([user("frame 1")], action)
    return run.state


@pytest.mark.parametrize(
    ("made_by", "used_with"), [(ROLLING, OPEN), (OPEN, ROLLING)], ids=["rolling", "open"]
)
def test_a_state_used_with_the_other_adapter_is_refused_naming_both(
    made_by: str, used_with: str
) -> None:
    state = accepted_state(made_by)
    other = adapter(profile(used_with), ChatServer())
    for check in (
        lambda: other.check_state(state),
        lambda: Session(other, state=state, sleep=lambda seconds: None),
    ):
        with pytest.raises(StateError) as caught:
            check()
        message = str(caught.value)
        assert "RuntimeState.adapter_id" in message
        assert ROLLING_ID in message
        assert OPEN_ID in message


@pytest.mark.parametrize("profile_id", [ROLLING, OPEN], ids=["rolling", "open"])
def test_a_state_with_an_unknown_strategy_is_refused_naming_the_field(profile_id: str) -> None:
    state = accepted_state(profile_id)
    forged = RuntimeState(state.adapter_id, "bogus_strategy", state.payload, state.accepted_turns)
    adapt = adapter(profile(profile_id), ChatServer())
    with pytest.raises(StateError, match=r"RuntimeState\.strategy"):
        adapt.check_state(forged)
    with pytest.raises(StateError, match=r"RuntimeState\.strategy"):
        REGISTRY.check_state(forged)


@pytest.mark.parametrize(
    ("profile_id", "strategy"),
    [(ROLLING, "continuous_conversation"), (OPEN, "manual_rolling")],
    ids=["rolling", "open"],
)
def test_a_state_with_another_strategy_is_refused_naming_the_field(
    profile_id: str, strategy: str
) -> None:
    state = accepted_state(profile_id)
    forged = RuntimeState(state.adapter_id, strategy, state.payload, state.accepted_turns)
    with pytest.raises(StateError, match=r"RuntimeState\.strategy") as caught:
        adapter(profile(profile_id), ChatServer()).check_state(forged)
    assert strategy in str(caught.value)


def test_a_state_of_an_unregistered_adapter_is_refused() -> None:
    state = accepted_state(ROLLING)
    forged = RuntimeState("acme.chat.v9", state.strategy, state.payload, state.accepted_turns)
    with pytest.raises(StateError, match=r"acme\.chat\.v9"):
        REGISTRY.check_state(forged)


@pytest.mark.parametrize("profile_id", [ROLLING, OPEN], ids=["rolling", "open"])
def test_run_metadata_carries_the_descriptor(profile_id: str) -> None:
    server = ChatServer(Answer("ACTION1"))
    run = session(profile(profile_id), server)
    run.turn([user("frame 1")], action)
    runtime = run.finish("WIN", run_id="r1", started_at=datetime.now(UTC))["runtime"]
    descriptor = REGISTRY.descriptor(run.adapter.descriptor.adapter_id)
    assert runtime["adapter_id"] == descriptor.adapter_id
    assert runtime["strategy"] == descriptor.strategies[0]
    assert runtime["provider"] == descriptor.provider
    assert runtime["api_surface"] == descriptor.api_surface
    assert runtime["implementation_path"] == descriptor.implementation_path
    assert runtime["adapter_version"] == descriptor.version
    assert runtime["review_status"] == descriptor.review_status
