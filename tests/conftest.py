"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatwire import ChatServer
from satchel.conformance.deployment import Deployment, started

pytest_plugins = ["browser_kit"]


@pytest.fixture
def chat_server() -> ChatServer:
    return ChatServer()


@pytest.fixture(scope="session")
def deployment() -> Iterator[Deployment]:
    """One deployment for the session, started through the public entry point."""
    with started() as running:
        yield running
