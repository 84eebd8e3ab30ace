"""What one sift returns: the messages to send and what the sift did to get them."""

from dataclasses import dataclass

from satchel.sift.events import TrimEvent
from satchel.sift.messages import ChatMessage


@dataclass(frozen=True, slots=True)
class SiftResult:
    """The request for one model call."""

    messages: list[ChatMessage]
    """The messages to send: the stored history's own message objects where unchanged, receipts
    and bounded results in their places, and the per-call note last."""
    sources: tuple[int | None, ...]
    """History index behind each message (a receipt points at its step's assistant message; the
    note has None)."""
    events: tuple[TrimEvent, ...]
    tokens: int
    """The whole request's size in tokens, tool definitions counted."""
    previous_end: int | None
    """Index of the message where the previous request ended (before its note) when this request
    extends it unchanged; None after a trim, a compaction or on the first call."""
    note: bool
    """Whether the last message is a per-call note."""
    stable_end: int | None = None
    """Index of the last message of the prefix that the next eviction batch leaves unchanged (the
    messages before the first step that is not a receipt), or None."""
    changed_from: int | None = None
    """When a trim changed this request, the index of the first message that differs from the
    previous request; None otherwise."""
    reused_end: int | None = None
    """After a trim, the previous request's `stable_end` when the trim left everything up to it
    unchanged: the prefix the requests before it wrote, still to be read."""
