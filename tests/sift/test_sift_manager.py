"""The manager around the sift: trim events, the net's measure, counters, children, compaction."""

from pathlib import Path

from sift_runs import TOOLS, Run
from tokenizers import Tokenizer

import satchel.memory.passages
from satchel.sift import ContextSift, SiftSettings, TrimEvent, estimate_tokens


def test_every_trim_is_reported_with_its_reason() -> None:
    seen: list[TrimEvent] = []
    sift = ContextSift(SiftSettings(budget=3000, window=6000), on_trim=seen.append)
    run = Run.start()
    sift.begin_run(run.history)
    returned: list[TrimEvent] = []
    for _ in range(50):
        run.step(1500)
        returned.extend(sift.sift(run.history, tools=TOOLS).events)
    assert seen == returned
    assert {event.reason for event in seen} == {"token_budget", "overflow"}
    for event in seen:
        assert event.tokens_after < event.tokens_before and event.removed > 0


def test_trials_report_no_trims() -> None:
    seen: list[TrimEvent] = []
    sift = ContextSift(SiftSettings(budget=500), on_trim=seen.append)
    run = Run.start()
    for _ in range(5):
        run.step(2000)
    assert sift.trial(run.history).events
    assert seen == []


def test_the_message_cap_cuts_to_its_own_target() -> None:
    sift = ContextSift(SiftSettings(budget=1_000_000, max_messages=12))
    run = Run.start()
    reasons = []
    for _ in range(20):
        run.step(100)
        result = sift.sift(run.history)
        reasons += [event.reason for event in result.events]
        assert len(result.messages) <= 12
        if result.events:
            assert len(result.messages) <= 10
    assert set(reasons) == {"message_cap"} and len(reasons) >= 3


def test_the_net_counts_tool_definitions() -> None:
    run = Run.start()
    for _ in range(6):
        run.step(1000)
    settings = SiftSettings(budget=3000, window=3000)
    assert not ContextSift(settings).sift(run.history).events
    bulky = [
        {"type": "function", "function": {"name": f"tool_{n}", "description": "d" * 400}}
        for n in range(6)
    ]
    cut = ContextSift(settings).sift(run.history, tools=bulky)
    assert [event.reason for event in cut.events] == ["overflow"]
    assert cut.tokens <= 3000 * 0.7


def test_the_output_reserve_is_left_out_of_the_window() -> None:
    run = Run.start()
    for _ in range(6):
        run.step(1000)
    assert not ContextSift(SiftSettings(budget=3000, window=3000)).sift(run.history).events
    reserved = ContextSift(SiftSettings(budget=2_000, window=3000, output_reserve=1000))
    assert reserved.sift(run.history).tokens <= 2000 * 0.7


def test_compaction_clears_the_cut() -> None:
    sift = ContextSift(SiftSettings(budget=3000, window=3000))
    run = Run.start()
    for _ in range(12):
        run.step(700)
        sift.sift(run.history)
    assert sift.state.cut is not None
    compacted = Run.start()
    compacted.history.insert(2, {"role": "assistant", "content": "Summary of the work so far."})
    compacted.step(700)
    sift.compacted()
    assert sift.state.cut is None
    result = sift.sift(compacted.history)
    assert result.events == () and result.previous_end is None
    assert result.messages == compacted.history


def test_a_token_counter_replaces_the_estimate() -> None:
    def words(text: str) -> int:
        return len(text.split())

    run = Run.start()
    run.step(700)
    counted = ContextSift(SiftSettings(budget=10**6), counter=words).sift(run.history)
    expected = sum(
        words(str(m.get("content")))
        + 4
        + sum(
            words(c["function"]["name"] + "\n" + c["function"]["arguments"])
            for c in m.get("tool_calls", [])
        )
        for m in run.history
    )
    assert counted.tokens == expected
    estimated = ContextSift(SiftSettings(budget=10**6)).sift(run.history)
    assert estimated.tokens == sum(estimate_tokens(m) for m in run.history)


def test_the_estimate_is_chars_over_three_and_a_half_plus_four() -> None:
    assert estimate_tokens({"role": "user", "content": "x" * 35}) == 14
    assert estimate_tokens({"role": "user", "content": "x" * 36}) == 15
    image = {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}}
    with_image = {"role": "user", "content": [{"type": "text", "text": "x" * 35}, image]}
    assert estimate_tokens(with_image) == 14 + 1000
    call = {"id": "c", "type": "function", "function": {"name": "grep", "arguments": "{}" * 5}}
    assert estimate_tokens({"role": "assistant", "content": "", "tool_calls": [call]}) == 4 + 4


def test_a_child_copies_the_settings_and_shares_the_store_with_fresh_evictions() -> None:
    settings = SiftSettings(budget=1500, read_targets={"read_file": "path"})
    parent = ContextSift(settings, counter=len)
    run = Run.start()
    for _ in range(4):
        run.step(3000)
    parent.sift(run.history)
    child = parent.child()
    assert child.settings is parent.settings and child.counter is parent.counter
    assert child.store is parent.store
    assert child.state.receipts == {} and child.task_id is None
    child.sift(run.history)
    assert set(child.state.receipts) == set(parent.state.receipts)
    assert {"call_1_0", "sub1.call_1_0"} <= {info.id for info in parent.store.infos()}
    assert parent.child().state.artifact_prefix == "sub2."
    assert child.child().state.artifact_prefix == "sub1.sub1."


def test_a_real_tokenizer_plugs_in_as_the_counter() -> None:
    model = Path(satchel.memory.passages.__file__).parent / "model" / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(model))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    sift = ContextSift(SiftSettings(budget=10**6), counter=tokens)
    run = Run.start()
    run.step(3000)
    before = sift.sift(run.history, tools=TOOLS).tokens
    run.nudge("Check the CSV writer's row limit before anything else.")
    after = sift.sift(run.history, tools=TOOLS).tokens
    assert after - before == tokens(run.history[-1]["content"]) + 4 == 17
    estimated = ContextSift(SiftSettings(budget=10**6)).sift(run.history, tools=TOOLS)
    assert estimated.tokens != after
