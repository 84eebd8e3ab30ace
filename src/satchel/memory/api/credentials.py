"""Grants remembered between requests, for as long as the database can say when they change.

A token's grant is looked up in the database once and then served from memory, saving a round
trip on every request. Migration 0012 makes every change to tokens, and to projects' names and
suspensions, notify `CHANNEL` when it commits; a listening connection forgets every remembered
grant as soon as it hears. Grants are remembered only while that connection listens: before
it starts, after it fails and until it listens again, every request is looked up. A remembered
grant is also looked up again after `LIFETIME` seconds whatever is heard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import aclosing

import psycopg

from satchel.memory.store.listening import CREDENTIALS_CHANNEL, changes

CHANNEL = CREDENTIALS_CHANNEL
REMEMBERED = 4096  # grants kept; the least recently used is forgotten first
LIFETIME = 10.0  # seconds a remembered grant serves before it is looked up again
RETRY = 1.0  # seconds between attempts to listen again after the connection failed

log = logging.getLogger("satchel.memory")


class Credentials[G]:
    """Remembered grants by token digest, and the listener that keeps them true."""

    def __init__(
        self, url: str, capacity: int = REMEMBERED, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.url = url
        self.capacity = capacity
        self.clock = clock
        self.listening = False
        self.generation = 0  # counted up each time every grant is forgotten
        self._grants: OrderedDict[bytes, tuple[G, float]] = OrderedDict()

    def grant(self, digest: bytes) -> G | None:
        """The remembered grant of `digest`, while one may be served."""
        found = self._grants.get(digest) if self.listening else None
        if found is None:
            return None
        grant, until = found
        if self.clock() >= until:
            del self._grants[digest]
            return None
        self._grants.move_to_end(digest)
        return grant

    def remember(self, digest: bytes, grant: G, generation: int) -> None:
        """Keep `grant`, looked up when the generation was `generation`: if everything was
        forgotten since, the lookup may predate the change that caused it, and is not kept."""
        if not self.listening or generation != self.generation:
            return
        self._grants[digest] = (grant, self.clock() + LIFETIME)
        self._grants.move_to_end(digest)
        if len(self._grants) > self.capacity:
            self._grants.popitem(last=False)

    def __len__(self) -> int:
        return len(self._grants)

    def forget(self) -> None:
        self._grants.clear()
        self.generation += 1

    async def listen(self) -> None:
        """Listen on `CHANNEL` until cancelled, forgetting every grant at each notification,
        and listening again after a failure."""
        while True:
            try:
                await self._listen()
            except psycopg.Error as exc:
                log.warning(
                    "credential changes are not heard (%s); each is looked up", type(exc).__name__
                )
            finally:
                self.listening = False
                self.forget()
            await asyncio.sleep(RETRY)

    async def _listen(self) -> None:
        async with aclosing(changes(self.url, CHANNEL)) as heard:
            async for _ in heard:
                self.forget()  # the first: anything changed before the LISTEN took effect
                self.listening = True
