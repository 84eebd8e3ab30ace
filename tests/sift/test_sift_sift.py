"""What one sift sends: steps, the active step, the task, receipts and bounded results."""

import json
import re
from typing import Any

import pytest
from sift_runs import SYSTEM, TASK, TOOLS, Run, output

from satchel.sift import ArtifactTools, ContextSift, SiftResult, SiftSettings


def test_under_budget_the_history_is_sent_as_it_is() -> None:
    sift = ContextSift(SiftSettings(budget=10_000))
    run = Run.start()
    run.step(2000)
    run.nudge()
    result = sift.sift(run.history, tools=TOOLS)
    assert result.events == ()
    assert all(a is b for a, b in zip(result.messages, run.history, strict=True))
    assert result.sources == tuple(range(len(run.history)))


def test_an_evicted_step_becomes_one_receipt_in_its_place() -> None:
    sift = ContextSift(SiftSettings(budget=2400))
    run = Run.start()
    first = run.step([3000, 2000], text="Reading both modules.")
    run.step(3000)
    run.step(500)
    result = sift.sift(run.history)
    (event,) = result.events
    assert event.reason == "token_budget" and event.first == 2 and event.removed == 5
    assert "[receipt call_2_0: grep(" in result.messages[3]["content"]
    receipt = result.messages[2]
    assert receipt == {"role": "assistant", "content": receipt["content"]}
    assert receipt["content"].startswith("Reading both modules.\n\n[receipt call_1_0: grep(")
    assert "[receipt call_1_1: grep(" in receipt["content"]
    assert result.sources[2] == 2
    assert result.messages[:2] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    sent_ids = {m.get("tool_call_id") for m in result.messages} - {None}
    assert not sent_ids & {first, "call_1_1"}


def test_a_receipt_names_each_call_its_status_and_where_the_output_is() -> None:
    sift = ContextSift(SiftSettings(budget=1500))
    run = Run.start()
    run.step(6000, tool="run_tests", path="tests/test_export.py", error=True)
    run.step(300)
    run.step(300)
    sift.sift(run.history)
    content = sift.sift(run.history).messages[2]["content"]
    full = run.history[3]["content"]
    line = content.splitlines()[-1]
    assert line.startswith("[receipt call_1_0: run_tests(path=tests/test_export.py) ERROR: Error:")
    assert line.endswith(f" — full output: artifact call_1_0, {len(full)} chars]")
    summary = line.split(" ERROR: ", 1)[1].rsplit(" — full output", 1)[0]
    head, tail = summary.split(" … ")
    flat = " ".join(full.split())
    assert flat.startswith(head) and flat.endswith(tail)
    assert len(summary) <= 160
    stored = sift.store.get("call_1_0")
    assert stored is not None and stored.text == full and stored.tool == "run_tests"


def test_the_active_step_and_its_nudges_are_never_evicted() -> None:
    sift = ContextSift(SiftSettings(budget=0))
    run = Run.start()
    for _ in range(4):
        run.step(1000)
    run.nudge("Two more checks, then answer.")
    result = sift.sift(run.history)
    assert [m["role"] for m in result.messages] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "assistant",
        "assistant",
        "tool",
        "user",
    ]
    assert result.messages[-3] is run.history[-3] and result.messages[-1] is run.history[-1]
    assert result.messages[-2]["tool_call_id"] == run.history[-2]["tool_call_id"]
    assert all("[receipt" in m["content"] for m in result.messages[2:5])


def test_evictions_are_sticky() -> None:
    sift = ContextSift(SiftSettings(budget=2500))
    run = Run.start()
    for _ in range(4):
        run.step(3000)
    evicted = sift.sift(run.history)
    assert evicted.events
    receipts = [m for m in evicted.messages if "[receipt" in str(m["content"])]
    shorter = sift.trial(run.history[:6])
    assert shorter.events == ()
    assert [m for m in shorter.messages if "[receipt" in str(m["content"])] == receipts[:2]


def test_the_system_prompt_is_taken_off_the_budget() -> None:
    def evicts(system: str) -> bool:
        sift = ContextSift(SiftSettings(budget=3000))
        run = Run.start(system=system)
        run.step(2500)
        run.step(2500)
        run.step(300)
        result = sift.sift(run.history)
        assert result.messages[0]["content"] == system
        return bool(result.events)

    assert not evicts("Be brief.")
    assert evicts("x" * 9000)
    assert not evicts("x" * 3000)
    assert evicts("x" * 5000)


def test_the_task_is_pinned_by_the_id_recorded_at_run_start() -> None:
    sift = ContextSift(SiftSettings(budget=2500, window=2500))
    run = Run.start()
    run.history.insert(1, {"role": "user", "content": "An earlier request, long done."})
    run.history.insert(2, {"role": "assistant", "content": "Done earlier."})
    run.history[3]["id"] = "task-7"
    assert sift.begin_run(run.history) == "task-7"
    for number in range(12):
        run.step(700)
        run.nudge(f"nudge {number}")
        result = sift.sift(run.history)
    assert result.events or sift.state.cut is not None
    contents = [m["content"] for m in result.messages]
    assert TASK in contents
    assert "An earlier request, long done." not in contents
    assert "nudge 0" not in contents

    later = [m for m in run.history if m.get("id") != "task-7"]
    with pytest.raises(ValueError, match="'task-7' recorded at run start is not in the history"):
        sift.sift(later)


def test_without_begin_run_the_first_user_message_is_the_task() -> None:
    sift = ContextSift(SiftSettings(budget=2000, window=2000, kept_tools=frozenset({"grep"})))
    run = Run.start()
    for number in range(10):
        run.step(700)
        run.nudge(f"nudge {number}")
    result = sift.sift(run.history)
    assert result.messages[1] == {"role": "user", "content": TASK}
    assert result.events[0].reason in {"overflow", "fit_to_window"}


def test_a_result_sent_whole_is_not_cut_when_sifting_begins() -> None:
    sift = ContextSift(SiftSettings(budget=7000))
    run = Run.start()
    run.step(20000)
    whole = sift.sift(run.history)
    long_result = run.history[-1]
    assert long_result in whole.messages
    run.nudge("Look at the end of that log. " * 300)
    crossed = sift.sift(run.history)
    assert crossed.tokens > 7000
    assert any(m is long_result for m in crossed.messages)
    assert crossed.messages[: len(whole.messages)] == whole.messages


def test_a_new_long_result_is_bounded_once_sifting_is_engaged() -> None:
    sift = ContextSift(SiftSettings(budget=10_000))
    run = Run.start()
    run.step(20000)
    sift.sift(run.history)
    call = run.step(15000)
    full = run.history[-1]["content"]
    result = sift.sift(run.history)
    assert result.events == ()
    shown = result.messages[-1]["content"]
    assert len(shown) <= 8000
    match = re.search(
        r"\[… characters (\d+) to (\d+) of (\d+) are left out here; "
        r'artifact_read\(id="(.+?)", offset=(\d+)\) reads them, a page at a time …\]',
        shown,
    )
    assert match is not None
    start, end, total, artifact, offset = match.groups()
    assert (int(total), artifact, int(offset)) == (len(full), call, int(start))
    head, tail = shown.split(match.group(0))
    assert full.startswith(head.rstrip("\n")) and full.endswith(tail.lstrip("\n"))
    tools = ArtifactTools(sift.store)
    read = tools.read(artifact, int(offset), 10**6)
    page_end = int(start) + tools.read_limit
    assert read == (
        f"artifact {call}, characters {start} to {page_end} of {total}:\n"
        f"{full[int(start) : page_end]}"
        f'\n[more: artifact_read(id="{call}", offset={page_end})]'
    )
    gap = ""
    position = int(offset)
    while position < int(end):
        text = tools.read(artifact, position, 10**6).split("\n", 1)[1]
        gap += text.split("\n[more: ")[0]
        position = int(start) + len(gap)
    assert gap[: int(end) - int(start)] == full[int(start) : int(end)]
    run.step(200)
    again = sift.sift(run.history)
    assert again.messages[: len(result.messages)] == result.messages


def test_results_after_the_first_evicted_step_are_bounded_by_the_batch() -> None:
    sift = ContextSift(SiftSettings(budget=10_000))
    run = Run.start()
    run.step(20000)
    sift.sift(run.history)
    run.step(14000)
    before = sift.sift(run.history)
    long_result = run.history[-1]
    assert before.messages[-1] is long_result
    run.step(1000)
    result = sift.sift(run.history)
    (event,) = result.events
    assert event.first == 2 and event.removed == 2
    assert "[receipt call_1_0" in result.messages[2]["content"]
    bounded = result.messages[4]
    assert bounded["tool_call_id"] == long_result["tool_call_id"]
    assert len(bounded["content"]) <= 8000 < len(long_result["content"])


def test_images_stay_with_their_bounded_result() -> None:
    sift = ContextSift(SiftSettings(budget=3000))
    run = Run.start()
    run.step(12000)
    run.step(12000)
    sift.sift(run.history)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    parts = [{"type": "text", "text": output(5, 20000)}, image]
    run.step(content=parts, tool="screenshot")
    result = sift.sift(run.history)
    shown = result.messages[-1]["content"]
    assert shown[1] is image and len(shown) == 2
    assert shown[0]["type"] == "text" and len(shown[0]["text"]) <= 8000


def test_artifact_tool_results_are_never_bounded_or_stored() -> None:
    sift = ContextSift(SiftSettings(budget=3000))
    run = Run.start()
    run.step(12000)
    run.step(12000)
    run.step(500)
    sift.sift(run.history)
    call = run.step(20000, tool="artifact_read")
    result = sift.sift(run.history)
    assert result.messages[-1] is run.history[-1]
    for _ in range(4):
        run.step(6000)
        result = sift.sift(run.history)
    receipt = next(m["content"] for m in result.messages if f"[receipt {call}:" in m["content"])
    assert receipt.splitlines()[-1].endswith("— not stored]")
    assert call not in sift.store


def test_the_newest_read_of_a_file_stays_inline() -> None:
    settings = SiftSettings(
        budget=3000, read_targets={"read_file": "path"}, inline_reads_fraction=0.5
    )
    sift = ContextSift(settings)
    run = Run.start()
    old_read = run.step(2000, tool="read_file", path="src/a.py")
    new_read = run.step(2000, tool="read_file", path="src/a.py")
    other = run.step(2000, tool="read_file", path="src/b.py")
    big = run.step(12000, tool="read_file", path="src/c.py")
    for _ in range(3):
        run.step(3000)
    result = sift.sift(run.history)
    kept = {m["tool_call_id"] for m in result.messages if m["role"] == "tool"}
    evicted = {
        call
        for call in (old_read, new_read, other, big)
        if any(f"[receipt {call}:" in str(m["content"]) for m in result.messages)
    }
    assert {new_read, other} <= kept
    assert evicted == {old_read, big}


def test_inline_reads_keep_to_their_share_of_the_budget_newest_first() -> None:
    sift = ContextSift(SiftSettings(budget=10_000, read_targets={"read_file": "path"}))
    run = Run.start()
    reads = [run.step(2000, tool="read_file", path=f"src/{name}.py") for name in "abc"]
    for _ in range(12):
        run.step(3000)
    result = sift.sift(run.history)
    assert result.events
    kept = {m["tool_call_id"] for m in result.messages if m["role"] == "tool"}
    receipts = " ".join(str(m["content"]) for m in result.messages)
    assert reads[2] in kept
    assert f"[receipt {reads[0]}:" in receipts and f"[receipt {reads[1]}:" in receipts


def test_steps_of_kept_tools_are_never_evicted() -> None:
    settings = SiftSettings(budget=2400, kept_tools=frozenset({"read_plan"}))
    sift = ContextSift(settings)
    run = Run.start()
    plan = run.step(1500, tool="read_plan")
    first = run.step(3000)
    run.step(3000)
    run.step(500)
    result = sift.sift(run.history)
    assert result.events and first in sift.state.receipts and plan not in sift.state.receipts
    assert run.history[2] in result.messages and run.history[3] in result.messages
    plain = ContextSift(SiftSettings(budget=2400))
    plain.sift(run.history)
    assert plan in plain.state.receipts


def test_tool_definitions_and_the_note_are_taken_off_the_budget() -> None:
    wide: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "x" * 5000, "parameters": {}},
        }
    ]

    def sift_with(tools: list[dict[str, Any]] | None, note: str | None) -> SiftResult:
        sift = ContextSift(SiftSettings(budget=3000))
        run = Run.start()
        run.step(2500)
        run.step(2500)
        run.step(300)
        return sift.sift(run.history, tools=tools, note=note)

    assert not sift_with(None, None).events
    assert not sift_with(TOOLS, "progress: 3 of 10").events
    for tools, note in ((wide, None), (None, "y" * 5000)):
        result = sift_with(tools, note)
        assert [event.reason for event in result.events] == ["token_budget"]
        assert result.tokens <= 3000


def test_a_per_call_note_is_the_last_message() -> None:
    sift = ContextSift(SiftSettings(budget=2000))
    run = Run.start()
    for _ in range(5):
        run.step(2000)
    result = sift.sift(run.history, note="progress: 5 of 20")
    assert result.note and result.sources[-1] is None
    assert result.messages[-1] == {"role": "user", "content": "progress: 5 of 20"}
    assert result.messages[0] == run.history[0]


def test_previous_end_marks_where_the_previous_request_ended() -> None:
    sift = ContextSift(SiftSettings(budget=2500))
    run = Run.start()
    run.step(300)
    assert sift.sift(run.history, note="n").previous_end is None
    run.step(300)
    second = sift.sift(run.history)
    assert second.previous_end == 3
    for _ in range(3):
        run.step(3000)
        result = sift.sift(run.history)
    assert result.events and result.previous_end is None


@pytest.mark.parametrize(
    ("history", "error", "message"),
    [
        (
            [
                {"role": "user", "content": "t"},
                {"role": "tool", "tool_call_id": "c", "content": ""},
            ],
            ValueError,
            "message 1 is a tool result for call 'c' with no matching tool call",
        ),
        (
            [
                {"role": "user", "content": "t"},
                {"role": "assistant", "tool_calls": [_call := {"id": "a", "function": {}}]},
                {"role": "tool", "tool_call_id": "b", "content": ""},
            ],
            ValueError,
            "message 2 is a tool result for call 'b', which is not an open call",
        ),
        (
            [
                {"role": "user", "content": "t"},
                {"role": "assistant", "tool_calls": [_call]},
                {"role": "user", "content": "hurry"},
                {"role": "assistant", "content": "ok"},
            ],
            ValueError,
            "tool call 'a' of message 1 has no result before message 2",
        ),
        (
            [
                {"role": "user", "content": "t"},
                {"role": "assistant", "tool_calls": [_call]},
                {"role": "tool", "tool_call_id": "a", "content": ""},
                {"role": "assistant", "tool_calls": [_call]},
            ],
            ValueError,
            "message 3 repeats tool call id 'a'",
        ),
        ([{"role": "robot", "content": "t"}], ValueError, "message 0 has role 'robot'"),
        (["hello"], TypeError, "message 0 is a str, not a dict"),
    ],
)
def test_malformed_histories_are_refused_with_the_reason(
    history: list[dict[str, object]], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        ContextSift(SiftSettings(budget=100)).sift(history)  # type: ignore[arg-type]


def test_begin_run_needs_a_task() -> None:
    with pytest.raises(ValueError, match="newest user message is the task"):
        ContextSift(SiftSettings(budget=100)).begin_run([{"role": "system", "content": "s"}])


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="overflow_target_fraction"):
        SiftSettings(budget=10, overflow_fraction=0.5, overflow_target_fraction=0.6)
    with pytest.raises(ValueError, match="window"):
        SiftSettings(budget=10, window=100, output_reserve=100)
    with pytest.raises(ValueError, match="budget must be at least 0"):
        SiftSettings(budget=-1)
    with pytest.raises(ValueError, match="inline_reads_fraction must be between 0 and 1"):
        SiftSettings(budget=10, inline_reads_fraction=1.5)


def test_tool_arguments_in_receipts_are_short_and_stable() -> None:
    sift = ContextSift(SiftSettings(budget=0))
    run = Run.start()
    run.step(100)
    run.history[-2]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"z": 1.5, "path": "x" * 200, "a": [1, 2]}
    )
    run.step(100)
    receipt = sift.sift(run.history).messages[2]["content"]
    hint = receipt.split("grep(", 1)[1].split(") OK", 1)[0]
    assert hint.startswith("a=[1, 2], path=xxx")
    assert len(hint) <= 96


def test_a_refused_history_leaves_the_sift_as_it_was() -> None:
    run = Run.start()
    for _ in range(4):
        run.step(3000)
    sift = ContextSift(SiftSettings(budget=2500))
    sift.sift(run.history[:6])
    saved = sift.save()
    broken = [*run.history, {"role": "tool", "tool_call_id": "nobody", "content": ""}]
    with pytest.raises(ValueError, match="'nobody'"):
        sift.sift(broken)
    assert sift.save() == saved
    fresh = ContextSift(SiftSettings(budget=2500))
    fresh.sift(run.history[:6])
    assert sift.sift(run.history) == fresh.sift(run.history)
