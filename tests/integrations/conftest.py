"""One deployment for the conformance tests, started through the public entry point."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from satchel.conformance.deployment import Deployment, started


@pytest.fixture(scope="session")
def deployment() -> Iterator[Deployment]:
    with started() as running:
        yield running
