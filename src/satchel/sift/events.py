"""Trim events: every time a sift leaves something out of a request, it says why."""

from dataclasses import dataclass
from typing import Literal

TrimReason = Literal["fit_to_window", "message_cap", "token_budget", "overflow"]
"""`token_budget`: an eviction batch replaced steps by receipts. `overflow`: the net cut the request
because it passed `overflow_fraction` of the usable window (the app's signal to compact).
`fit_to_window`: the net cut a request that would not fit the usable window at all.
`message_cap`: the net cut a request that held more than `max_messages` messages. The net reports
a request it cannot bring to its target on every call, even with nothing more to leave out."""


@dataclass(frozen=True, slots=True)
class TrimEvent:
    """One trim of one request."""

    reason: TrimReason
    removed: int
    """Stored messages left out of the request or replaced by receipts by this trim (0 when the
    net had nothing more to leave out)."""
    first: int
    """Index in the request of the first message this trim changed."""
    tokens_before: int
    """Size before the trim: the messages for `token_budget`, the whole request otherwise."""
    tokens_after: int
