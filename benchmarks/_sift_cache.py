"""Prompt-cache simulators for the sift benchmark: OpenAI's automatic prefix cache and Anthropic's
breakpoint cache, each on a simulated clock, both priced per request.

Both work at coarser grain than the providers do, which can only understate a hit:

- `OpenAICache` matches at message boundaries (OpenAI matches per token, in 128-token steps).
- `AnthropicCache` matches at content-block boundaries, as Anthropic does, but only where a
  breakpoint wrote an entry.

Sizes are the caller's (the sift's estimate); the simulators never tokenize.
"""

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BASE_PRICE = 3.00
"""Dollars per million uncached input tokens, for both rules."""
LIFETIME = 300.0
"""Seconds an entry lives after its last use (OpenAI says 5 to 10 minutes; Anthropic 5)."""
MIN_PREFIX = 1024
"""Neither provider caches a prefix shorter than this."""
OPENAI_INCREMENT = 128
OPENAI_READ = 0.1
"""OpenAI cached input: 0.1x, as for the GPT-5 family; no write premium."""
ANTHROPIC_READ = 0.1
ANTHROPIC_WRITE = 1.25
"""Anthropic's 5-minute cache: reads 0.1x, writes 1.25x."""
LOOKBACK = 20
"""Anthropic checks for a hit at a breakpoint and up to this many blocks before it."""
MAX_BREAKPOINTS = 4


@dataclass(frozen=True, slots=True)
class Usage:
    """The input side of one request as the provider bills it, in tokens and dollars."""

    total: int
    cache_read: int
    cache_write: int
    cost: float

    @property
    def uncached(self) -> int:
        """Input neither read from nor written to the cache."""
        return self.total - self.cache_read - self.cache_write


def _chain(parts: Iterator[bytes]) -> list[bytes]:
    """Prefix keys: key i is the hash of key i-1 and part i."""
    keys: list[bytes] = []
    previous = b""
    for part in parts:
        previous = hashlib.blake2b(previous + part, digest_size=16).digest()
        keys.append(previous)
    return keys


class _Entries:
    """Cache entries by prefix key with their last-use time; an entry lives `LIFETIME` seconds
    after its last use."""

    def __init__(self) -> None:
        self._used: dict[bytes, float] = {}
        self._purged = 0.0

    def alive(self, key: bytes, now: float) -> bool:
        used = self._used.get(key)
        return used is not None and now - used <= LIFETIME

    def touch(self, key: bytes, now: float) -> None:
        self._used[key] = now

    def expire(self, now: float) -> None:
        """Drop expired entries (lookups check the age too; this only bounds memory)."""
        if now - self._purged < LIFETIME:
            return
        self._purged = now
        self._used = {key: used for key, used in self._used.items() if now - used <= LIFETIME}


class OpenAICache:
    """OpenAI's automatic prompt caching, at message boundaries.

    The prefix is the tool definitions, then the messages in order. A request reads the longest
    cached prefix, counted as 0 below 1,024 tokens, else 1,024 plus whole 128-token increments,
    and then makes every prefix of itself hittable. Matching only at message boundaries is
    conservative: the real cache matches token by token.
    """

    def __init__(self) -> None:
        self._entries = _Entries()

    def request(
        self, body: Mapping[str, Any], tool_tokens: int, message_tokens: Sequence[int], now: float
    ) -> Usage:
        """Serve one Chat Completions body sent at `now` (seconds)."""
        messages = body["messages"]
        assert len(messages) == len(message_tokens)
        tools = json.dumps(body.get("tools", []), sort_keys=True).encode()
        parts = (json.dumps(message, sort_keys=True).encode() for message in messages)
        keys = _chain(_prepend(tools, parts))
        cum = [tool_tokens]
        for size in message_tokens:
            cum.append(cum[-1] + size)
        self._entries.expire(now)
        matched = 0
        for position in range(len(keys) - 1, -1, -1):
            if self._entries.alive(keys[position], now):
                matched = cum[position]
                break
        cached = 0
        if matched >= MIN_PREFIX:
            increments = (matched - MIN_PREFIX) // OPENAI_INCREMENT
            cached = MIN_PREFIX + OPENAI_INCREMENT * increments
        for key in keys:
            self._entries.touch(key, now)
        total = cum[-1]
        cost = (cached * OPENAI_READ + (total - cached)) * BASE_PRICE / 1e6
        return Usage(total, cached, 0, cost)


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of a Messages body in prefix order."""

    key: bytes
    """Its JSON without `cache_control`, with its place (section, entry index, role)."""
    breakpoint: bool


def anthropic_blocks(body: Mapping[str, Any]) -> list[Block]:
    """The body's blocks in prefix order: each tool, each system block, each message block."""
    placed: list[tuple[str, int, str, Mapping[str, Any]]] = []
    placed += [("tools", 0, "tool", tool) for tool in body.get("tools", [])]
    placed += [("system", 0, "system", block) for block in body.get("system", [])]
    for index, entry in enumerate(body.get("messages", [])):
        placed += [("messages", index, entry["role"], block) for block in entry["content"]]
    blocks = []
    for section, index, role, block in placed:
        bare = {name: value for name, value in block.items() if name != "cache_control"}
        key = json.dumps([section, index, role, bare], sort_keys=True).encode()
        blocks.append(Block(key, "cache_control" in block))
    return blocks


class AnthropicCache:
    """Anthropic's prompt caching with explicit breakpoints (5-minute entries).

    Prefix keys chain over the blocks (tools, system, messages). For each breakpoint the cache
    looks for the longest cached prefix ending at it or up to 20 blocks before it; the longest of
    those is read and refreshed. Every breakpoint after the read whose prefix is at least 1,024
    tokens is written; cached breakpoints at or before the read are refreshed.
    """

    def __init__(self) -> None:
        self._entries = _Entries()

    def request(self, body: Mapping[str, Any], block_tokens: Sequence[int], now: float) -> Usage:
        """Serve one Messages body sent at `now`; `block_tokens` sizes its blocks in order."""
        blocks = anthropic_blocks(body)
        assert len(blocks) == len(block_tokens), (len(blocks), len(block_tokens))
        breakpoints = [position for position, block in enumerate(blocks) if block.breakpoint]
        assert len(breakpoints) <= MAX_BREAKPOINTS, f"{len(breakpoints)} breakpoints"
        keys = _chain(block.key for block in blocks)
        cum: list[int] = []
        running = 0
        for size in block_tokens:
            running += size
            cum.append(running)
        self._entries.expire(now)
        hit = -1
        for end in breakpoints:
            for position in range(end, max(0, end - LOOKBACK) - 1, -1):
                if position > hit and self._entries.alive(keys[position], now):
                    hit = position
                    break
        read = cum[hit] if hit >= 0 else 0
        if hit >= 0:
            self._entries.touch(keys[hit], now)
        written = -1
        for end in breakpoints:
            if end > hit and cum[end] >= MIN_PREFIX:
                self._entries.touch(keys[end], now)
                written = end
            elif end <= hit and self._entries.alive(keys[end], now):
                self._entries.touch(keys[end], now)
        creation = cum[written] - read if written >= 0 else 0
        total = cum[-1] if cum else 0
        uncached = total - read - creation
        cost = (read * ANTHROPIC_READ + creation * ANTHROPIC_WRITE + uncached) * BASE_PRICE / 1e6
        return Usage(total, read, creation, cost)


def _text_body(texts: Sequence[str], breakpoints: Sequence[int]) -> dict[str, Any]:
    """A one-entry Messages body of text blocks, with breakpoints on the given blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text} for text in texts]
    for position in breakpoints:
        content[position]["cache_control"] = {"type": "ephemeral"}
    return {"messages": [{"role": "user", "content": content}]}


def self_check() -> None:
    """Hand-made requests with known answers; a broken simulator stops the benchmark here."""
    chat = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(3)]}
    longer = {"messages": chat["messages"] + [{"role": "user", "content": "m3"}]}
    openai = OpenAICache()
    assert openai.request(chat, 100, [700, 700, 600], 0.0).cache_read == 0
    # 2,100 tokens of the first request match: 1,024 + 8 x 128 = 2,048 are read.
    assert openai.request(longer, 100, [700, 700, 600, 50], 10.0).cache_read == 2048
    assert OpenAICache().request(chat, 100, [300, 300, 300], 0.0).cache_read == 0
    late = OpenAICache()
    late.request(chat, 100, [700, 700, 600], 0.0)
    assert late.request(chat, 100, [700, 700, 600], 300.0).cache_read == 2048
    assert late.request(chat, 100, [700, 700, 600], 601.0).cache_read == 0

    texts = [f"b{i}" for i in range(32)]
    # A prefix written at block 10 is found from a breakpoint 20 blocks on, not from 21.
    for last, expected in ((30, 1100), (31, 0)):
        cache = AnthropicCache()
        cache.request(_text_body(texts[:11], [10]), [100] * 11, 0.0)
        usage = cache.request(_text_body(texts[: last + 1], [last]), [100] * (last + 1), 5.0)
        assert usage.cache_read == expected, (last, usage)
    # Below 1,024 tokens nothing is written, so nothing is read.
    cache = AnthropicCache()
    small = _text_body(texts[:10], [9])
    assert cache.request(small, [100] * 10, 0.0).cache_write == 0
    assert cache.request(small, [100] * 10, 1.0).cache_read == 0
    cache = AnthropicCache()
    cache.request(_text_body(texts[:12], [11]), [100] * 12, 0.0)
    again = cache.request(_text_body(texts[:12], [11]), [100] * 12, 300.0)
    assert again.cache_read == 1200 and again.cache_write == 0, again
    gone = cache.request(_text_body(texts[:12], [11]), [100] * 12, 601.0)
    assert gone.cache_read == 0 and gone.cache_write == 1200, gone
