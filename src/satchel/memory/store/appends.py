"""Group commit of a project's concurrent appends: the turns waiting for the project's log lock
are written by one statement, so they share its hold and its WAL flush.

An append claims the project's next offset under the project's row lock, held until its commit
is on disk. Appended one by one, concurrent turns queue for that lock and each waits out the
flush of the one before it. Here the first turn of a project goes out at once, alone; turns
arriving meanwhile wait for it and then go out together, in arrival order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from psycopg import errors
from psycopg_pool import AsyncConnectionPool

from satchel.memory.store.database import autocommitting
from satchel.memory.store.log import RETRY_KEY, NewTurn, Retry, append_group

log = logging.getLogger("satchel.memory")

MAX_GROUP = 32  # turns in one statement at most
MAX_GROUP_BYTES = 1 << 20  # and about this much content (a bigger turn goes alone)
ATTEMPTS = 3  # a retry key first used meanwhile elsewhere is seen on the next try


Outcome = int | Retry | None  # an offset, what a retry key names, or None: the backlog is full


@dataclass(slots=True)
class _Waiting:
    turn: NewTurn
    answer: asyncio.Future[Outcome]


class Appender:
    """Appends turns through `pool`, grouping those of one project that arrive together."""

    def __init__(self, pool: AsyncConnectionPool, *, formed: bool, backlog: int) -> None:
        """`formed`: turns count as formed at once (no worker forms them); `backlog`: how many
        offsets of a project may wait above its formed watermark (see `append_group`)."""
        self.pool = pool
        self.formed = formed
        self.backlog = backlog
        self._waiting: dict[int, list[_Waiting]] = {}
        self._writers: dict[int, asyncio.Task[None]] = {}

    async def append(self, project_id: int, turn: NewTurn) -> Outcome:
        """The turn's log offset, or what its retry key already names, or None when the
        project's backlog is full (in both, nothing is written)."""
        answer: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(project_id, []).append(_Waiting(turn, answer))
        if project_id not in self._writers:
            self._writers[project_id] = asyncio.create_task(self._write(project_id))
        return await answer

    async def _write(self, project_id: int) -> None:
        """Write the project's waiting turns, group after group, until none waits."""
        group: list[_Waiting] = []
        try:
            while group := self._next_group(project_id):
                await self._settle(project_id, group)
        except BaseException as exc:  # cancelled (the service stops): no request waits forever
            for item in group + self._waiting.pop(project_id, []):
                _answer(item, exc)
            raise
        finally:
            del self._writers[project_id]

    def _next_group(self, project_id: int) -> list[_Waiting]:
        group, rest = next_group(self._waiting.pop(project_id, []), key=lambda item: item.turn)
        if rest:
            self._waiting[project_id] = rest
        return group

    async def _settle(self, project_id: int, group: list[_Waiting]) -> None:
        """Write `group` and answer each of its turns; when the group's statement fails for
        another reason than a retry key, each turn is written alone, so one turn's failure is
        its own."""
        try:
            answers = await self._attempt(project_id, [item.turn for item in group])
        except Exception as exc:
            if len(group) == 1:
                _answer(group[0], exc)
                return
            log.warning(
                "a group of %d appends failed (%s); appending each alone",
                len(group),
                type(exc).__name__,
            )
            for item in group:
                await self._settle(project_id, [item])
            return
        for item, outcome in zip(group, answers, strict=True):
            _answer(item, outcome)

    async def _attempt(self, project_id: int, turns: list[NewTurn]) -> list[Outcome]:
        tries = 0
        while True:
            tries += 1
            try:
                async with autocommitting(self.pool) as conn:
                    return await append_group(
                        conn, project_id, turns, formed=self.formed, backlog=self.backlog
                    )
            except errors.UniqueViolation as exc:
                if not _retry_key_raced(exc) or tries == ATTEMPTS:
                    raise


def next_group[T](waiting: list[T], key: Callable[[T], NewTurn]) -> tuple[list[T], list[T]]:
    """Split `waiting` (in arrival order) into the next group to write together and the rest:
    a prefix of at most `MAX_GROUP` turns and about `MAX_GROUP_BYTES` of content (at least one
    turn), ending before a second turn with a retry key already in it (that one waits for the
    first's answer)."""
    digests: set[bytes] = set()
    size = 0
    for index, item in enumerate(waiting):
        turn = key(item)
        size += turn.size
        full = index == MAX_GROUP or (index > 0 and size > MAX_GROUP_BYTES)
        if full or turn.digest in digests:
            return waiting[:index], waiting[index:]
        if turn.digest is not None:
            digests.add(turn.digest)
    return waiting, []


def _retry_key_raced(exc: errors.UniqueViolation) -> bool:
    """Whether another attempt with one of the retry keys committed first."""
    return exc.diag.constraint_name == RETRY_KEY


def _answer(item: _Waiting, outcome: Outcome | BaseException) -> None:
    if item.answer.done():  # its request went away
        return
    if isinstance(outcome, Exception):
        item.answer.set_exception(outcome)
    elif isinstance(outcome, BaseException):
        item.answer.cancel()
    else:
        item.answer.set_result(outcome)
