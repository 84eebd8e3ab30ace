"""Both memory clients behind one awaitable face, so one async test drives the synchronous and the
asynchronous client alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory_kit import LiveServer

from satchel.memory.client import AsyncMemoryClient, MemoryClient


class Sync:
    """The synchronous client behind awaitable methods, so one async test drives both clients."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call

    async def every(self, listing: str, **given: Any) -> list[dict[str, Any]]:
        return list(self.client.pages(getattr(self.client, listing), **given))


class Async:
    """The asynchronous client, with the same `every` as `Sync`."""

    def __init__(self, client: AsyncMemoryClient) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def every(self, listing: str, **given: Any) -> list[dict[str, Any]]:
        return [page async for page in self.client.pages(getattr(self.client, listing), **given)]


def client_for(server: LiveServer, flavour: str, token: str, **options: Any) -> Any:
    if flavour == "sync":
        return Sync(MemoryClient(server.base_url, token, **options))
    return Async(AsyncMemoryClient(server.base_url, token, **options))


async def close(client: Any) -> None:
    if isinstance(client, Sync):
        client.client.close()
    else:
        await client.client.aclose()


FLAVOURS = ["sync", "async"]
