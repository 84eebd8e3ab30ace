"""`open_source.chat_completions.v1` through the real SDK: exact reasoning replay and refusals."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_kit import (
    OPEN,
    action,
    adapter,
    assistant,
    profile,
    run_once,
    sent,
    session,
    system,
    user,
)

from chatwire import Answer, ChatServer
from satchel.providers import Profile
from satchel.turns import (
    AttemptError,
    InterruptedStreamError,
    InvalidResponseError,
    RefusalError,
    TruncatedError,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
PREAMBLE = system("You play the game. Answer with one ACTION.")
FIELDS = {
    "reasoning_content": ("reasoning_content",),
    "reasoning": ("reasoning",),
    "both": ("reasoning_content", "reasoning"),
}


def open_source(stream: bool, aliases: tuple[str, ...] | None = None) -> Profile:
    edits = {} if aliases is None else {"runtime.reasoning_replay": list(aliases)}
    return profile(OPEN, stream=stream, settings=edits)


@STREAM
@pytest.mark.parametrize("served", FIELDS, ids=lambda k: f"served-{k}")
@pytest.mark.parametrize("replayed", FIELDS, ids=lambda k: f"replayed-{k}")
def test_reasoning_is_replayed_exactly_under_the_configured_aliases(
    stream: bool, served: str, replayed: str
) -> None:
    thought = "  Step 1: look left.\n\n\tStep 2: the door is at (3, 4).  \n"
    server = ChatServer(
        Answer("ACTION1", reasoning=thought, reasoning_fields=FIELDS[served]),
        Answer("ACTION2", reasoning="second", reasoning_fields=FIELDS[served]),
        Answer("ACTION3"),
    )
    run = session(open_source(stream, FIELDS[replayed]), server)
    first = run.turn([PREAMBLE, user("frame 1")], action)
    run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert first.response.reasoning == thought
    replay = dict.fromkeys(FIELDS[replayed], thought)
    assert sent(server, 1) == [
        PREAMBLE,
        user("frame 1"),
        assistant("ACTION1", **replay),
        user("frame 2"),
    ]
    assert sent(server, 2) == [
        PREAMBLE,
        user("frame 1"),
        assistant("ACTION1", **replay),
        user("frame 2"),
        assistant("ACTION2", **dict.fromkeys(FIELDS[replayed], "second")),
        user("frame 3"),
    ]
    assert run.state.accepted_turns[0].reasoning_summary == thought


def test_reasoning_is_replayed_exactly_when_streamed_and_json() -> None:
    """The streamed request history and the JSON one are identical."""
    histories = []
    for stream in (True, False):
        server = ChatServer(Answer("ACTION1", reasoning="r " * 20), Answer("ACTION2"))
        run = session(open_source(stream), server)
        run.turn([user("frame 1")], action)
        run.turn([user("frame 2")], action)
        histories.append(json.dumps(sent(server)))
    assert histories[0] == histories[1]


def test_an_answer_without_reasoning_is_replayed_without_reasoning_fields() -> None:
    server = ChatServer(Answer("ACTION1"), Answer("ACTION2"))
    run = session(open_source(True, FIELDS["both"]), server)
    run.turn([user("frame 1")], action)
    run.turn([user("frame 2")], action)
    assert sent(server)[1] == assistant("ACTION1")


@STREAM
def test_identical_reasoning_under_both_fields_is_accepted(stream: bool) -> None:
    server = ChatServer(Answer("ACTION1", reasoning="same", reasoning_fields=FIELDS["both"]))
    result = run_once(adapter(open_source(stream), server), [user("frame 1")])
    assert result.response.reasoning == "same"


reasoning_text = st.text(
    alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=120
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    thought=reasoning_text,
    served=st.sampled_from(sorted(FIELDS)),
    replayed=st.sampled_from(sorted(FIELDS)),
    stream=st.booleans(),
)
def test_random_unicode_reasoning_is_replayed_exactly(
    thought: str, served: str, replayed: str, stream: bool
) -> None:
    server = ChatServer(
        Answer("ACTION1", reasoning=thought, reasoning_fields=FIELDS[served]), Answer("ACTION2")
    )
    run = session(open_source(stream, FIELDS[replayed]), server)
    first = run.turn([user("frame 1")], action)
    run.turn([user("frame 2")], action)

    assert first.response.reasoning == thought
    replayed_message = sent(server)[1]
    assert replayed_message == assistant("ACTION1", **dict.fromkeys(FIELDS[replayed], thought))
    for name in FIELDS[replayed]:
        assert replayed_message[name].encode("utf-8") == thought.encode("utf-8")


REFUSED = [
    pytest.param(Answer("ACTION1", tool_call=True), InvalidResponseError, id="tool-call"),
    pytest.param(
        Answer("ACTION1", tool_call=True, finish_reason="tool_calls"),
        InvalidResponseError,
        id="tool-calls-finish",
    ),
    pytest.param(Answer("", refusal="I will not play."), RefusalError, id="refusal"),
    pytest.param(
        Answer("ACTION1", refusal="I will not play."), RefusalError, id="refusal-with-text"
    ),
    pytest.param(
        Answer("ACTION1", finish_reason="content_filter"), RefusalError, id="content-filter"
    ),
    pytest.param(
        Answer("ACTION1", reasoning="left", message_extra={"reasoning": "right"}),
        InvalidResponseError,
        id="conflicting-reasoning",
    ),
    pytest.param(Answer("ACTION1", finish_reason="length"), TruncatedError, id="length"),
    pytest.param(Answer("ACTION1", finish_reason="abort"), InvalidResponseError, id="abort"),
    pytest.param(Answer("ACTION1", usage=False), InvalidResponseError, id="no-usage"),
    pytest.param(Answer(""), InvalidResponseError, id="empty"),
    pytest.param(Answer(" \n\t ", reasoning="thinking"), InvalidResponseError, id="blank"),
]


@STREAM
@pytest.mark.parametrize(("answer", "error"), REFUSED)
def test_unacceptable_answers_are_refused(
    stream: bool, answer: Answer, error: type[AttemptError]
) -> None:
    server = ChatServer(answer)
    with pytest.raises(AttemptError) as caught:
        run_once(adapter(open_source(stream), server), [user("frame 1")])
    assert type(caught.value) is error
    if answer.usage:
        assert caught.value.usage == Usage(
            input_tokens=10, output_tokens=5, total_tokens=15, requests=1
        )


def test_json_answer_without_finish_reason_is_refused() -> None:
    server = ChatServer(Answer("ACTION1", finish_reason=None))
    with pytest.raises(InvalidResponseError):
        run_once(adapter(open_source(False), server), [user("frame 1")])


def test_stream_without_finish_reason_is_interrupted() -> None:
    server = ChatServer(Answer("ACTION1", finish_reason=None))
    with pytest.raises(InterruptedStreamError):
        run_once(adapter(open_source(True), server), [user("frame 1")])


@pytest.mark.parametrize("chunks", [1, 3, 4, 5], ids=lambda n: f"after-{n}-chunks")
def test_interrupted_stream_is_refused(chunks: int) -> None:
    # chunks: role, 2 reasoning pieces, "ACTION1", finish reason, usage
    server = ChatServer(Answer("ACTION1", reasoning="r" * 10, interrupt_after=chunks))
    with pytest.raises(InterruptedStreamError) as caught:
        run_once(adapter(open_source(True), server), [user("frame 1")])
    assert caught.value.usage is None


def test_stream_that_ends_without_the_usage_chunk_is_refused() -> None:
    server = ChatServer(Answer("ACTION1", reasoning="r", usage=False))
    with pytest.raises(InvalidResponseError):
        run_once(adapter(open_source(True), server), [user("frame 1")])


@STREAM
@pytest.mark.parametrize("answer", [p.values[0] for p in REFUSED], ids=[p.id for p in REFUSED])
def test_a_refused_attempt_never_reaches_a_later_request(stream: bool, answer: Answer) -> None:
    text = "ACTION canary-text" if answer.text.strip() else answer.text
    bad = dataclasses.replace(answer, text=text, reasoning="canary-reasoning")
    server = ChatServer(
        Answer("ACTION1", reasoning="r1"),
        bad,
        Answer("ACTION2", reasoning="r2"),
        Answer("ACTION3"),
    )
    run = session(open_source(stream), server)
    run.turn([user("frame 1")], action)
    accepted = run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert accepted.attempts == 2
    assert sent(server, 1) == sent(server, 2)
    assert "canary" not in json.dumps(server.requests[2:])
    assert "canary" not in json.dumps(run.state.to_json())
    assert sent(server)[-2] == assistant("ACTION2", reasoning_content="r2")
