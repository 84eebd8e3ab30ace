"""Shared fixtures."""

from __future__ import annotations

import pytest

from chatwire import ChatServer


@pytest.fixture
def chat_server() -> ChatServer:
    return ChatServer()
