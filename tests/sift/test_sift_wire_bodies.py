"""Request bodies the OpenAI and Anthropic SDKs really send, over scripted multi-step runs."""

import copy
import itertools
import json
import random
from typing import Any

from sift_runs import (
    TASK,
    TOOLS,
    WIRE,
    Run,
    encoded,
    messages_prefix,
    replay,
    script,
    without_cache_control,
)

from satchel.sift import ContextSift, SiftResult, SiftSettings

NET_SETTINGS = SiftSettings(budget=4000, window=8000, awaited_fraction=1.0)
"""Small enough that the scripted runs reach the net; the active step keeps its whole budget."""


def anthropic_blocks(body: bytes) -> list[tuple[str, Any]]:
    """Every content block of an Anthropic body with its role, breakpoints removed."""
    blocks = []
    for entry in json.loads(body)["messages"]:
        for block in entry["content"]:
            blocks.append((entry["role"], without_cache_control(block)))
    return blocks


def test_an_eviction_batch_breaks_the_prefix_only_from_its_first_evicted_step() -> None:
    sift = ContextSift(SiftSettings(budget=4000))
    previous: tuple[SiftResult, bytes] | None = None
    batches = 0
    for _, result in replay(sift, 40):
        body = WIRE.openai_body(result)
        if previous is not None:
            before, before_body = previous
            stored = len(before.messages) - int(before.note)
            if not result.events:
                assert body.startswith(messages_prefix(before_body, stored))
            else:
                batches += 1
                (event,) = result.events
                assert event.reason == "token_budget"
                assert body.startswith(messages_prefix(before_body, event.first))
                assert not body.startswith(messages_prefix(before_body, event.first + 1))
                receipt = json.loads(body)["messages"][event.first]
                evicted = json.loads(before_body)["messages"][event.first]
                assert receipt["role"] == "assistant" and "tool_calls" not in receipt
                assert f"[receipt {evicted['tool_calls'][0]['id']}:" in receipt["content"]
        previous = (result, body)
    assert batches >= 5


def test_between_batches_anthropic_bodies_only_append() -> None:
    sift = ContextSift(SiftSettings(budget=4000))
    previous: tuple[SiftResult, list[tuple[str, Any]]] | None = None
    appended_only = 0
    for _, result in replay(sift, 36):
        blocks = anthropic_blocks(WIRE.anthropic_body(result))
        if previous is not None and not result.events:
            before, before_blocks = previous
            stored = before_blocks[:-1] if before.note else before_blocks
            assert blocks[: len(stored)] == stored
            appended_only += 1
        previous = (result, blocks)
    assert appended_only >= 20


def test_a_progress_note_changes_only_the_tail() -> None:
    sift = ContextSift(SiftSettings(budget=4000))
    *_, (run, _) = replay(sift, 12)
    note = "progress: call 12 of 40"
    plain = sift.trial(run.history, tools=TOOLS)
    noted = sift.trial(run.history, tools=TOOLS, note=note)

    plain_body, noted_body = WIRE.openai_body(plain), WIRE.openai_body(noted)
    assert noted_body.startswith(messages_prefix(plain_body, len(plain.messages)))
    assert json.loads(noted_body)["messages"][len(plain.messages) :] == [
        {"role": "user", "content": note}
    ]

    plain_body, noted_body = WIRE.anthropic_body(plain), WIRE.anthropic_body(noted)
    plain_json, noted_json = json.loads(plain_body), json.loads(noted_body)
    assert noted_json["system"] == plain_json["system"]
    assert noted_json["tools"] == plain_json["tools"]
    assert noted_json["messages"][:-1] == plain_json["messages"][:-1]
    assert noted_json["messages"][-1]["content"][:-1] == plain_json["messages"][-1]["content"]
    assert noted_json["messages"][-1]["content"][-1] == {"type": "text", "text": note}

    noted_result = sift.sift(run.history, tools=TOOLS, note=note)
    run.step(400)
    following = sift.sift(run.history, tools=TOOLS)
    assert not following.events
    assert following.messages[: len(noted_result.messages) - 1] == noted_result.messages[:-1]


def test_the_system_prompt_and_the_task_never_change() -> None:
    sift = ContextSift(NET_SETTINGS)
    reasons: set[str] = set()
    openai_heads: set[bytes] = set()
    anthropic_heads: set[bytes] = set()
    for _, result in replay(sift, 40):
        reasons.update(event.reason for event in result.events)
        body = WIRE.openai_body(result)
        start = body.index(b'"messages":[') + len(b'"messages":[')
        openai_heads.add(messages_prefix(body, 2)[start:])
        anthropic_body = WIRE.anthropic_body(result)
        system = encoded(json.loads(anthropic_body)["system"])
        assert system in anthropic_body
        anthropic_heads.add(system)
        first_entry = without_cache_control(json.loads(anthropic_body)["messages"][0])
        assert first_entry["role"] == "user"
        assert first_entry["content"][0] == {"type": "text", "text": TASK}
    assert reasons == {"token_budget", "overflow"}
    (openai_head,) = openai_heads
    assert json.loads(b"[" + openai_head + b"]")[1] == {"role": "user", "content": TASK}
    assert len(anthropic_heads) == 1


def test_a_held_cut_keeps_the_prefix_until_the_bound_is_breached_again() -> None:
    sift = ContextSift(SiftSettings(budget=8000, window=8000))
    run = Run.start()
    sift.begin_run(run.history)
    previous: tuple[SiftResult, bytes] | None = None
    held_calls = 0
    cuts = 0
    for _ in range(60):
        run.step(700)
        result = sift.sift(run.history, tools=TOOLS)
        body = WIRE.openai_body(result)
        assert result.tokens <= 8000 * 0.8
        if any(event.reason == "overflow" for event in result.events):
            cuts += 1
            (event,) = result.events
            assert event.tokens_before > 8000 * 0.8 >= 8000 * 0.7 >= event.tokens_after
        elif previous is not None and cuts:
            held_calls += 1
            assert sift.state.cut is not None
            assert body.startswith(messages_prefix(previous[1], len(previous[0].messages)))
        previous = (result, body)
    assert cuts >= 3
    assert held_calls >= 3 * cuts


def test_the_cut_never_drops_the_task_or_the_awaited_step() -> None:
    sift = ContextSift(SiftSettings(budget=9000, window=9000, kept_tools=frozenset({"grep"})))
    run = Run.start()
    sift.begin_run(run.history)
    for number in range(30):
        run.step(900)
        if number % 4 == 0:
            run.nudge(f"nudge {number}")
        sift.sift(run.history, tools=TOOLS)
    awaited_id = run.step(9000)
    run.nudge("You are close; finish the fix.")
    awaited = run.history[-3:]
    result = sift.sift(run.history, tools=TOOLS)
    assert result.events and result.events[0].reason in {"overflow", "fit_to_window"}
    assert result.messages[:2] == run.history[:2]
    assert result.messages[-3:] == awaited
    assert awaited[0]["tool_calls"][0]["id"] == awaited_id
    assert len(result.messages) < len(run.history)


def test_a_cut_that_cannot_reach_its_target_still_keeps_the_pinned_parts(caplog: Any) -> None:
    kept = frozenset({"grep"})  # only the net leaves steps out, and the awaited result is whole
    whole = SiftSettings(3000, 3000, bounded_chars=20_000, awaited_fraction=1.0, kept_tools=kept)
    sift = ContextSift(whole)
    run = Run.start()
    sift.begin_run(run.history)
    for _ in range(5):
        run.step(800)
    run.step(12000)
    with caplog.at_level("WARNING", logger="satchel.sift"):
        result = sift.sift(run.history, tools=TOOLS)
    assert "cannot bring the request down to its target (2100 tokens, any messages)" in caplog.text
    assert [event.reason for event in result.events] == ["fit_to_window"]
    assert result.messages[:3] == run.history[:2] + run.history[-2:-1]
    (awaited,) = result.messages[3:]
    assert awaited["tool_call_id"] == run.history[-1]["tool_call_id"]


def test_a_trial_sift_leaves_the_manager_unchanged() -> None:
    sift = ContextSift(NET_SETTINGS)
    for number, (run, note) in enumerate(script(35)):
        if number == 0:
            sift.begin_run(run.history)
        if number < 34:
            sift.sift(run.history, tools=TOOLS, note=note)
    saved, stored = sift.save(), sift.store.infos()
    trial = sift.trial(run.history, tools=TOOLS, note="n")
    assert [event.reason for event in trial.events] == ["overflow"]
    assert sift.save() == saved
    assert sift.store.infos() == stored
    real = sift.sift(run.history, tools=TOOLS, note="n")
    assert real.messages == trial.messages
    assert real.events == trial.events
    assert WIRE.openai_body(real) == WIRE.openai_body(trial)
    assert sift.save() != saved


def test_only_the_chosen_cut_commits_its_evictions() -> None:
    sift = ContextSift(NET_SETTINGS)
    for _, result in replay(sift, 40):
        if any(event.reason == "overflow" for event in result.events):
            break
    else:
        raise AssertionError("the run never reached the overflow net")
    shown_whole = {
        message["tool_calls"][0]["id"] for message in result.messages if message.get("tool_calls")
    }
    assert shown_whole
    assert not shown_whole & set(sift.state.receipts)


def test_anthropic_roles_alternate_with_the_note_last() -> None:
    sift = ContextSift(NET_SETTINGS)
    noted = 0
    for _, result in replay(sift, 36):
        body = json.loads(WIRE.anthropic_body(result))
        roles = [entry["role"] for entry in body["messages"]]
        assert roles[0] == "user"
        assert all(a != b for a, b in itertools.pairwise(roles))
        breakpoints = json.dumps(body).count('"cache_control"')
        assert 3 <= breakpoints <= 4
        if result.note:
            noted += 1
            last = body["messages"][-1]
            assert last["role"] == "user"
            assert last["content"][-1] == {
                "type": "text",
                "text": result.messages[-1]["content"],
            }
            assert "cache_control" not in last["content"][-1]
    assert noted >= 10


def _shuffled_arguments(rng: random.Random, path: str) -> str:
    """The same arguments in a random key order and spacing, with `1.50` written as such."""
    items = [('"path"', json.dumps(path)), ('"limit"', "1.50"), ('"offset"', "10")]
    items.append(('"mode"', '"text"'))
    rng.shuffle(items)
    colon = rng.choice((":", ": "))
    return "{" + rng.choice((",", ", ")).join(f"{key}{colon}{value}" for key, value in items) + "}"


def test_two_hundred_builds_of_one_call_give_one_body() -> None:
    rng = random.Random(3)
    reference = Run.start()
    for number in range(8):
        reference.step(rng.choice((600, 3000, 11000)), tool="read_file", path=f"src/{number}.py")
    openai_bodies, anthropic_bodies = set(), set()
    for _ in range(200):
        history = copy.deepcopy(reference.history)
        for message in history:
            for call in message.get("tool_calls", []):
                path = json.loads(call["function"]["arguments"])["path"]
                call["function"]["arguments"] = _shuffled_arguments(rng, path)
        sift = ContextSift(SiftSettings(budget=3000))
        sift.begin_run(history[:2])
        result = sift.sift(history, tools=TOOLS, note="progress")
        openai_bodies.add(WIRE.openai_body(result))
        anthropic_bodies.add(WIRE.anthropic_body(result))
    assert len(openai_bodies) == len(anthropic_bodies) == 1
    (body,) = openai_bodies
    assert b'{\\"limit\\":1.50,\\"mode\\":\\"text\\",\\"offset\\":10,\\"path\\":' in body


def test_save_restore_and_continue_gives_the_same_bodies_as_never_stopping() -> None:
    settings = NET_SETTINGS
    straight = [
        (WIRE.openai_body(result), WIRE.anthropic_body(result))
        for _, result in replay(ContextSift(settings), 40)
    ]
    first = ContextSift(settings)
    sift = first
    resumed = []
    for number, (run, note) in enumerate(script(40)):
        if number == 0:
            first.begin_run(run.history)
        if number == 36:
            saved = first.save()
            assert json.loads(saved)["cut"] is not None
            sift = ContextSift(settings)
            sift.restore(saved)
        result = sift.sift(run.history, tools=TOOLS, note=note)
        resumed.append((WIRE.openai_body(result), WIRE.anthropic_body(result)))
    assert resumed == straight
