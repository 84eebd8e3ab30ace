"""The eviction rule, a pure function, on the design's cases and on random inputs."""

from math import ceil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from satchel.sift import plan_batch


def test_under_budget_evicts_nothing() -> None:
    assert plan_batch(1000, 1000, [400, 400]) == 0
    assert plan_batch(1000, 10, [5]) == 0


def test_too_little_evictable_evicts_nothing() -> None:
    assert plan_batch(1000, 1100, [100, 140]) == 0
    assert plan_batch(1000, 1100, []) == 0


def test_a_full_floor_waits_for_a_quarter_of_the_budget() -> None:
    floor = 1200
    assert plan_batch(1000, floor + 200, [200]) == 0
    assert plan_batch(1000, floor + 240, [120, 120]) == 0
    freed = [100, 100, 100]
    assert plan_batch(1000, floor + 300, freed) == 3


def test_a_full_floor_evicts_down_to_floor_plus_slack() -> None:
    floor = 1200
    freed = [50] * 20
    remaining = floor + sum(freed)
    count = plan_batch(1000, remaining, freed)
    assert count == 18
    assert remaining - sum(freed[:count]) == floor + ceil(1000 * 0.10)


def test_budget_zero_evicts_every_candidate() -> None:
    assert plan_batch(0, 900, [100, 200, 300]) == 3
    assert plan_batch(0, 50, [1]) == 1


def test_a_batch_frees_down_to_half_the_budget_oldest_first() -> None:
    assert plan_batch(1000, 1600, [300] * 5) == 4
    assert plan_batch(1000, 1100, [300] * 3) == 2


def test_negative_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        plan_batch(-1, 10, [1])


@given(
    budget=st.integers(0, 50_000),
    floor=st.integers(0, 60_000),
    freed=st.lists(st.integers(1, 5_000), max_size=40),
)
def test_a_batch_is_zero_or_frees_at_least_a_quarter(
    budget: int, floor: int, freed: list[int]
) -> None:
    remaining = floor + sum(freed)
    count = plan_batch(budget, remaining, freed)
    assert 0 <= count <= len(freed)
    if remaining <= budget or sum(freed) < ceil(budget * 0.25):
        assert count == 0
    elif count:
        target = max(budget * 0.5, floor + ceil(budget * 0.10))
        need = max(ceil(remaining - target), ceil(budget * 0.25))
        assert sum(freed[:count]) >= need or count == len(freed)
        assert sum(freed[: count - 1]) < need
