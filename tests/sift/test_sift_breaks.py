"""Regressions found by review: unencodable arguments, unbounded artifact tools, the net's silence
and its cuts, unanswered calls, and the rules no other test pinned."""

import json
import logging
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sift_runs import TOOLS, WIRE, Run

from satchel.sift import (
    Artifact,
    ArtifactStore,
    ArtifactTools,
    ContextSift,
    SiftSettings,
    TrimEvent,
    anthropic_request,
    estimate_tokens,
    openai_chat_request,
)


def _with_arguments(run: Run, arguments: str) -> None:
    """Give the newest step's call these arguments, as the model wrote them."""
    run.history[-2]["tool_calls"][0]["function"]["arguments"] = arguments


def test_an_escaped_lone_surrogate_stays_escaped_on_the_wire() -> None:
    run = Run.start()
    run.step(100)
    _with_arguments(run, '{"q": "\\ud83d", "p": "ok"}')
    result = ContextSift(SiftSettings(budget=10_000)).sift(run.history, tools=TOOLS)

    request = openai_chat_request(result, tools=TOOLS)
    json.dumps(request, ensure_ascii=False).encode()
    arguments = request["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert arguments == '{"p":"ok","q":"\\ud83d"}'
    assert json.loads(arguments) == {"p": "ok", "q": "\ud83d"}
    WIRE.openai_body(result)

    body = json.loads(WIRE.anthropic_body(result))
    call = body["messages"][1]["content"][-1]
    assert call["input"] == {"p": "ok", "q": "\\ud83d"}


def test_a_receipt_escapes_lone_surrogates_in_its_hint_and_summary() -> None:
    sift = ContextSift(SiftSettings(budget=1000))
    run = Run.start()
    run.step(content="decoded with surrogateescape: \udc80 end " + "x" * 4000)
    _with_arguments(run, '{"q": "\\ud83d"}')
    run.step(300)
    run.step(300)
    result = sift.sift(run.history)
    receipt = result.messages[2]["content"]
    assert receipt.splitlines()[-1].startswith(
        "[receipt call_1_0: grep(q=\\ud83d) OK: decoded with surrogateescape: \\udc80 end"
    )
    json.dumps(openai_chat_request(result), ensure_ascii=False).encode()
    WIRE.openai_body(result)
    WIRE.anthropic_body(result)


def test_a_number_too_large_for_a_float_is_sent_as_its_literal_text() -> None:
    run = Run.start()
    run.step(100)
    _with_arguments(run, '{"n": 1e400, "m": -1e400, "x": NaN, "k": 1.50, "i": 7}')
    sift = ContextSift(SiftSettings(budget=10_000))
    bodies = [WIRE.anthropic_body(sift.sift(run.history)) for _ in range(2)]
    assert bodies[0] == bodies[1]
    call = json.loads(bodies[0])["messages"][1]["content"][-1]
    assert call["input"] == {"i": 7, "k": 1.5, "m": "-1e400", "n": "1e400", "x": "NaN"}


def test_artifact_read_returns_at_most_its_read_limit() -> None:
    sift = ContextSift(SiftSettings(budget=32_000, window=40_000))
    tools = ArtifactTools(sift.store)
    run = Run.start()
    run.step(content="log\n" * 200_000, tool="read_log")
    sift.sift(run.history)
    read = tools.call("artifact_read", '{"id": "call_1_0", "limit": 1000000000}')
    run.step(content=read, tool="artifact_read")
    assert sift.sift(run.history).tokens <= 40_000 * 0.8
    header, text = read.split("\n", 1)
    assert header == "artifact call_1_0, characters 0 to 4000 of 800000:"
    assert text == "log\n" * 1000 + '\n[more: artifact_read(id="call_1_0", offset=4000)]'
    definition = next(d for d in tools.definitions if d["function"]["name"] == "artifact_read")
    limit = definition["function"]["parameters"]["properties"]["limit"]
    assert "at most 4000" in limit["description"]


def test_artifact_list_shows_only_the_newest_entries() -> None:
    store = ArtifactStore()
    for number in range(1, 61):
        store.put(Artifact(f"call_{number}", "grep", f"q={number}", "x" * number))
    lines = ArtifactTools(store).call("artifact_list", "{}").splitlines()
    assert len(lines) == 51
    assert lines[0] == (
        "60 artifacts stored; the newest 50 are listed, oldest first (the receipts name the older "
        "ids):"
    )
    assert lines[1] == "call_11: grep(q=11), 11 chars"
    assert lines[-1] == "call_60: grep(q=60), 60 chars"
    few = ArtifactTools(store, list_limit=60).call("artifact_list", "{}").splitlines()
    assert len(few) == 60 and few[0] == "call_1: grep(q=1), 1 chars"


def test_the_active_step_as_a_whole_is_held_to_its_share_of_the_budget() -> None:
    sift = ContextSift(SiftSettings(budget=32_000, window=40_000))
    run = Run.start()
    sift.begin_run(run.history)
    outputs = [f"line {part}\n" * 980 for part in range(20)]
    run.step([len(text) for text in outputs], content=None)
    for offset, text in enumerate(outputs):
        run.history[3 + offset]["content"] = text
    result = sift.sift(run.history, tools=TOOLS)
    assert sum(estimate_tokens(message) for message in run.history) > 40_000
    assert result.tokens <= 32_000 * 0.5 + estimate_tokens(run.history[0]) + 2_000
    tools = ArtifactTools(sift.store)
    for offset, text in enumerate(outputs):
        shown = result.messages[3 + offset]["content"]
        assert len(shown) < len(text) and shown.startswith(text[:100])
        call_id = run.history[3 + offset]["tool_call_id"]
        stored = sift.store.get(call_id)
        assert stored is not None and stored.text == text
        assert tools.read(call_id, 0, 10).startswith(f"artifact {call_id}, characters 0 to 10")
    restored = ContextSift(SiftSettings(budget=32_000, window=40_000))
    restored.restore(sift.save())
    run.step(300)
    assert (
        restored.sift(run.history, tools=TOOLS).messages
        == sift.sift(run.history, tools=TOOLS).messages
    )


def test_a_result_cut_to_its_share_is_sent_alike_when_a_note_joins() -> None:
    # Found by the state machine: a note took some of the budget, and the awaited step's result,
    # already cut to its share, was cut again a few characters shorter with no trim saying so.
    sift = ContextSift(SiftSettings(budget=4880, window=None))
    run = Run.start()
    sift.begin_run(run.history)
    run.step([7445], tool="grep")
    run.step([8001], tool="grep")
    first = sift.sift(run.history, tools=TOOLS)
    cut = first.messages[-1]
    assert "are left out here" in cut["content"]
    again = sift.sift(run.history, tools=TOOLS, note="0")
    assert cut in again.messages
    keep = min([event.first for event in again.events] + [len(first.messages)])
    assert again.messages[:keep] == first.messages[:keep]


@pytest.mark.parametrize(
    ("system_chars", "reason"), [(50_000, "fit_to_window"), (29_000, "overflow")]
)
def test_the_net_reports_a_request_it_cannot_fit_on_every_call(
    system_chars: int, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[TrimEvent] = []
    sift = ContextSift(SiftSettings(budget=10_000, window=10_000), on_trim=heard.append)
    run = Run.start(system="x" * system_chars)
    for number in range(5):
        if number:
            run.step(300)
        with caplog.at_level(logging.WARNING, logger="satchel.sift"):
            result = sift.sift(run.history)
        assert "cannot bring the request down" in caplog.text
        caplog.clear()
        (event,) = result.events
        assert event.reason == reason and heard[-1] == event
        assert result.tokens > 10_000 * 0.8
    assert len(heard) == 5
    assert (heard[0].removed, heard[0].first) == (0, 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    earlier=st.lists(st.tuples(st.integers(1, 600), st.booleans()), min_size=2, max_size=5),
    steps=st.lists(st.integers(0, 3000), min_size=1, max_size=12),
    window=st.integers(1500, 6000),
    budget=st.sampled_from((1500, 4000, 6000)),
)
def test_a_cut_request_opens_with_a_user_message(
    earlier: list[tuple[int, bool]], steps: list[int], window: int, budget: int
) -> None:
    sift = ContextSift(SiftSettings(budget=min(budget, window), window=window))
    run = Run.start()
    run.history.pop()
    for number, (chars, with_step) in enumerate(earlier):
        run.nudge(f"earlier request {number} " + "y" * chars)
        if with_step:
            run.step(chars)
        run.answer(f"earlier answer {number} " + "z" * chars)
    run.nudge("The task.")
    sift.begin_run(run.history)
    for chars in steps:
        run.step(chars)
        result = sift.sift(run.history, tools=TOOLS)
        assert result.messages[1]["role"] == "user"
        assert anthropic_request(result, tools=TOOLS)["messages"][0]["role"] == "user"


def test_a_call_without_its_result_at_the_end_is_refused() -> None:
    run = Run.start()
    run.step(300)
    run.step([300, 300])
    complete = list(run.history)
    unanswered = complete[:-1]
    sift = ContextSift(SiftSettings(budget=2000))
    sift.sift(complete[:4])
    message = "tool call 'call_2_1' of message 4 has no result at the end of the history"
    with pytest.raises(ValueError, match=re.escape(message)):
        sift.trial(unanswered)
    with pytest.raises(ValueError, match=re.escape(message)):
        sift.sift(unanswered)
    with pytest.raises(ValueError, match="tool call 'call_2_0', 'call_2_1' of message 4"):
        sift.sift(complete[:5])
    fresh = ContextSift(SiftSettings(budget=2000))
    fresh.sift(complete[:4])
    assert sift.sift(complete) == fresh.sift(complete)


def test_the_message_budget_never_drops_below_a_quarter_of_the_budget() -> None:
    budget = 8000
    floor = budget // 4
    run = Run.start(system="x" * 24_500)
    system = estimate_tokens(run.history[0])
    assert system > budget * 0.75
    sift = ContextSift(SiftSettings(budget=budget))
    totals: list[int] = []
    for _ in range(20):
        run.step(1000)
        totals.append(sum(estimate_tokens(m) for m in run.history[1:]))
        result = sift.trial(run.history)
        if result.events:
            break
    assert len(totals) > 1 and totals[-2] <= floor < totals[-1]
    assert [event.reason for event in result.events] == ["token_budget"]
    assert result.tokens - system <= floor


def test_a_restored_sift_keeps_results_already_sent_whole() -> None:
    settings = SiftSettings(budget=7000)
    sift = ContextSift(settings)
    run = Run.start()
    run.step(20000)
    sift.sift(run.history)
    restored = ContextSift(settings)
    restored.restore(sift.save())
    long_result = run.history[-1]
    run.nudge("Look at the end of that log. " * 300)
    original = sift.sift(run.history, tools=TOOLS)
    assert original.tokens > 7000
    assert any(m is long_result for m in original.messages)
    assert WIRE.openai_body(restored.sift(run.history, tools=TOOLS)) == WIRE.openai_body(original)


def test_outputs_the_net_leaves_out_stay_readable() -> None:
    sift = ContextSift(SiftSettings(budget=8000, window=8000))
    run = Run.start()
    sift.begin_run(run.history)
    cuts = 0
    for _ in range(12):
        run.step(2500)
        cuts += sum(event.reason == "overflow" for event in sift.sift(run.history).events)
    assert cuts and not sift.state.receipts
    shown = {id(message) for message in sift.sift(run.history).messages}
    left_out = [m for m in run.history if m["role"] == "tool" and id(m) not in shown]
    assert left_out
    for message in left_out:
        stored = sift.store.get(message["tool_call_id"])
        assert stored is not None and stored.text == message["content"]
