"""The eviction rule as a pure function: how many of the oldest candidate steps one sift evicts.

It evicts nothing while under budget or while too little could go, so the prefix does not move on
every call; when it does evict, it frees enough for many calls to append before the next batch.
"""

from collections.abc import Sequence
from math import ceil


def plan_batch(
    budget: int,
    remaining: int,
    freed: Sequence[int],
    *,
    target_fraction: float = 0.5,
    min_batch_fraction: float = 0.25,
    slack_fraction: float = 0.10,
) -> int:
    """Return how many candidates, oldest first, to evict.

    `budget` is the message budget, `remaining` the size of the messages after sticky evictions,
    and `freed[i]` what evicting the i-th oldest candidate would free (its size less its receipt).
    What cannot be freed is the floor: `remaining - sum(freed)`.
    """
    if budget < 0 or remaining < 0:
        raise ValueError(f"budget ({budget}) and remaining ({remaining}) must not be negative")
    if remaining <= budget:
        return 0
    evictable = sum(freed)
    min_batch = ceil(budget * min_batch_fraction)
    if evictable <= 0 or evictable < min_batch:
        return 0
    floor = remaining - evictable
    target = max(budget * target_fraction, floor + ceil(budget * slack_fraction))
    need = max(ceil(remaining - target), min_batch)
    total = 0
    for count, amount in enumerate(freed, start=1):
        total += amount
        if total >= need:
            return count
    return len(freed)
