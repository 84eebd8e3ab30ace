"""Clients for the v1 contract, synchronous and asynchronous, with nothing of any framework.

`MemoryClient` and `AsyncMemoryClient` cover every v1 operation with the same methods; errors are
`MemoryServiceError` and its subclasses; `Retries` says when a refused call is sent again;
`verify_delivery` checks a notification delivery in a receiver.
See docs/memory/client.md.
"""

from satchel.memory.client.calls import Retries
from satchel.memory.client.clients import AsyncMemoryClient, Freshness, MemoryClient
from satchel.memory.client.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    MemoryServiceError,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthenticated,
    Unavailable,
)
from satchel.memory.client.notifications import verify_delivery

__all__ = [
    "AsyncMemoryClient",
    "Conflict",
    "Forbidden",
    "Freshness",
    "InvalidRequest",
    "MemoryClient",
    "MemoryServiceError",
    "NotFound",
    "RateLimited",
    "Retries",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "verify_delivery",
]
