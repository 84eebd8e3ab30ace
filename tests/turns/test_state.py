"""`RuntimeState` validation: every violation is a `StateError` naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatwire import ChatServer
from satchel.providers import REGISTRY
from satchel.turns import RuntimeState, StateError, TurnBoundary
from satchel.turns.state import check_json
from turns.kit import open_source_adapter, openai_adapter

OPEN = "open_source.chat_completions.v1"
ROLLING = "openai.chat_completions.v1"


def payload(messages: int = 2) -> dict[str, Any]:
    items = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(messages)
    ]
    return {"preamble": [], "messages": items, "pending": []}


def state(**changes: Any) -> RuntimeState:
    fields: dict[str, Any] = {
        "adapter_id": OPEN,
        "strategy": "continuous_conversation",
        "payload": payload(4),
        "accepted_turns": (TurnBoundary(0, 2), TurnBoundary(2, 4)),
    }
    fields.update(changes)
    return RuntimeState(**fields)


def test_a_valid_state_validates_and_returns_itself() -> None:
    valid = state()
    assert valid.validate() is valid
    REGISTRY.check_state(valid)


@pytest.mark.parametrize("version", [0, 2, "1", 1.0, True])
def test_wrong_schema_version(version: object) -> None:
    with pytest.raises(StateError, match=r"RuntimeState\.schema_version"):
        state(schema_version=version).validate()


@pytest.mark.parametrize("adapter_id", ["", None, 7])
def test_missing_adapter_id(adapter_id: object) -> None:
    with pytest.raises(StateError, match=r"RuntimeState\.adapter_id"):
        state(adapter_id=adapter_id).validate()


def test_unknown_adapter_id_is_refused_by_the_registry() -> None:
    with pytest.raises(StateError, match=r"RuntimeState\.adapter_id.*'acme\.chat\.v9'"):
        REGISTRY.check_state(state(adapter_id="acme.chat.v9"))


def test_unknown_strategy() -> None:
    with pytest.raises(StateError, match=r"RuntimeState\.strategy.*'telepathy'"):
        state(strategy="telepathy").validate()


def test_state_of_another_adapter_names_both_ids(chat_server: ChatServer) -> None:
    adapter = openai_adapter(chat_server)
    with pytest.raises(StateError, match=r"RuntimeState\.adapter_id") as caught:
        adapter.check_state(state())
    assert OPEN in str(caught.value)
    assert ROLLING in str(caught.value)


def test_state_of_another_strategy_names_both(chat_server: ChatServer) -> None:
    adapter = open_source_adapter(chat_server)
    with pytest.raises(StateError, match=r"RuntimeState\.strategy") as caught:
        adapter.check_state(state(strategy="manual_rolling"))
    assert "manual_rolling" in str(caught.value)
    assert "continuous_conversation" in str(caught.value)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(float("nan"), id="nan"),
        pytest.param(float("inf"), id="infinity"),
        pytest.param({"a", "b"}, id="set"),
        pytest.param({1: "int key"}, id="int-key"),
        pytest.param(("a", "tuple"), id="tuple"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(object(), id="object"),
    ],
)
def test_payload_that_is_not_json(bad: object) -> None:
    broken = {**payload(4), "extra": {"deep": [bad]}}
    with pytest.raises(StateError, match=r"RuntimeState\.payload: not JSON"):
        state(payload=broken).validate()


@pytest.mark.parametrize(
    "turns",
    [
        pytest.param((TurnBoundary(0, 3), TurnBoundary(2, 4)), id="overlapping"),
        pytest.param((TurnBoundary(2, 4), TurnBoundary(0, 2)), id="unordered"),
        pytest.param((TurnBoundary(0, 2), TurnBoundary(2, 2)), id="empty"),
        pytest.param((TurnBoundary(0, 2), TurnBoundary(3, 2)), id="reversed"),
        pytest.param((TurnBoundary(-1, 2),), id="negative"),
        pytest.param((TurnBoundary(0, True),), id="bool"),
    ],
)
def test_malformed_boundaries(turns: tuple[TurnBoundary, ...]) -> None:
    with pytest.raises(StateError, match=r"RuntimeState\.accepted_turns\[\d\]"):
        state(accepted_turns=turns).validate()


def test_boundary_past_the_payload_items(chat_server: ChatServer) -> None:
    adapter = open_source_adapter(chat_server)
    past = state(accepted_turns=(TurnBoundary(0, 2), TurnBoundary(2, 5)))
    past.validate()
    with pytest.raises(StateError, match=r"RuntimeState\.accepted_turns\[1\].*5"):
        adapter.check_state(past)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"preamble": "not a list"}, r"payload\.preamble"),
        ({"messages": [{"role": "tool", "content": "x"}]}, r"payload\.messages\[0\]"),
        (
            {"pending": [{"role": "user", "content": "x", "blob": 1}]},
            r"payload\.pending\[0\]\.blob",
        ),
        ({"extra": []}, r"payload: expected keys"),
    ],
)
def test_adapter_payload_violations_name_the_field(
    chat_server: ChatServer, change: dict[str, Any], field: str
) -> None:
    adapter = open_source_adapter(chat_server)
    bad = state(payload={**payload(4), **change}, accepted_turns=())
    with pytest.raises(StateError, match=rf"RuntimeState\.{field}"):
        adapter.check_state(bad)


def test_to_json_from_json_round_trip() -> None:
    original = state(
        accepted_turns=(
            TurnBoundary(0, 2, ({"role": "user", "content": "m0"},), "why"),
            TurnBoundary(2, 4),
        )
    )
    text = json.dumps(original.to_json())
    restored = RuntimeState.from_json(json.loads(text))
    assert restored == original
    assert restored.to_json() == original.to_json()


def test_from_json_refuses_unknown_field() -> None:
    data = {**state().to_json(), "opaque": "x"}
    with pytest.raises(StateError, match=r"RuntimeState\.opaque: unknown field"):
        RuntimeState.from_json(data)


@pytest.mark.parametrize(
    "field", ["schema_version", "adapter_id", "strategy", "payload", "accepted_turns"]
)
def test_from_json_refuses_missing_field(field: str) -> None:
    data = state().to_json()
    del data[field]
    with pytest.raises(StateError, match=rf"RuntimeState\.{field}: missing"):
        RuntimeState.from_json(data)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"accepted_turns": {}}, r"accepted_turns: expected a list"),
        ({"accepted_turns": ["x"]}, r"accepted_turns\[0\]: expected an object"),
        ({"payload": []}, r"payload: expected an object"),
        ({"schema_version": 2}, r"schema_version"),
        ({"strategy": "nope"}, r"strategy"),
    ],
)
def test_from_json_validates_the_envelope(change: dict[str, Any], field: str) -> None:
    with pytest.raises(StateError, match=rf"RuntimeState\.{field}"):
        RuntimeState.from_json({**state().to_json(), **change})


def test_from_json_refuses_a_non_object() -> None:
    with pytest.raises(StateError, match="RuntimeState: expected an object"):
        RuntimeState.from_json([])


def test_from_json_refuses_missing_boundary_items() -> None:
    data = state().to_json()
    del data["accepted_turns"][1]["end_item"]
    with pytest.raises(StateError, match=r"RuntimeState\.accepted_turns\[1\]"):
        RuntimeState.from_json(data)


def test_from_json_refuses_unknown_boundary_field() -> None:
    """A misspelt boundary field (here `reasoning_sumary`) must not vanish silently."""
    data = state().to_json()
    data["accepted_turns"][0]["reasoning_sumary"] = "lost"
    with pytest.raises(StateError, match=r"RuntimeState\.accepted_turns\[0\]\.reasoning_sumary"):
        RuntimeState.from_json(data)


def test_boundary_messages_that_are_not_json() -> None:
    """The whole envelope is JSON, the readable projection of each turn included."""
    bad = TurnBoundary(0, 2, ({"role": "user", "content": float("nan")},))
    with pytest.raises(StateError, match=r"RuntimeState\.accepted_turns\[0\]"):
        state(accepted_turns=(bad,)).validate()


_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=5)
    | st.binary(max_size=3)
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=12,
)


def _round_trips(value: object) -> bool:
    try:
        return bool(json.loads(json.dumps(value, allow_nan=False)) == value)
    except (TypeError, ValueError):
        return False


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=_VALUES)
def test_a_value_is_json_exactly_when_it_survives_a_round_trip(value: object) -> None:
    if _round_trips(value):
        check_json("value", value)
    else:
        with pytest.raises(StateError, match=r"value: not JSON"):
            check_json("value", value)


def test_a_state_checked_since_another_still_refuses_what_it_added() -> None:
    old = RuntimeState("a.v1", "continuous_conversation", {"items": [{"k": [1, 2]}]}).validate()
    grown = {"items": [*old.payload["items"], {"k": (1, 2)}]}
    with pytest.raises(StateError, match="tuple"):
        RuntimeState("a.v1", "continuous_conversation", grown).validate(since=old)
    changed = {"items": [{"k": [1, float("nan")]}]}  # the same place, another object
    with pytest.raises(StateError, match="finite"):
        RuntimeState("a.v1", "continuous_conversation", changed).validate(since=old)
    turn = TurnBoundary(0, 1, ({"role": "user", "content": ("x",)},))  # type: ignore[dict-item]
    with pytest.raises(StateError, match=r"accepted_turns\[0\]"):
        RuntimeState("a.v1", "continuous_conversation", old.payload, (turn,)).validate(since=old)
    shared = {"items": [*old.payload["items"], {"k": [3]}]}
    RuntimeState("a.v1", "continuous_conversation", shared).validate(since=old)
