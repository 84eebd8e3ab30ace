"""The one HTTPS POST of a notification delivery, over a connection the destination policy guards.

`httpcore` with a network backend of its own: it resolves the host itself, refuses when any
address is one only the deployment can reach (unless permitted), and connects to the checked
address, so the address connected to is the one checked (a second DNS answer cannot rebind it);
TLS is still verified against the host name. No proxy is ever used (httpcore reads none from the
environment) and no redirect is followed. A failure is answered as a category, never the raw
error, which can name an address.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore

from satchel.memory.config import NotifySettings
from satchel.memory.service.destinations import Resolver, public, resolve

ADDRESS_NOT_PERMITTED = "address not permitted"
TIMEOUT = "timeout"
REFUSED = "connection refused"
TLS = "tls failure"
NETWORK = "network error"
# What a failed exchange may raise: httpcore's errors, the OS's, and the guard's refusal.
FAILURES = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    OSError,
    TimeoutError,
)


class AddressRefused(httpcore.ConnectError):
    """The host resolved to an address the policy does not permit: nothing was connected."""


@dataclass(frozen=True, slots=True)
class Answer:
    """How an exchange ended: the destination's status, or a failure's category."""

    status: int | None = None
    error: str | None = None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses it resolved and checked itself."""

    def __init__(self, permit_private: bool, resolver: Resolver = resolve) -> None:
        self.permit_private = permit_private
        self.resolver = resolver
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self.resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError("the host does not resolve") from exc
        if not addresses:
            raise httpcore.ConnectError("the host does not resolve")
        if not self.permit_private and not all(public(a) for a in addresses):
            raise AddressRefused("the host resolves to an address that is not permitted")
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("deliveries go over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def category(exc: BaseException) -> str:
    """The failure category of `exc`, from it and the errors it was raised from."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    if any(isinstance(e, AddressRefused) for e in chain):
        return ADDRESS_NOT_PERMITTED
    if any(isinstance(e, ssl.SSLError | ssl.CertificateError) for e in chain):
        return TLS
    if any(isinstance(e, httpcore.TimeoutException | TimeoutError) for e in chain):
        return TIMEOUT
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return REFUSED
    return NETWORK


class Wire:
    """Sends deliveries under one deployment's settings (trusted certificates, timeout)."""

    def __init__(self, settings: NotifySettings, resolver: Resolver = resolve) -> None:
        self.settings = settings
        self.resolver = resolver
        self.tls = ssl.create_default_context()
        if settings.ca_file is not None:
            self.tls.load_verify_locations(cafile=str(settings.ca_file))

    async def post(self, url: str, body: bytes, headers: list[tuple[str, str]]) -> Answer:
        """POST `body` to `url` on a new guarded connection; its status (the answer's body is
        not read) or the category of what failed."""
        seconds = self.settings.timeout
        timeouts = {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}
        backend = GuardedBackend(self.settings.permit_private, self.resolver)
        try:
            async with (
                asyncio.timeout(seconds),
                httpcore.AsyncConnectionPool(
                    ssl_context=self.tls, network_backend=backend, max_connections=1, retries=0
                ) as pool,
                pool.stream(
                    "POST", url, headers=headers, content=body, extensions={"timeout": timeouts}
                ) as response,
            ):
                return Answer(status=response.status)
        except FAILURES as exc:
            return Answer(error=category(exc))
