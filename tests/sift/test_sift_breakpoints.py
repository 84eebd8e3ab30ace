"""Anthropic cache breakpoints: after a batch, the prefix before its first change is still read
from the cache, because every request before it wrote the prefix the batch would keep."""

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sift_runs import TOOLS, Run, without_cache_control

from satchel.sift import ContextSift, SiftResult, SiftSettings, anthropic_request

LOOKBACK = 20
"""Anthropic looks for an earlier write up to 20 blocks before a breakpoint."""


def blocks(body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The body's message blocks in prefix order, each with its entry's index."""
    return [
        (number, block)
        for number, entry in enumerate(body["messages"])
        for block in entry["content"]
    ]


def marked(body: dict[str, Any]) -> list[int]:
    """Positions, among the message blocks, of the blocks that carry a breakpoint."""
    return [index for index, (_, block) in enumerate(blocks(body)) if "cache_control" in block]


def prefix(body: dict[str, Any], end: int) -> list[Any]:
    """The message blocks `[0, end]` without their breakpoints, with their entries."""
    return [(number, without_cache_control(block)) for number, block in blocks(body)[: end + 1]]


def test_breakpoints_sit_on_the_system_the_change_the_stable_end_and_the_last() -> None:
    messages = [{"role": "system", "content": "s"}]
    for turn in range(5):
        messages.append({"role": "user", "content": f"u{turn}"})
        messages.append({"role": "assistant", "content": f"a{turn}"})
    result = SiftResult(
        messages=messages,
        sources=tuple(range(len(messages))),
        events=(),
        tokens=0,
        previous_end=None,
        note=False,
        stable_end=2,
        changed_from=6,
    )
    body = anthropic_request(result, tools=TOOLS)
    texts = [block["text"] for _, block in blocks(body) if "cache_control" in block]
    assert texts == ["a0", "u2", "a4"]
    assert "cache_control" in body["system"][-1]
    assert all("cache_control" not in tool for tool in body["tools"])
    assert json.dumps(body).count("cache_control") == 4


def test_without_a_system_prompt_the_tools_carry_the_first_breakpoint() -> None:
    messages = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    body = anthropic_request(messages, tools=TOOLS)
    assert "cache_control" in body["tools"][-1]
    assert json.dumps(body).count("cache_control") == 2


def test_a_breakpoint_shared_by_two_marks_is_placed_once() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    result = SiftResult(messages, (0, 1), (), 0, 0, False, stable_end=1, changed_from=None)
    body = anthropic_request(result, tools=TOOLS)
    assert json.dumps(body).count("cache_control") == 3


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.sampled_from((200, 700, 1500, 4000, 9000)), min_size=20, max_size=45),
    budget=st.integers(3_000, 9_000),
)
def test_after_every_batch_the_unchanged_prefix_is_within_reach_of_a_written_breakpoint(
    sizes: list[int], budget: int
) -> None:
    sift = ContextSift(SiftSettings(budget=budget))
    run = Run.start()
    previous: tuple[SiftResult, dict[str, Any]] | None = None
    batches = 0
    for size in sizes:
        run.step(size)
        result = sift.sift(run.history, tools=TOOLS)
        body = anthropic_request(result, tools=TOOLS)
        assert json.dumps(body).count("cache_control") <= 4
        if previous is not None and result.events and previous[0].stable_end is not None:
            batches += 1
            before, before_body = previous
            assert result.changed_from is not None and before.stable_end is not None
            assert result.reused_end == before.stable_end
            assert result.changed_from > before.stable_end
            assert (
                result.messages[: before.stable_end + 1] == before.messages[: before.stable_end + 1]
            )
            stable = len(blocks(anthropic_request(before.messages[: before.stable_end + 1]))) - 1
            hits = [
                p
                for p in marked(before_body)
                for q in marked(body)
                if q - LOOKBACK <= p <= q and prefix(before_body, p) == prefix(body, p)
            ]
            assert hits and max(hits) >= stable
        previous = (result, body)
    assert batches or sum(sizes) < budget * 3.5


def test_the_stable_end_passes_steps_no_batch_can_evict() -> None:
    sift = ContextSift(SiftSettings(budget=100_000, read_targets={"read_file": "path"}))
    run = Run.start()
    run.step(20, tool="grep")
    run.step(900, tool="read_file", path="src/a.py")
    run.step(3000, tool="grep")
    run.step(3000, tool="grep")
    result = sift.sift(run.history, tools=TOOLS)
    tiny, read, first = 2, 4, 6
    assert result.messages[first] is run.history[first]
    assert result.stable_end == first - 1 and tiny < read < first
    run.step(900, tool="read_file", path="src/a.py")
    assert sift.sift(run.history, tools=TOOLS).stable_end == read - 1
