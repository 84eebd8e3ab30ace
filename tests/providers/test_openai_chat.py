"""`openai.chat_completions.v1` through the real SDK: the accepted window, retries, trimming."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_kit import (
    ROLLING,
    action,
    adapter,
    assistant,
    dumps,
    estimate,
    profile,
    run_once,
    sent,
    session,
    system,
    user,
)

from chatwire import Answer, ChatServer, Failure
from satchel.providers import Profile
from satchel.turns import (
    InterruptedStreamError,
    InvalidResponseError,
    RuntimeState,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
PREAMBLE = system("You play the game. Answer with one ACTION.")


def rolling(stream: bool, limit: int | None = None, fraction: float | None = None) -> Profile:
    edits: dict[str, object] = {}
    if limit is not None:
        edits["runtime.trim.limit_tokens"] = limit
    if fraction is not None:
        edits["runtime.trim.target_fraction"] = fraction
    return profile(ROLLING, stream=stream, settings=edits)


def padded(label: str, size: int) -> str:
    return (label + " " + "x" * size)[:size]


def check_boundaries(state: RuntimeState) -> None:
    """Boundaries are contiguous, cover the window, and show exactly the messages they index."""
    messages = state.payload["messages"]
    position = 0
    for turn in state.accepted_turns:
        assert turn.start_item == position
        assert list(turn.messages) == messages[turn.start_item : turn.end_item]
        position = turn.end_item
    assert position == len(messages)


@STREAM
def test_requests_carry_preamble_prior_inputs_and_visible_replies(stream: bool) -> None:
    server = ChatServer(
        Answer("ACTION1", reasoning="hidden-1"),
        Answer("ACTION2", reasoning="hidden-2", reasoning_fields=("reasoning",)),
        Answer("ACTION3"),
    )
    run = session(rolling(stream), server)
    run.turn([PREAMBLE, user("frame 1")], action)
    run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert sent(server, 0) == [PREAMBLE, user("frame 1")]
    assert sent(server, 1) == [PREAMBLE, user("frame 1"), assistant("ACTION1"), user("frame 2")]
    assert sent(server, 2) == [
        PREAMBLE,
        user("frame 1"),
        assistant("ACTION1"),
        user("frame 2"),
        assistant("ACTION2"),
        user("frame 3"),
    ]
    assert "hidden" not in json.dumps(server.requests)
    for body in server.requests:
        assert body["model"] == "gpt-5-mini"
        assert body["max_completion_tokens"] == 16000
        if stream:
            assert body["stream"] is True
            assert body["stream_options"] == {"include_usage": True}
        else:
            assert not body.get("stream")
            assert "stream_options" not in body
    assert run.state.payload["preamble"] == [PREAMBLE]
    check_boundaries(run.state)


@STREAM
def test_buffered_inputs_lead_the_next_request_and_join_its_turn(stream: bool) -> None:
    server = ChatServer(Answer("ACTION1"), Answer("ACTION2"))
    run = session(rolling(stream), server)
    run.turn([PREAMBLE, user("frame 1")], action)
    run.buffer([user("GAME_OVER: reset")])
    run.turn([user("frame 2")], action)

    assert sent(server)[-3:] == [assistant("ACTION1"), user("GAME_OVER: reset"), user("frame 2")]
    last = run.state.accepted_turns[-1]
    assert list(last.messages) == [user("GAME_OVER: reset"), user("frame 2"), assistant("ACTION2")]
    assert run.state.payload["pending"] == []


FAILURES = [
    pytest.param(Answer("INVALID canary-invalid"), id="invalid-answer"),
    pytest.param(Failure(500, message="canary-500", type="server_error"), id="http-500"),
    pytest.param(Answer("ACTION canary-truncated", finish_reason="length"), id="truncated"),
    pytest.param(Answer("", refusal="canary-refusal"), id="refusal"),
    pytest.param(Answer("   ", reasoning="canary-empty"), id="empty"),
]


@STREAM
@pytest.mark.parametrize("failure", FAILURES)
def test_a_failed_attempt_never_reaches_a_later_request(stream: bool, failure: object) -> None:
    server = ChatServer(Answer("ACTION1"), failure, Answer("ACTION2"), Answer("ACTION3"))
    run = session(rolling(stream), server)
    run.turn([PREAMBLE, user("frame 1")], action)
    accepted = run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert accepted.attempts == 2
    assert dumps(sent(server, 1)) == dumps(sent(server, 2))
    assert sent(server, 3) == [
        PREAMBLE,
        user("frame 1"),
        assistant("ACTION1"),
        user("frame 2"),
        assistant("ACTION2"),
        user("frame 3"),
    ]
    assert "canary" not in json.dumps(server.requests[2:])
    assert "canary" not in json.dumps(run.state.to_json())


def test_an_interrupted_stream_never_reaches_a_later_request() -> None:
    server = ChatServer(
        Answer("ACTION1"),
        Answer("ACTION canary-interrupted-answer", interrupt_after=2),
        Answer("ACTION2"),
        Answer("ACTION3"),
    )
    run = session(rolling(True), server)
    run.turn([PREAMBLE, user("frame 1")], action)
    accepted = run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert accepted.attempts == 2
    assert accepted.failures[0].kind == "interrupted_stream"
    assert dumps(sent(server, 1)) == dumps(sent(server, 2))
    assert "canary" not in json.dumps(server.requests[2:])


def test_streamed_result_waits_for_the_finish_reason_and_the_usage_chunk() -> None:
    server = ChatServer(
        Answer("ACTION1", prompt_tokens=321, completion_tokens=45, cached_tokens=300)
    )
    result = run_once(adapter(rolling(True), server), [PREAMBLE, user("frame 1")])

    assert result.response.text == "ACTION1"
    assert result.response.finish_reason == "stop"
    assert result.usage == Usage(
        input_tokens=321,
        output_tokens=45,
        total_tokens=366,
        cache_read_tokens=300,
        requests=1,
    )


def test_stream_that_breaks_before_the_usage_chunk_is_interrupted() -> None:
    # chunks: role, "ACTION1", finish reason, usage; the connection drops before the usage
    server = ChatServer(Answer("ACTION1", interrupt_after=3))
    with pytest.raises(InterruptedStreamError) as caught:
        run_once(adapter(rolling(True), server), [user("frame 1")])
    assert caught.value.usage is None


def test_stream_that_ends_without_usage_is_refused() -> None:
    server = ChatServer(Answer("ACTION1", usage=False))
    with pytest.raises(InvalidResponseError):
        run_once(adapter(rolling(True), server), [user("frame 1")])


def test_stream_options_are_forced_to_include_usage() -> None:
    prof = profile(ROLLING, settings={"request.stream_options": {"include_obfuscation": False}})
    server = ChatServer(Answer("ACTION1"))
    run_once(adapter(prof, server), [user("frame 1")])
    assert server.requests[0]["stream_options"] == {
        "include_obfuscation": False,
        "include_usage": True,
    }


@STREAM
def test_trim_leaves_out_oldest_turns_to_the_target_and_holds_the_cut(stream: bool) -> None:
    # preamble 14 tokens; every input and answer 24 tokens: requests grow 38, 86, 134, 182, 230
    preamble = system(padded("sys", 35))
    frames = [user(padded(f"frame {n}", 70)) for n in range(1, 10)]
    answers = [padded(f"ACTION {n}", 70) for n in range(1, 10)]
    server = ChatServer(*(Answer(text) for text in answers))
    run = session(rolling(stream, limit=200, fraction=0.5), server)
    pruned = []
    for n, frame in enumerate(frames):
        accepted = run.turn([preamble, frame] if n == 0 else [frame], action)
        pruned.append(accepted.result.telemetry.items_pruned)
        check_boundaries(run.state)

    def turn(n: int) -> list[dict[str, str]]:
        return [frames[n - 1], assistant(answers[n - 1])]

    assert sent(server, 3) == [preamble, *turn(1), *turn(2), *turn(3), frames[3]]
    assert estimate([*sent(server, 3), assistant(answers[3]), frames[4]]) > 200
    assert sent(server, 4) == [preamble, *turn(4), frames[4]]
    assert sent(server, 5) == [preamble, *turn(4), *turn(5), frames[5]]
    assert sent(server, 6) == [preamble, *turn(4), *turn(5), *turn(6), frames[6]]
    assert sent(server, 7) == [preamble, *turn(7), frames[7]]
    assert pruned == [0, 0, 0, 0, 6, 0, 0, 6, 0]
    for before, after in zip(server.requests, server.requests[1:], strict=False):
        previous = before["messages"]
        current = after["messages"]
        assert current[0] == preamble
        if len(current) > len(previous):
            assert dumps(current[: len(previous)]) == dumps(previous)
    assert [list(t.messages) for t in run.state.accepted_turns] == [turn(7), turn(8), turn(9)]


def test_trim_never_drops_the_preamble_even_when_every_turn_goes() -> None:
    preamble = system("rules")
    server = ChatServer(Answer("ACTION1"), Answer("ACTION2"), Answer("ACTION3"))
    run = session(rolling(True, limit=60, fraction=0.5), server)
    run.turn([preamble, user("frame 1")], action)
    run.turn([user("y" * 300)], action)
    run.turn([user("frame 3")], action)

    assert sent(server, 1) == [preamble, user("y" * 300)]
    assert sent(server, 2) == [preamble, user("frame 3")]
    assert [list(t.messages) for t in run.state.accepted_turns] == [
        [user("frame 3"), assistant("ACTION3")]
    ]
    check_boundaries(run.state)


def test_a_later_system_message_is_trimmed_with_its_turn_after_a_full_trim() -> None:
    """Only system messages sent before the first accepted turn are pinned as the preamble."""
    server = ChatServer(*(Answer(f"ACTION{n}") for n in range(1, 6)))
    run = session(rolling(True, limit=100, fraction=0.5), server)
    run.turn([user("frame 1")], action)
    run.turn([user("z" * 400)], action)
    run.turn([system("note for turn 3"), user("frame 3")], action)

    assert run.state.payload["preamble"] == []
    assert list(run.state.accepted_turns[-1].messages) == [
        system("note for turn 3"),
        user("frame 3"),
        assistant("ACTION3"),
    ]
    run.turn([user("w" * 300)], action)
    assert "note for turn 3" not in json.dumps(sent(server))


turn_sizes = st.lists(
    st.tuples(
        st.lists(st.integers(min_value=1, max_value=160), min_size=1, max_size=3),
        st.integers(min_value=1, max_value=160),
    ),
    min_size=1,
    max_size=9,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    sizes=turn_sizes,
    preamble_size=st.integers(min_value=0, max_value=80),
    limit=st.integers(min_value=40, max_value=260),
    fraction=st.floats(min_value=0.2, max_value=1.0),
    stream=st.booleans(),
)
def test_trimming_keeps_requests_prefix_stable_until_the_limit_is_breached(
    sizes: list[tuple[list[int], int]],
    preamble_size: int,
    limit: int,
    fraction: float,
    stream: bool,
) -> None:
    target = int(limit * fraction)
    preamble = [system(padded("sys", preamble_size))] if preamble_size else []
    script = []
    for n, (input_sizes, answer_size) in enumerate(sizes):
        inputs = [user(padded(f"t{n}m{k}", size)) for k, size in enumerate(input_sizes)]
        script.append((inputs, padded(f"ACTION t{n}", max(answer_size, 9))))
    server = ChatServer(*(Answer(answer) for _, answer in script))
    run = session(rolling(stream, limit=limit, fraction=fraction), server)

    window: list[list[dict[str, str]]] = []
    previous: list[dict[str, str]] | None = None
    for n, (inputs, answer) in enumerate(script):
        run.turn([*preamble, *inputs] if n == 0 else inputs, action)
        request = sent(server, n)

        def carried(turns: list[list[dict[str, str]]], new=inputs) -> list[dict[str, str]]:
            return [*preamble, *(m for turn in turns for m in turn), *new]

        if estimate(carried(window)) <= limit:
            assert request == carried(window)
            if previous is not None:
                assert dumps(request[: len(previous) + 1]) == dumps(
                    [*previous, assistant(window[-1][-1]["content"])]
                )
        else:
            dropped = 1
            while dropped < len(window) and estimate(carried(window[dropped:])) > target:
                dropped += 1
            assert request == carried(window[dropped:])
            window = window[dropped:]
        assert request[: len(preamble)] == preamble
        window.append([*inputs, assistant(answer)])
        previous = request
        assert [list(t.messages) for t in run.state.accepted_turns] == window
        check_boundaries(run.state)


def test_retry_after_a_trim_sends_the_same_trimmed_request() -> None:
    server = ChatServer(Answer("ACTION1"), Answer("INVALID"), Answer("ACTION2"))
    run = session(rolling(True, limit=40, fraction=0.5), server)
    run.turn([user("a" * 50)], action)
    accepted = run.turn([user("b" * 50)], action)

    assert accepted.attempts == 2
    assert sent(server, 1) == sent(server, 2) == [user("b" * 50)]
    assert [list(t.messages) for t in run.state.accepted_turns] == [
        [user("b" * 50), assistant("ACTION2")]
    ]
