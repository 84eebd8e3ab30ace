"""Checking a notification delivery in a receiver: its signature and how old it is."""

from __future__ import annotations

import hashlib
import hmac
import re
import time

DEFAULT_TOLERANCE = 300  # seconds a delivery's timestamp may be from the receiver's clock
SIGNATURE = re.compile(r"v1 t=(\d{1,12}) s=([0-9a-f]{64})")


def verify_delivery(
    secret: str,
    body: bytes,
    header: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> bool:
    """Whether `header` (the `Satchel-Signature` or `Taisce-Signature` value, `v1 t=... s=...`)
    signs exactly `body` with the endpoint's `secret`, at a time within `tolerance` seconds of
    `now` (default: this clock). A malformed header, another byte, another secret or an old
    (replayed) timestamp is false; the digests are compared in constant time."""
    found = SIGNATURE.fullmatch(header.strip())
    if found is None:
        return False
    stamp, given = found.group(1), found.group(2)
    clock = time.time() if now is None else now
    if abs(clock - int(stamp)) > tolerance:
        return False
    material = f"v1\n{stamp}\n".encode() + body
    expected = hmac.new(secret.encode(), material, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, given)
