"""Who is asking and whether they may: bearer authentication, fair admission, access."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request
from psycopg_pool import AsyncConnectionPool

from satchel.memory.api.credentials import Credentials
from satchel.memory.api.errors import ApiError
from satchel.memory.api.strict import Access
from satchel.memory.service.retention import sweep_if_due
from satchel.memory.service.tokens import TOKEN_PREFIX, grant_of, token_digest


@dataclass(frozen=True, slots=True)
class Grant:
    """The project and credential a request acts for."""

    project_id: int
    project: str
    token_id: uuid.UUID
    read_only: bool
    retained: bool = False  # the project has a retention policy


LOOKUPS = 16  # credential lookups in flight at once
LOOKUP_TIMEOUT = 2.0  # seconds to wait for a connection to look a credential up


# The three answers of a failed authentication, all 401 `unauthenticated`. None quotes the
# header, which may hold a secret; a token not accepted gets one answer whatever the reason, so
# nothing tells whether it exists (why: decision 0055 in docs/decisions/).
NO_CREDENTIAL = (
    "no credential was sent: send the project's token as `Authorization: Bearer <token>`"
)
NOT_BEARER = (
    "the Authorization header is not `Bearer <token>` (other schemes and bare tokens are"
    " refused): send the project's token after `Bearer `"
)
NOT_ACCEPTED = (
    "the bearer token is not accepted (unknown, revoked, or its project suspended): check it,"
    " or make one with `satchel tokens create`"
)


def unauthenticated(message: str) -> ApiError:
    return ApiError(401, "unauthenticated", message)


def bearer(request: Request) -> str:
    """The request's bearer token, or 401 saying whether none was sent, the header is not
    `Bearer <token>`, or the token cannot be one of ours."""
    header = request.headers.get("authorization", "")
    if not header.strip():
        raise unauthenticated(NO_CREDENTIAL)
    token = header[7:].strip()
    if header[:7].lower() != "bearer " or not token:
        raise unauthenticated(NOT_BEARER)
    if not token.startswith(TOKEN_PREFIX):
        raise unauthenticated(NOT_ACCEPTED)
    return token


def rate_limited() -> ApiError:
    return ApiError(
        429,
        "rate_limited",
        "request capacity is busy; retry with backoff and the same idempotency key",
        {"Retry-After": "1"},
    )


class Admission:
    """Refuses at once (429) rather than queueing: per process, per project, per token."""

    def __init__(self, work: int, project: int, token: int) -> None:
        self.limits = (work, project, token)
        self.work = 0
        self.projects: Counter[int] = Counter()
        self.tokens: Counter[uuid.UUID] = Counter()

    def acquire(self, grant: Grant) -> Callable[[], None]:
        work, project, token = self.limits
        if (
            self.work >= work
            or self.projects[grant.project_id] >= project
            or self.tokens[grant.token_id] >= token
        ):
            raise rate_limited()
        self.work += 1
        self.projects[grant.project_id] += 1
        self.tokens[grant.token_id] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.work -= 1
            self.projects[grant.project_id] -= 1
            self.tokens[grant.token_id] -= 1
            if not self.projects[grant.project_id]:
                del self.projects[grant.project_id]
            if not self.tokens[grant.token_id]:
                del self.tokens[grant.token_id]

        return release


class Gate:
    """Authenticate, admit, check access; store the grant on `request.state.grant`. A read of a
    project with a retention policy first has the project's expired turns swept, if it holds
    any, so nothing past its deadline is ever served."""

    def __init__(
        self, pool: AsyncConnectionPool, admission: Admission, credentials: Credentials[Grant]
    ) -> None:
        self.pool = pool
        self.admission = admission
        self.credentials = credentials
        self.lookups = 0

    async def identify(self, request: Request) -> Grant:
        """The grant of the request's bearer token, or 401 `unauthenticated` saying which way
        the credential failed (no slot taken);
        remembered from an earlier request while changes to credentials are heard."""
        digest = token_digest(bearer(request))
        remembered = self.credentials.grant(digest)
        if remembered is not None:
            return remembered
        generation = self.credentials.generation
        # Credential lookups happen before admission, so they are bounded too: past the limit,
        # or when no connection frees up in time, the request is refused instead of waiting.
        if self.lookups >= LOOKUPS:
            raise rate_limited()
        self.lookups += 1
        try:
            found = await grant_of(self.pool, digest, LOOKUP_TIMEOUT)
        finally:
            self.lookups -= 1
        if found is None:
            raise unauthenticated(NOT_ACCEPTED)
        grant = Grant(
            found.project_id,
            found.project,
            found.token_id,
            found.access == "read_only",
            found.retained,
        )
        self.credentials.remember(digest, grant, generation)
        return grant

    async def __call__(self, request: Request, access: Access) -> Callable[[], None]:
        grant = await self.identify(request)
        release = self.admission.acquire(grant)
        if access == "write" and grant.read_only:
            release()
            raise ApiError(403, "forbidden", "the credential does not permit this operation")
        if access == "read" and grant.retained:
            try:
                await sweep_if_due(self.pool, grant.project_id)
            except BaseException:
                release()
                raise
        request.state.grant = grant
        return release


async def current_grant(request: Request) -> Grant:
    """FastAPI dependency: the grant the gate established (async, so no thread is borrowed)."""
    grant: Grant = request.state.grant
    return grant
