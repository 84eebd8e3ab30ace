"""The fault proxy in front of a real deployment: it forwards, records, refuses and states."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conformance_kit import STATED_CONTEXT as STATED
from satchel.conformance.cases import ContextAnswer, Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import FaultProxy, serving
from satchel.memory.client import MemoryClient, MemoryServiceError
from satchel.memory.message import turn_key


@pytest.fixture
def proxied(deployment: Deployment) -> Iterator[tuple[FaultProxy, MemoryClient, MemoryClient]]:
    """The proxy, a client through it, and a client straight to the deployment."""
    with (
        serving(deployment.api) as (proxy, url),
        MemoryClient(url, deployment.token) as through,
        MemoryClient(deployment.api, deployment.token) as direct,
    ):
        yield proxy, through, direct


def _observe(client: MemoryClient, subject: str) -> dict[str, Any]:
    said = {"role": "user", "content": "I moved to Oslo."}
    return client.observe(
        idempotency_key=turn_key(subject, "proxy", [said]),
        messages=[{**said, "group_ordinal": 0}],
        data_subject_id=subject,
    )


def test_it_forwards_and_records_method_path_and_body(
    proxied: tuple[FaultProxy, MemoryClient, MemoryClient],
) -> None:
    proxy, through, direct = proxied
    subject = str(uuid.uuid4())
    before = direct.freshness().stored
    receipt = _observe(through, subject)
    assert direct.freshness().stored == receipt["log_offset"]
    assert receipt["log_offset"] == (-1 if before is None else before) + 1
    through.recall(question="Where do I live?", data_subject_id=subject)
    recorded = proxy.recorded
    assert [(e.method, e.path) for e in recorded] == [
        ("POST", "/v1/observations"),
        ("POST", "/v1/recalls"),
    ]
    assert recorded[0].body["data_subject_id"] == subject
    assert recorded[0].body["messages"][0]["content"] == "I moved to Oslo."
    assert recorded[1].body == {"question": "Where do I live?", "data_subject_id": subject}
    assert through.freshness().stored == direct.freshness().stored
    assert proxy.recorded[-1].body is None


def test_it_never_keeps_the_credential(
    deployment: Deployment, proxied: tuple[FaultProxy, MemoryClient, MemoryClient]
) -> None:
    proxy, through, _ = proxied
    through.freshness()
    assert proxy.recorded
    assert deployment.token not in repr(proxy.recorded)


def test_the_deployments_refusals_pass_through(
    proxied: tuple[FaultProxy, MemoryClient, MemoryClient],
) -> None:
    proxy, through, _ = proxied
    with pytest.raises(MemoryServiceError) as refused:
        through.observe(idempotency_key="not-a-uuid", messages=[])
    assert [e.path for e in proxy.recorded] == ["/v1/observations"]
    assert 400 <= refused.value.status < 500
    assert refused.value.code != "unavailable"


OPERATIONS: dict[str, Callable[[MemoryClient, str], Any]] = {
    "recall": lambda c, s: c.recall(question="Where?", data_subject_id=s),
    "observe": _observe,
    "context": lambda c, s: c.context(data_subject_id=s),
}


@pytest.mark.parametrize("fault", sorted(OPERATIONS))
def test_a_faulted_route_is_refused_and_the_others_still_forwarded(
    fault: str, proxied: tuple[FaultProxy, MemoryClient, MemoryClient]
) -> None:
    proxy, through, direct = proxied
    subject = str(uuid.uuid4())
    proxy.configure(Faults.model_validate({fault: "unavailable"}), None)
    before = direct.freshness().stored
    with pytest.raises(MemoryServiceError) as refused:
        OPERATIONS[fault](through, subject)
    assert (refused.value.status, refused.value.code) == (503, "unavailable")
    for other in sorted(set(OPERATIONS) - {fault}):
        OPERATIONS[other](through, subject)
    stored = direct.freshness().stored
    assert stored == (before if fault == "observe" else (-1 if before is None else before) + 1)
    assert len(proxy.recorded) == 3


def test_a_stated_context_is_served_instead_of_forwarded(
    proxied: tuple[FaultProxy, MemoryClient, MemoryClient],
) -> None:
    proxy, through, direct = proxied
    subject = str(uuid.uuid4())
    proxy.configure(Faults(), ContextAnswer.model_validate(STATED))
    assert through.context(data_subject_id=subject) == STATED
    assert direct.context(data_subject_id=subject) != STATED
    assert [(e.method, e.path) for e in proxy.recorded] == [("POST", "/v1/contexts")]


def test_a_context_fault_wins_over_a_stated_context(
    proxied: tuple[FaultProxy, MemoryClient, MemoryClient],
) -> None:
    proxy, through, _ = proxied
    proxy.configure(Faults(context="unavailable"), ContextAnswer.model_validate(STATED))
    with pytest.raises(MemoryServiceError) as refused:
        through.context(data_subject_id=str(uuid.uuid4()))
    assert refused.value.status == 503


def test_configuring_a_case_forgets_the_last(
    proxied: tuple[FaultProxy, MemoryClient, MemoryClient],
) -> None:
    proxy, through, _ = proxied
    subject = str(uuid.uuid4())
    proxy.configure(Faults(recall="unavailable"), ContextAnswer.model_validate(STATED))
    through.freshness()
    proxy.configure(Faults(), None)
    assert proxy.recorded == []
    through.recall(question="Where?", data_subject_id=subject)
    assert through.context(data_subject_id=subject) != STATED
    proxy.reset()
    assert proxy.recorded == []
