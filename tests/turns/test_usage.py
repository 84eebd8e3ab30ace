"""`Usage` arithmetic and normalization, and the configured-price estimate kept apart from it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chatwire import Answer, ChatServer
from satchel.turns import Pricing, RecordsWriter, Session, Usage
from turns.kit import Sleeps, open_source_adapter, parse_action, user


def test_addition_sums_every_count() -> None:
    a = Usage(1, 2, 3, 4, 5, 6, None, 1)
    b = Usage(10, 20, 30, 40, 50, 60, None, 2)
    assert a + b == Usage(11, 22, 33, 44, 55, 66, None, 3)


@pytest.mark.parametrize(
    ("left", "right", "total"),
    [(None, None, None), (0.25, None, 0.25), (None, 0.5, 0.5), (0.25, 0.5, 0.75)],
)
def test_addition_keeps_reported_cost_only(
    left: float | None, right: float | None, total: float | None
) -> None:
    assert (Usage(cost=left) + Usage(cost=right)).cost == total


def test_zero_is_the_identity() -> None:
    usage = Usage(7, 3, 10, 1, 2, 0, 0.1, 1)
    assert usage + Usage() == usage
    assert Usage() + usage == usage


def test_from_counts_is_one_request() -> None:
    usage = Usage.from_counts(
        input_tokens=120,
        output_tokens=30,
        total_tokens=150,
        reasoning_tokens=20,
        cache_read_tokens=100,
        cache_write_tokens=5,
        cost=0.002,
    )
    assert usage == Usage(120, 30, 150, 20, 100, 5, 0.002, 1)


def test_from_counts_missing_counts_are_zero_never_estimated() -> None:
    assert Usage.from_counts() == Usage(requests=1)
    assert Usage.from_counts(input_tokens=8, output_tokens=2).total_tokens == 10


@pytest.mark.parametrize("bad", [None, -3, "12", 1.5, True, [4]])
def test_from_counts_malformed_counts_become_zero(bad: object) -> None:
    usage = Usage.from_counts(
        input_tokens=bad, output_tokens=bad, reasoning_tokens=bad, cache_read_tokens=bad
    )
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (0, 0, 0)
    assert (usage.reasoning_tokens, usage.cache_read_tokens) == (0, 0)


@pytest.mark.parametrize("bad", [-1, "0.1", True, None])
def test_from_counts_malformed_cost_is_unreported(bad: object) -> None:
    assert Usage.from_counts(input_tokens=1, cost=bad).cost is None


def test_reasoning_is_a_breakdown_of_output() -> None:
    usage = Usage.from_counts(input_tokens=10, output_tokens=50, reasoning_tokens=40)
    assert usage.output_tokens == 50
    assert usage.total_tokens == 60


def test_to_dict_has_every_field() -> None:
    assert Usage(1, 2, 3, 4, 5, 6, 0.5, 1).to_dict() == {
        "input_tokens": 1,
        "output_tokens": 2,
        "total_tokens": 3,
        "reasoning_tokens": 4,
        "cache_read_tokens": 5,
        "cache_write_tokens": 6,
        "cost": 0.5,
        "requests": 1,
    }


def test_pricing_estimate() -> None:
    pricing = Pricing(input_per_million=2.0, output_per_million=10.0)
    assert pricing.estimate(Usage(input_tokens=1_000_000, output_tokens=500_000)) == 7.0
    assert pricing.estimate(Usage()) == 0.0


def test_configured_price_never_written_into_usage_cost(tmp_path: Path) -> None:
    server = ChatServer(
        Answer("ACT 1", prompt_tokens=400_000, completion_tokens=100_000),
    )
    session = Session(
        open_source_adapter(server),
        records=RecordsWriter(tmp_path),
        pricing=Pricing(input_per_million=1.0, output_per_million=4.0),
        sleep=Sleeps(),
    )
    accepted = session.turn([user("frame")], parse_action)
    assert accepted.usage.cost is None
    session.finish("WIN", run_id="r", started_at=datetime.now(UTC))

    step = json.loads((tmp_path / "step_001.json").read_text())
    meta = json.loads((tmp_path / "run_meta.json").read_text())
    assert step["usage"]["cost"] is None
    assert step["estimated_cost"] == pytest.approx(0.8)
    assert meta["total_usage"]["cost"] is None
    assert meta["estimated_cost"] == pytest.approx(0.8)


def test_wire_usage_is_normalized_once() -> None:
    server = ChatServer(
        Answer("ACT 1", prompt_tokens=10, completion_tokens=5, cached_tokens=4, reasoning_tokens=3)
    )
    session = Session(open_source_adapter(server), sleep=Sleeps())
    accepted = session.turn([user("frame")], parse_action)
    assert accepted.usage == Usage(10, 5, 15, 3, 4, 0, None, 1)
    assert session.total_usage == accepted.usage
