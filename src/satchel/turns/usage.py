"""Normalized token usage, and the configured-price cost estimate kept apart from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one or more requests used, as the provider reported them.

    `input_tokens` includes cache reads and writes (kept apart in `cache_read_tokens` and
    `cache_write_tokens`); `output_tokens` includes reasoning (`reasoning_tokens` is a breakdown,
    never added again). Missing counts are zero: unreported, never estimated. `cost` is only what
    the provider itself reported.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost is not None or other.cost is not None:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=cost,
            requests=self.requests + other.requests,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_counts(
        cls,
        *,
        input_tokens: object = None,
        output_tokens: object = None,
        total_tokens: object = None,
        reasoning_tokens: object = None,
        cache_read_tokens: object = None,
        cache_write_tokens: object = None,
        cost: object = None,
    ) -> Usage:
        """Usage of one request from raw provider counts; absent or malformed counts become 0."""
        inp, out = _count(input_tokens), _count(output_tokens)
        total = _count(total_tokens) or inp + out
        return cls(
            input_tokens=inp,
            output_tokens=out,
            total_tokens=total,
            reasoning_tokens=_count(reasoning_tokens),
            cache_read_tokens=_count(cache_read_tokens),
            cache_write_tokens=_count(cache_write_tokens),
            cost=_cost(cost),
            requests=1,
        )


ZERO_USAGE = Usage()


def _cost(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


@dataclass(frozen=True, slots=True)
class Pricing:
    """Configured prices in dollars per million tokens."""

    input_per_million: float
    output_per_million: float

    def estimate(self, usage: Usage) -> float:
        """A configured-price estimate; it does not reconstruct cache discounts."""
        return (
            usage.input_tokens * self.input_per_million
            + usage.output_tokens * self.output_per_million
        ) / 1_000_000
