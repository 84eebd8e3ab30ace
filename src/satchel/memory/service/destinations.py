"""Where a notification may go: an HTTPS URL without credentials, on a host the operator allowed,
never resolving to an address only the deployment can reach unless the operator permits it.

Checked at registration, before each delivery, and (by the sender's network backend) on the
address actually connected to. A refusal names what was wrong, never the URL's secret parts.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from satchel.memory.config import NotifySettings
from satchel.memory.domain import Invalid

MAX_URL_BYTES = 2048

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[Address]]]


class DestinationRefused(Invalid):
    """A destination the policy does not allow; the message says why and what to do."""

    default_code = "invalid_destination"


@dataclass(frozen=True, slots=True)
class Destination:
    """A checked URL's host and port."""

    host: str
    port: int


async def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to, in the resolver's order (no duplicates)."""
    answers = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    found: list[Address] = []
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def public(address: Address) -> bool:
    """Whether `address` is reachable on the public internet: not loopback, private,
    link-local, shared (100.64/10), unique-local, unspecified, multicast or reserved."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def host_allowed(host: str, destinations: tuple[str, ...]) -> bool:
    """Whether `host` is one of `destinations` (exact), or under one that starts with a dot."""
    host = host.lower().rstrip(".")
    return any(
        host.endswith(entry) if entry.startswith(".") else host == entry for entry in destinations
    )


def check_url(url: str, settings: NotifySettings) -> Destination:
    """The host and port of `url` when its form and host are allowed (no name is resolved)."""
    if len(url.encode()) > MAX_URL_BYTES:
        raise DestinationRefused(f"url: longer than {MAX_URL_BYTES} bytes; send a shorter URL")
    try:
        parts = urlsplit(url)
        port = parts.port or 443
        host = parts.hostname
    except ValueError:
        raise DestinationRefused("url: not a valid URL; send https://host/path") from None
    if parts.scheme.lower() != "https":
        raise DestinationRefused("url: must use https (deliveries are sent over TLS only)")
    if parts.username is not None or parts.password is not None:
        raise DestinationRefused(
            "url: carries credentials (user:password@); remove them, the signature"
            " authenticates each delivery"
        )
    if not host:
        raise DestinationRefused("url: has no host; send https://host/path")
    if not host_allowed(host, settings.destinations):
        raise DestinationRefused(
            f"url: host {host!r} is not an allowed destination; ask the operator to add it to"
            " SATCHEL_NOTIFY_DESTINATIONS"
        )
    return Destination(host, port)


async def check_addresses(
    destination: Destination, settings: NotifySettings, resolver: Resolver = resolve
) -> None:
    """Refuse a destination that does not resolve, or that resolves to any address only the
    deployment can reach (unless the operator permits private destinations)."""
    if settings.permit_private:
        return
    try:
        addresses = await resolver(destination.host, destination.port)
    except OSError:
        raise DestinationRefused(
            f"url: host {destination.host!r} does not resolve; check the name"
        ) from None
    if not addresses:
        raise DestinationRefused(f"url: host {destination.host!r} does not resolve")
    if not all(public(a) for a in addresses):
        raise DestinationRefused(
            f"url: host {destination.host!r} resolves to an address only this deployment can"
            " reach; use a public destination, or an operator sets SATCHEL_NOTIFY_PERMIT_PRIVATE"
        )
