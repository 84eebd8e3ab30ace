"""The judge: every expectation field passes when it holds and fails, by name, when it does not."""

from __future__ import annotations

from typing import Any

import pytest

from conformance_kit import STATED_CONTEXT
from satchel.conformance.cases import Case, Expect
from satchel.conformance.judge import judge
from satchel.integrations.driver import DriverMessage, Report
from satchel.memory.message import render_context_message, render_memory_message

WATERMARK = {"stored": 3, "formed": 3, "parked": 0}
RECALL = {"facts": [{"statement": "Marta works at Ensera."}], "controls": {}, "reach": "subject"}
CONTEXT = {"watermark": WATERMARK, "segments": [], "turns": [], "characters": 0}
QUESTION = "Where does Marta work?"


def memory(role: str = "user", untrusted: bool = True, *, context: bool = False) -> DriverMessage:
    text = render_context_message(CONTEXT) if context else render_memory_message(WATERMARK, RECALL)
    return DriverMessage(role=role, content=text, untrusted=untrusted)


def person(text: str = QUESTION) -> DriverMessage:
    return DriverMessage(role="user", content=text)


def report(*messages: DriverMessage, **flags: Any) -> Report:
    return Report(model_messages=list(messages), **flags)


def body(key: str | None = "k1", groups: bool = True) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "At Ensera."},
    ]
    if groups:
        for ordinal, message in enumerate(messages):
            message["group_ordinal"] = ordinal
    document: dict[str, Any] = {"messages": messages}
    if key is not None:
        document["idempotency_key"] = key
    return document


def case(**expect: Any) -> Case:
    return Case.model_validate(
        {"name": "c", "rule": "r", "turn": {"user": QUESTION}, "expect": expect}
    )


GOOD = [report(memory(), person(), observed=True)]
ONE_BODY = [body()]

# (expectation, reports, observe bodies, stored delta)
PASSING: list[tuple[dict[str, Any], list[Report], list[Any], int]] = [
    ({"memory_messages": 1}, GOOD, ONE_BODY, 1),
    ({"memory_messages": 0}, [report(person())], ONE_BODY, 1),
    ({"memory_role": "user"}, GOOD, ONE_BODY, 1),
    ({"memory_untrusted": True}, GOOD, ONE_BODY, 1),
    ({"memory_carries": ["watermark", "plan", "facts"]}, GOOD, ONE_BODY, 1),
    (
        {"memory_carries": ["watermark", "plan", "segments", "turns"]},
        [report(memory(context=True), person())],
        ONE_BODY,
        1,
    ),
    ({"model_carries": [QUESTION]}, GOOD, ONE_BODY, 1),
    ({"model_lacks": ["Marta works at Ensera."]}, GOOD, ONE_BODY, 1),
    ({"fatal": False}, GOOD, ONE_BODY, 1),
    ({"fatal": True}, [report(person(), fatal=True)], [], 0),
    ({"observed": True}, GOOD, ONE_BODY, 1),
    ({"observed": False}, [report(person())], [], 0),
    ({"store_error": True}, [report(person(), store_error="503 unavailable")], ONE_BODY, 0),
    ({"store_error": False}, GOOD, ONE_BODY, 1),
    ({"observed_roles": ["user", "assistant"]}, GOOD, ONE_BODY, 1),
    ({"observed_contents": [QUESTION, "At Ensera."]}, GOOD, ONE_BODY, 1),
    ({"observed_groups": [0, 1]}, GOOD, ONE_BODY, 1),
    ({"observed_groups": [0, 1]}, GOOD, [body(groups=False)], 1),
    ({"observe_calls": 2}, GOOD * 2, [body(), body()], 1),
    ({"observe_calls": 0}, [report(person())], [], 0),
    ({"observe_keys_equal": True}, GOOD * 2, [body("k1"), body("k1")], 1),
    ({"observe_keys_equal": False}, GOOD * 2, [body("k1"), body("k2")], 2),
    ({"stored": 1}, GOOD, ONE_BODY, 1),
    ({"stored": 0}, [report(person())], [], 0),
]

# (expectation, reports, observe bodies, stored delta, the field the failure must name)
FAILING: list[tuple[dict[str, Any], list[Report], list[Any], int, str]] = [
    ({"memory_messages": 1}, [report(person())], ONE_BODY, 1, "memory_messages"),
    (
        {"memory_messages": 1},
        [report(memory(), memory(), person())],
        ONE_BODY,
        1,
        "memory_messages",
    ),
    (
        {"memory_role": "user"},
        [report(memory(role="system"), person())],
        ONE_BODY,
        1,
        "memory_role",
    ),
    ({"memory_role": "user"}, [report(person())], ONE_BODY, 1, "memory_role"),
    (
        {"memory_untrusted": True},
        [report(memory(untrusted=False))],
        ONE_BODY,
        1,
        "memory_untrusted",
    ),
    ({"memory_untrusted": True}, [report(person())], ONE_BODY, 1, "memory_untrusted"),
    ({"memory_carries": ["segments"]}, GOOD, ONE_BODY, 1, "memory_carries"),
    ({"memory_carries": ["facts"]}, [report(person())], ONE_BODY, 1, "memory_carries"),
    ({"model_carries": ["Marta works at Ensera."]}, GOOD, ONE_BODY, 1, "model_carries"),
    ({"model_carries": ["Where does Marta"]}, GOOD, ONE_BODY, 1, "model_carries"),
    ({"model_lacks": ["Marta work"]}, GOOD, ONE_BODY, 1, "model_lacks"),
    ({"fatal": False}, [report(person(), fatal=True)], ONE_BODY, 1, "fatal"),
    ({"fatal": False}, [GOOD[0], report(person(), fatal=True)], ONE_BODY, 1, "fatal"),
    ({"observed": False}, GOOD, ONE_BODY, 1, "observed"),
    ({"observed": True}, [report(person())], [], 0, "observed"),
    ({"store_error": True}, GOOD, ONE_BODY, 0, "store_error"),
    ({"store_error": False}, [report(person(), store_error="boom")], ONE_BODY, 0, "store_error"),
    ({"observed_roles": ["user", "assistant"]}, GOOD, [], 0, "observed_roles"),
    ({"observed_roles": ["user"]}, GOOD, ONE_BODY, 1, "observed_roles"),
    ({"observed_contents": [QUESTION, "At Cork."]}, GOOD, ONE_BODY, 1, "observed_contents"),
    ({"observed_groups": [0, 0]}, GOOD, ONE_BODY, 1, "observed_groups"),
    ({"observed_groups": [0, 1]}, GOOD, [], 0, "observed_groups"),
    ({"observe_calls": 2}, GOOD, ONE_BODY, 1, "observe_calls"),
    ({"observe_keys_equal": True}, GOOD * 2, [body("k1"), body("k2")], 2, "observe_keys_equal"),
    ({"observe_keys_equal": True}, GOOD * 2, [body(None), body(None)], 2, "observe_keys_equal"),
    ({"observe_keys_equal": True}, [report(person())], [], 0, "observe_keys_equal"),
    ({"stored": 1}, GOOD, ONE_BODY, 2, "stored"),
    ({"stored": 0}, GOOD, ONE_BODY, 1, "stored"),
]


@pytest.mark.parametrize(("expect", "reports", "bodies", "delta"), PASSING)
def test_a_kept_expectation_passes(
    expect: dict[str, Any], reports: list[Report], bodies: list[Any], delta: int
) -> None:
    assert judge(case(**expect), reports, bodies, delta) == []


@pytest.mark.parametrize(("expect", "reports", "bodies", "delta", "field"), FAILING)
def test_a_broken_expectation_fails_by_name(
    expect: dict[str, Any], reports: list[Report], bodies: list[Any], delta: int, field: str
) -> None:
    failures = judge(case(**expect), reports, bodies, delta)
    assert failures, f"{field} was not caught"
    assert all(failure.startswith(f"{field}: expected") for failure in failures)
    assert all("saw" in failure or "grew by" in failure for failure in failures)


def test_every_expectation_field_is_exercised_both_ways() -> None:
    fields = set(Expect.model_fields)
    assert {k for row in PASSING for k in row[0]} == fields
    assert {row[4] for row in FAILING} == fields


def test_absent_expectations_are_not_checked() -> None:
    broken = [report(memory(role="system", untrusted=False), fatal=True, store_error="x")]
    assert judge(case(), broken, [None, {"idempotency_key": 1}], 7) == []


def test_a_failure_names_what_was_expected_and_what_was_seen() -> None:
    [failure] = judge(case(memory_role="user"), [report(memory(role="system"))], [], 0)
    assert "'user'" in failure
    assert "'system'" in failure


def test_a_repeated_turn_names_the_attempt() -> None:
    reports = [GOOD[0], report(person())]
    [failure] = judge(case(memory_messages=1), reports, [], 0)
    assert failure.startswith("memory_messages:")
    assert "attempt 2 of 2" in failure


def test_a_context_message_must_carry_the_stated_context_unchanged() -> None:
    stated = STATED_CONTEXT
    with_context = Case.model_validate(
        {"name": "c", "rule": "r", "context": stated, "turn": {"user": QUESTION}, "expect": {}}
    )
    faithful = DriverMessage(role="user", content=render_context_message(stated), untrusted=True)
    assert judge(with_context, [report(faithful, person())], [], 0) == []
    rewritten = {**stated, "segments": [{**stated["segments"][0], "summary": "Cork."}]}
    altered = DriverMessage(role="user", content=render_context_message(rewritten), untrusted=True)
    failures = judge(with_context, [report(altered, person())], [], 0)
    assert len(failures) == 1 and failures[0].startswith("memory_carries: expected the context's")
    stale = {**stated, "watermark": {"stored": 11, "formed": 11, "parked": 0}}
    aged = DriverMessage(role="user", content=render_context_message(stale), untrusted=True)
    assert any("watermark" in f for f in judge(with_context, [report(aged, person())], [], 0))
