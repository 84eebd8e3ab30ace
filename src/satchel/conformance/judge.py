"""Judging one case: every expectation it sets against what the driver reported, what the fault
proxy saw the integration send, and how far the deployment's log moved.

Each failure names the expectation field, what was expected and what was seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from satchel.conformance.cases import Case, Expect
from satchel.integrations.driver import DriverMessage, Report
from satchel.memory.message import MemoryMessage, NotAMemoryMessage, parse_memory_message


def _memory(message: DriverMessage) -> MemoryMessage | None:
    try:
        return parse_memory_message(message.content)
    except NotAMemoryMessage:
        return None


def _clip(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _judge_model(expect: Expect, messages: Sequence[DriverMessage]) -> list[str]:
    memory = [(m, doc) for m in messages if (doc := _memory(m)) is not None]
    others = [m for m in messages if _memory(m) is None]
    failures: list[str] = []
    if expect.memory_messages is not None and len(memory) != expect.memory_messages:
        failures.append(
            f"memory_messages: expected {expect.memory_messages}, saw {len(memory)} "
            f"among {len(messages)} model message(s)"
        )
    if expect.memory_role is not None:
        if not memory:
            failures.append(f"memory_role: expected {expect.memory_role!r}, saw no memory message")
        for message, _ in memory:
            if message.role != expect.memory_role:
                failures.append(
                    f"memory_role: expected {expect.memory_role!r}, saw {message.role!r}"
                )
    if expect.memory_untrusted is not None:
        if not memory:
            failures.append(
                f"memory_untrusted: expected {expect.memory_untrusted}, saw no memory message"
            )
        for message, _ in memory:
            if message.untrusted != expect.memory_untrusted:
                failures.append(
                    f"memory_untrusted: expected {expect.memory_untrusted}, saw {message.untrusted}"
                )
    if expect.memory_carries is not None:
        if not memory and expect.memory_carries:
            failures.append(
                f"memory_carries: expected {expect.memory_carries}, saw no memory message"
            )
        for _, document in memory:
            missing = [key for key in expect.memory_carries if key not in document.keys]
            if missing:
                failures.append(
                    f"memory_carries: expected keys {expect.memory_carries}, "
                    f"saw keys {list(document.keys)} (missing {missing})"
                )
    contents = [m.content for m in others]
    for text in expect.model_carries or []:
        if text not in contents:
            failures.append(
                f"model_carries: expected a model message {_clip(text)}, "
                f"saw {[_clip(c) for c in contents]}"
            )
    for text in expect.model_lacks or []:
        carrying = [c for c in contents if text in c]
        if carrying:
            failures.append(
                f"model_lacks: expected no model message outside memory to contain "
                f"{_clip(text)}, saw it in {[_clip(c) for c in carrying]}"
            )
    return failures


def _judge_fidelity(case: Case, messages: Sequence[DriverMessage]) -> list[str]:
    """A context form of the memory message must carry the stated context's segments, turns and
    watermark unchanged: what replaces a history is the deployment's answer, nothing rewritten."""
    if case.context is None:
        return []
    stated = case.context.model_dump(mode="json", exclude_unset=True)
    watermark = stated.get("watermark") or {}
    wanted = {
        "segments": stated.get("segments") or [],
        "turns": stated.get("turns") or [],
        "watermark": {
            "stored": watermark.get("stored"),
            "formed": watermark.get("formed"),
            "parked": watermark.get("parked", 0),
        },
    }
    failures: list[str] = []
    for document in (doc for m in messages if (doc := _memory(m)) is not None):
        if not document.is_context:
            continue
        seen = {
            "segments": document.segments,
            "turns": document.turns,
            "watermark": document.watermark,
        }
        for name, value in wanted.items():
            if seen[name] != value:
                failures.append(
                    f"memory_carries: expected the context's {name} unchanged, "
                    f"saw {_clip(repr(seen[name]))}"
                )
    return failures


def _judge_reports(expect: Expect, reports: Sequence[Report]) -> list[str]:
    failures: list[str] = []
    checks = (
        ("fatal", expect.fatal, [r.fatal for r in reports]),
        ("observed", expect.observed, [r.observed for r in reports]),
        ("store_error", expect.store_error, [bool(r.store_error) for r in reports]),
    )
    for name, wanted, seen in checks:
        if wanted is not None and any(seen) != wanted:
            failures.append(f"{name}: expected {wanted}, saw {seen} across the report(s)")
    return failures


def _messages(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return []
    return [m for m in body["messages"] if isinstance(m, dict)]


def _judge_observations(expect: Expect, bodies: Sequence[Any]) -> list[str]:
    failures: list[str] = []
    first = _messages(bodies[0]) if bodies else []
    seen_fields: tuple[tuple[str, list[Any] | None, list[Any]], ...] = (
        ("observed_roles", expect.observed_roles, [m.get("role") for m in first]),
        ("observed_contents", expect.observed_contents, [m.get("content") for m in first]),
        (
            "observed_groups",
            expect.observed_groups,
            [m.get("group_ordinal", i) for i, m in enumerate(first)],
        ),
    )
    for name, wanted, seen in seen_fields:
        if wanted is None:
            continue
        if not bodies:
            failures.append(f"{name}: expected {wanted}, saw no observe request")
        elif seen != wanted:
            failures.append(f"{name}: expected {wanted}, saw {seen} in the first observe request")
    if expect.observe_calls is not None and len(bodies) != expect.observe_calls:
        failures.append(
            f"observe_calls: expected {expect.observe_calls}, saw {len(bodies)} observe request(s)"
        )
    if expect.observe_keys_equal is not None:
        keys = [b.get("idempotency_key") if isinstance(b, dict) else None for b in bodies]
        equal = bool(keys) and all(keys) and len(set(keys)) == 1
        if equal != expect.observe_keys_equal:
            failures.append(
                f"observe_keys_equal: expected {expect.observe_keys_equal}, "
                f"saw idempotency keys {keys}"
            )
    return failures


def judge(
    case: Case,
    reports: Sequence[Report],
    observe_requests: Sequence[Any],
    stored_delta: int,
) -> list[str]:
    """Every failed expectation of `case`; `observe_requests` are the observe bodies sent."""
    expect = case.expect
    failures: list[str] = []
    for attempt, report in enumerate(reports, start=1):
        found = _judge_model(expect, report.model_messages)
        found += _judge_fidelity(case, report.model_messages)
        if len(reports) > 1:
            found = [f"{failure} (attempt {attempt} of {len(reports)})" for failure in found]
        failures.extend(found)
    failures.extend(_judge_reports(expect, reports))
    failures.extend(_judge_observations(expect, observe_requests))
    if expect.stored is not None and stored_delta != expect.stored:
        failures.append(
            f"stored: expected the log to grow by {expect.stored}, it grew by {stored_delta}"
        )
    return failures
