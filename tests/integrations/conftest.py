"""The fault proxy in front of the session's deployment, and a fresh subject per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from satchel.conformance.cases import Faults
from satchel.conformance.deployment import Deployment
from satchel.conformance.proxy import FaultProxy, serving


@pytest.fixture(scope="module")
def proxied(deployment: Deployment) -> Iterator[tuple[FaultProxy, str]]:
    """A fault proxy to the deployment, and its URL."""
    with serving(deployment.api) as running:
        yield running


@pytest.fixture
def proxy(proxied: tuple[FaultProxy, str]) -> FaultProxy:
    """The fault proxy, forwarding everything and with nothing recorded."""
    proxied[0].configure(Faults(), None)
    return proxied[0]


@pytest.fixture
def subject() -> str:
    return str(uuid.uuid4())
