"""`deepseek.chat_completions.v1` through the real SDK: the owned answer tool, exact reasoning
replay with the call and its result, usage, and the harness-summary capability."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_kit import DEEPSEEK, action, adapter, profile, run_once, sent, system, user

from chatwire import (
    DEEPSEEK_MODEL,
    Answer,
    Call,
    Called,
    ChatServer,
    DeepSeekServer,
    Failure,
    answer,
)
from satchel.providers.chat.deepseek_chat import DeepSeekChatAdapter
from satchel.providers.chat.deepseek_state import ANSWER_TOOL, ANSWER_TOOL_NAME, TOOL_RESULT
from satchel.turns import (
    AttemptError,
    ConfigurationError,
    InvalidResponseError,
    RefusalError,
    RetryPolicy,
    RuntimeState,
    Session,
    StateError,
    SummaryCompactionAdapter,
    TruncatedError,
    TurnFailed,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
PREAMBLE = system("You play the game. Answer with one ACTION.")
PENDING = user("GAME_OVER: the level restarts")
THINKING = {"type": "enabled"}
BILLED = Usage(
    input_tokens=100,
    output_tokens=20,
    total_tokens=120,
    reasoning_tokens=12,
    cache_read_tokens=64,
    requests=1,
)


def deepseek(server: ChatServer, *, stream: bool = True, **request: Any) -> DeepSeekChatAdapter:
    client = openai.OpenAI(
        api_key="sk-test-key",
        base_url="https://api.deepseek.com",
        http_client=server.client(),
        max_retries=0,
    )
    body = {
        "model": DEEPSEEK_MODEL,
        "max_tokens": 32768,
        **({"stream": True} if stream else {}),
        **request,
    }
    return DeepSeekChatAdapter(client, body, summary_max_tokens=4000)


def session(adapt: DeepSeekChatAdapter, **kwargs: Any) -> Session:
    return Session(adapt, sleep=lambda seconds: None, **kwargs)


def assistant(text: str, reasoning: str | None = "thinking", call_id: str = "call_00_1") -> Any:
    """The assistant message an accepted `answer(text, reasoning, call_id)` is replayed as."""
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    arguments = json.dumps({"answer": text})
    message["tool_calls"] = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": ANSWER_TOOL_NAME, "arguments": arguments},
        }
    ]
    return message


def result(call_id: str = "call_00_1") -> dict[str, str]:
    return {"role": "tool", "tool_call_id": call_id, "content": TOOL_RESULT}


def frozen(state: RuntimeState) -> str:
    return json.dumps(state.to_json(), sort_keys=True)


# -- replay -------------------------------------------------------------------------------------


@STREAM
def test_reasoning_tool_call_and_result_are_replayed_exactly(stream: bool) -> None:
    thought = "  Step 1: look left.\n\n\tStep 2: the door is at (3, 4). ✓ \n"
    arguments = '{"answer":  "ACTION1 \\u00e9"}'  # odd spacing and escapes, kept as sent
    server = DeepSeekServer(
        Called((Call("call_00_a", arguments=arguments),), thought, content="Let me move."),
        answer("ACTION2", "second", "call_00_b"),
        answer("ACTION3", None, "call_00_c"),
    )
    run = session(deepseek(server, stream=stream))
    first = run.turn([PREAMBLE, user("frame 1")], action)
    run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert first.response.text == "ACTION1 é"
    assert first.response.reasoning == thought
    replayed = {
        "role": "assistant",
        "content": "Let me move.",
        "reasoning_content": thought,
        "tool_calls": [
            {
                "id": "call_00_a",
                "type": "function",
                "function": {"name": ANSWER_TOOL_NAME, "arguments": arguments},
            }
        ],
    }
    expected = [PREAMBLE, user("frame 1"), replayed, result("call_00_a"), user("frame 2")]
    assert sent(server, 1) == expected
    assert json.dumps(sent(server, 1), ensure_ascii=False) == json.dumps(
        expected, ensure_ascii=False
    )
    assert sent(server, 1)[2]["reasoning_content"].encode() == thought.encode()
    assert sent(server, 2) == [
        *expected,
        assistant("ACTION2", "second", "call_00_b"),
        result("call_00_b"),
        user("frame 3"),
    ]
    turn = run.state.accepted_turns[0]
    assert turn.reasoning_summary == thought
    assert [m["role"] for m in turn.messages] == ["user", "assistant", "tool"]
    assert turn.messages[1]["reasoning"] == thought
    assert "reasoning_content" not in turn.messages[1]
    assert run.state.payload["messages"][-2:] == [
        assistant("ACTION3", None, "call_00_c"),
        result("call_00_c"),
    ]


def test_streamed_and_json_requests_are_identical() -> None:
    histories = []
    for stream in (True, False):
        server = DeepSeekServer(answer("ACTION1", "r " * 20), answer("ACTION2"))
        run = session(deepseek(server, stream=stream))
        run.turn([user("frame 1")], action)
        run.turn([user("frame 2")], action)
        histories.append(json.dumps(sent(server)))
    assert histories[0] == histories[1]


@STREAM
def test_a_null_content_is_replayed_as_an_empty_string(stream: bool) -> None:
    server = DeepSeekServer(dataclasses.replace(answer("ACTION1"), content=None), answer("A2"))
    run = session(deepseek(server, stream=stream))
    run.turn([user("frame 1")], action)
    run.turn([user("frame 2")], lambda response: response.text)
    assert sent(server)[1] == assistant("ACTION1")


# -- the request --------------------------------------------------------------------------------


@STREAM
def test_every_request_carries_the_owned_tool_and_thinking(stream: bool) -> None:
    server = DeepSeekServer(answer("ACTION1"), answer("ACTION2"))
    run = session(deepseek(server, stream=stream, extra_body={"top_k": 5}))
    run.turn([user("frame 1")], action)
    run.turn([user("frame 2")], action)
    for body in server.requests:
        assert body["tools"] == [ANSWER_TOOL]
        assert "tool_choice" not in body
        assert body["thinking"] == THINKING
        assert body["top_k"] == 5
        assert bool(body.get("stream")) is stream
        if stream:
            assert body["stream_options"] == {"include_usage": True}


def test_an_explicitly_enabled_thinking_is_accepted() -> None:
    adapt = deepseek(DeepSeekServer(), extra_body={"thinking": {"type": "enabled"}})
    assert adapt.request["extra_body"] == {"thinking": THINKING}


@pytest.mark.parametrize("key", ["tools", "tool_choice", "functions", "function_call", "messages"])
@pytest.mark.parametrize("where", ["request", "request.extra_body"])
def test_the_profile_may_not_set_tools_or_messages(key: str, where: str) -> None:
    setting = {key: [] if key != "tool_choice" else "auto"}
    request = setting if where == "request" else {"extra_body": setting}
    with pytest.raises(ConfigurationError, match=rf"^{where}\.{key}: .*owns the one tool"):
        deepseek(DeepSeekServer(), **request)


@pytest.mark.parametrize(
    "thinking", [{"type": "disabled"}, {"type": "enabled", "budget": 3}, "enabled", None]
)
def test_thinking_other_than_enabled_is_refused(thinking: object) -> None:
    with pytest.raises(ConfigurationError, match=r"^request\.extra_body\.thinking: "):
        deepseek(DeepSeekServer(), extra_body={"thinking": thinking})


def test_the_base_streaming_rules_still_hold() -> None:
    with pytest.raises(ConfigurationError, match="include_usage"):
        deepseek(DeepSeekServer(), stream_options={"include_usage": False})
    with pytest.raises(ConfigurationError, match="stream_options"):
        deepseek(DeepSeekServer(), stream=False, stream_options={"include_usage": True})


# -- the one-call rule --------------------------------------------------------------------------

REFUSED = [
    pytest.param(
        Called((), content="ACTION1", finish_reason="stop"), InvalidResponseError, id="no-call"
    ),
    pytest.param(Called(()), InvalidResponseError, id="no-call-tool-calls-finish"),
    pytest.param(
        Called((Call("call_00_1"), Call("call_00_2"))), InvalidResponseError, id="two-calls"
    ),
    pytest.param(Called((Call(name="move"),)), InvalidResponseError, id="other-tool"),
    pytest.param(Called((Call(arguments='{"answer": "ACT'),)), InvalidResponseError, id="not-json"),
    pytest.param(
        Called((Call(arguments='{"move": "ACTION1"}'),)), InvalidResponseError, id="no-answer"
    ),
    pytest.param(
        Called((Call(arguments='{"answer": "ACTION1", "why": "x"}'),)),
        InvalidResponseError,
        id="extra-key",
    ),
    pytest.param(Called((Call(arguments='{"answer": " "}'),)), InvalidResponseError, id="blank"),
    pytest.param(Called((Call(arguments='{"answer": 1}'),)), InvalidResponseError, id="number"),
    pytest.param(Called((Call(arguments='["ACTION1"]'),)), InvalidResponseError, id="array"),
    pytest.param(Called((Call(id=None),)), InvalidResponseError, id="missing-id"),
    pytest.param(Called(finish_reason="stop"), InvalidResponseError, id="call-with-stop"),
    pytest.param(Called(finish_reason="length"), TruncatedError, id="length"),
    pytest.param(Called(finish_reason="content_filter"), RefusalError, id="content-filter"),
    pytest.param(Called(usage=None), InvalidResponseError, id="no-usage"),
]


@STREAM
@pytest.mark.parametrize(("reply", "error"), REFUSED)
def test_anything_but_one_good_answer_call_is_refused(
    stream: bool, reply: Called, error: type[AttemptError]
) -> None:
    server = DeepSeekServer(answer("ACTION1"), reply)
    adapt = deepseek(server, stream=stream)
    state = run_once(adapt, [user("frame 1")]).provisional_state
    before = frozen(state)
    with pytest.raises(AttemptError) as caught:
        run_once(adapt, [user("frame 2")], state)
    assert type(caught.value) is error
    assert caught.value.usage == (BILLED if reply.usage is not None else None)
    assert frozen(state) == before


def test_a_streamed_call_whose_id_changes_midway_is_refused() -> None:
    server = DeepSeekServer(Called((Call("call_00_1", later_id="call_00_9"),)))
    with pytest.raises(InvalidResponseError, match="conflicting ids"):
        run_once(deepseek(server), [user("frame 1")])


@STREAM
@pytest.mark.parametrize("reply", [p.values[0] for p in REFUSED], ids=[p.id for p in REFUSED])
def test_a_refused_attempt_never_reaches_a_later_request(stream: bool, reply: Called) -> None:
    canary = [dataclasses.replace(c, arguments=c.arguments + " canary") for c in reply.calls]
    bad = dataclasses.replace(reply, reasoning="canary-reasoning", calls=tuple(canary))
    server = DeepSeekServer(
        answer("ACTION1", "r1", "call_1"),
        bad,
        answer("ACTION2", "r2", "call_2"),
        answer("ACTION3", "r3", "call_3"),
    )
    run = session(deepseek(server, stream=stream))
    run.turn([user("frame 1")], action)
    accepted = run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)

    assert accepted.attempts == 2
    assert accepted.action == "ACTION2"
    assert sent(server, 1) == sent(server, 2)
    assert "canary" not in json.dumps(server.requests[2:])
    assert "canary" not in json.dumps(run.state.to_json())
    assert sent(server)[-3:-1] == [assistant("ACTION2", "r2", "call_2"), result("call_2")]


# -- the state ----------------------------------------------------------------------------------


def accepted_state() -> tuple[DeepSeekChatAdapter, RuntimeState]:
    server = DeepSeekServer(answer("ACTION1"))
    adapt = deepseek(server)
    run = session(adapt)
    run.turn([PREAMBLE, user("frame 1")], action)
    return adapt, run.state


def test_an_accepted_state_survives_json_and_is_checked() -> None:
    adapt, state = accepted_state()
    again = RuntimeState.from_json(json.loads(json.dumps(state.to_json())))
    adapt.check_state(again)
    assert again.payload["messages"] == [user("frame 1"), assistant("ACTION1"), result()]


@pytest.mark.parametrize(
    ("index", "edit", "path"),
    [
        (1, {"refusal": None}, r"messages\[1\]\.refusal"),
        (2, {"name": "x"}, r"messages\[2\]\.name"),
        (2, {"tool_call_id": None}, r"messages\[2\]\.tool_call_id"),
        (2, {"tool_call_id": "call_other"}, r"messages\[2\]\.tool_call_id: does not answer"),
        (
            1,
            {
                "tool_calls": [
                    {"id": 7, "type": "function", "function": {"name": "n", "arguments": ""}}
                ]
            },
            r"messages\[1\]\.tool_calls\[0\]: expected string",
        ),
        (0, {"role": "tool", "tool_call_id": "call_00_1"}, r"messages\[0\]\.tool_call_id"),
        (1, {"tool_calls": {}}, r"messages\[1\]\.tool_calls"),
        (1, {"tool_calls": [{"id": "c", "type": "function"}]}, r"messages\[1\]\.tool_calls\[0\]"),
        (
            1,
            {"tool_calls": [{"id": "c", "type": "function", "function": {"name": "n"}}]},
            r"messages\[1\]\.tool_calls\[0\]\.function",
        ),
        (0, {"role": "developer"}, r"messages\[0\]: "),
        (0, {"tool_calls": []}, r"messages\[0\]\.tool_calls"),
    ],
)
def test_the_state_check_refuses_what_the_adapter_does_not_carry(
    index: int, edit: dict[str, Any], path: str
) -> None:
    adapt, state = accepted_state()
    messages = [dict(m) for m in state.payload["messages"]]
    messages[index].update(edit)
    broken = RuntimeState(
        state.adapter_id,
        state.strategy,
        {**state.payload, "messages": messages},
        state.accepted_turns,
    )
    with pytest.raises(StateError, match=rf"^RuntimeState\.payload\.{path}"):
        adapt.check_state(broken)


# -- usage --------------------------------------------------------------------------------------


@STREAM
@pytest.mark.parametrize(
    ("extra", "cached"),
    [
        ({"prompt_cache_hit_tokens": 80, "prompt_cache_miss_tokens": 20}, 80),
        ({"prompt_tokens_details": {"cached_tokens": 50}, "prompt_cache_hit_tokens": 80}, 80),
        ({"prompt_tokens_details": {"cached_tokens": 50}, "prompt_cache_hit_tokens": 0}, 0),
        ({"prompt_tokens_details": {"cached_tokens": 50}}, 50),
    ],
    ids=["hit-only", "hit-wins", "hit-zero", "standard-only"],
)
def test_cache_hits_are_read_from_deepseeks_usage_fields(
    stream: bool, extra: dict[str, Any], cached: int
) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, **extra}
    server = DeepSeekServer(dataclasses.replace(answer("ACTION1"), usage=usage))
    reply = run_once(deepseek(server, stream=stream), [user("frame 1")])
    assert reply.usage == Usage(
        input_tokens=100, output_tokens=20, total_tokens=120, cache_read_tokens=cached, requests=1
    )


# -- harness summary ----------------------------------------------------------------------------

THOUGHTS = ["  think one\n", "think\ttwo  ", "\nthink three\n\n"]


def turn_items(n: int) -> list[dict[str, Any]]:
    return [
        user(f"frame {n}"),
        assistant(f"ACTION{n}", THOUGHTS[n - 1], f"call_{n}"),
        result(f"call_{n}"),
    ]


def history(stream: bool = True) -> tuple[DeepSeekChatAdapter, DeepSeekServer, RuntimeState]:
    """Three accepted turns with reasoning and calls, then one buffered input."""
    server = DeepSeekServer(
        *(answer(f"ACTION{n + 1}", t, f"call_{n + 1}") for n, t in enumerate(THOUGHTS))
    )
    adapt = deepseek(server, stream=stream)
    assert isinstance(adapt, SummaryCompactionAdapter)
    run = session(adapt)
    run.turn([PREAMBLE, user("frame 1")], action)
    run.turn([user("frame 2")], action)
    run.turn([user("frame 3")], action)
    run.buffer([PENDING])
    return adapt, server, run.state


@STREAM
def test_summarize_sends_history_and_prompt_without_pending_inputs_or_tools(
    stream: bool,
) -> None:
    adapt, server, state = history(stream)
    before = frozen(state)
    server.push(Answer("  The agent opened two doors.\n", reasoning="hmm", prompt_tokens=900))

    reply = adapt.summarize(state, "Summarize the conversation.")

    body = server.requests[-1]
    assert body["messages"] == [
        PREAMBLE,
        *turn_items(1),
        *turn_items(2),
        *turn_items(3),
        user("Summarize the conversation."),
    ]
    assert "GAME_OVER" not in json.dumps(body)
    assert "tools" not in body
    assert "tool_choice" not in body
    assert body["thinking"] == THINKING
    assert body["max_tokens"] == 4000
    assert reply.text == "The agent opened two doors."
    assert reply.complete is True
    assert reply.usage == Usage(input_tokens=900, output_tokens=5, total_tokens=905, requests=1)
    assert frozen(state) == before


@STREAM
@pytest.mark.parametrize(
    "reply",
    [
        Answer("partial", finish_reason="length"),
        Answer("   \n"),
        Answer("summary", tool_call=True),
        answer("summary"),
        Answer("", refusal="no"),
    ],
    ids=["length", "blank", "tool-call", "answer-call", "refusal"],
)
def test_an_unfinished_summary_is_reported_incomplete(stream: bool, reply: Any) -> None:
    adapt, server, state = history(stream)
    server.push(reply)
    assert adapt.summarize(state, "Summarize.").complete is False


def test_a_summary_without_usage_is_refused() -> None:
    adapt, server, state = history()
    server.push(Answer("summary", usage=False))
    with pytest.raises(InvalidResponseError):
        adapt.summarize(state, "Summarize.")


@pytest.mark.parametrize("unwound", [1, 2, 3])
def test_rebuild_puts_the_bridge_first_then_the_exact_tail(unwound: int) -> None:
    adapt, _, state = history()
    tail = []
    shorter = state
    for _ in range(unwound):
        shorter, turn = adapt.unwind_latest_turn(shorter)
        tail.insert(0, turn)

    rebuilt = adapt.rebuild(shorter, "BRIDGE: summary so far", tail)

    adapt.check_state(rebuilt)
    expected = [user("BRIDGE: summary so far")]
    for n in range(4 - unwound, 4):
        expected.extend(turn_items(n))
    assert json.dumps(rebuilt.payload["messages"]) == json.dumps(expected)
    assert rebuilt.payload["preamble"] == [PREAMBLE]
    assert rebuilt.payload["pending"] == [PENDING]
    assert [(t.start_item, t.end_item) for t in rebuilt.accepted_turns] == [
        (1 + 3 * i, 4 + 3 * i) for i in range(unwound)
    ]
    for turn, original in zip(rebuilt.accepted_turns, state.accepted_turns[-unwound:], strict=True):
        assert turn.messages == original.messages
        assert turn.reasoning_summary == original.reasoning_summary


def test_a_rebuilt_state_continues_and_unwinds_again() -> None:
    adapt, server, state = history()
    shorter, third = adapt.unwind_latest_turn(state)
    assert list(third.items) == turn_items(3)
    assert shorter.payload["pending"] == [PENDING]
    rebuilt = adapt.rebuild(shorter, "BRIDGE", [third])
    server.push(answer("ACTION4", "four", "call_4"))
    run = session(adapt, state=rebuilt)

    run.turn([user("frame 4")], action)

    assert json.dumps(sent(server)) == json.dumps(
        [PREAMBLE, user("BRIDGE"), *turn_items(3), PENDING, user("frame 4")]
    )
    after_fourth, fourth = adapt.unwind_latest_turn(run.state)
    assert list(fourth.items) == [
        PENDING,
        user("frame 4"),
        assistant("ACTION4", "four", "call_4"),
        result("call_4"),
    ]
    _, again = adapt.unwind_latest_turn(after_fourth)
    assert json.dumps(list(again.items)) == json.dumps(turn_items(3))


# -- property -----------------------------------------------------------------------------------

ATTEMPTS = 3
BAD = [p.values[0] for p in REFUSED]


@dataclass(frozen=True)
class Step:
    buffered: int
    attempts: tuple[int | None, ...]  # an index into BAD, or None for a good answer


STEPS = st.lists(
    st.builds(
        Step,
        buffered=st.integers(0, 2),
        attempts=st.lists(
            st.one_of(st.none(), st.integers(0, len(BAD) - 1)), min_size=1, max_size=4
        ).map(tuple),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.booleans(), plan=STEPS)
def test_only_accepted_answers_shape_the_state_and_later_requests(
    stream: bool, plan: list[Step]
) -> None:
    server = DeepSeekServer()
    run = session(deepseek(server, stream=stream), policy=RetryPolicy(max_attempts=ATTEMPTS))
    reference: list[dict[str, Any]] = []  # built from accepted turns alone
    pending: list[dict[str, Any]] = []
    preamble: list[dict[str, Any]] = []
    for number, step in enumerate(plan):
        extra = [user(f"buffered {number}.{k}") for k in range(step.buffered)]
        if extra:
            run.buffer(extra)
            pending += extra
        frames = [user(f"frame {number}")] if preamble or reference else [PREAMBLE, user("f")]
        before = frozen(run.state)
        replies: list[Called] = []
        for index, choice in enumerate(step.attempts[:ATTEMPTS]):
            if choice is None:
                replies.append(answer(f"ACTION {number}", f"r{number}.{index}", f"c{number}"))
                break
            replies.append(dataclasses.replace(BAD[choice], reasoning=f"bad {number}"))
        accepted = None in step.attempts[:ATTEMPTS]
        server.push(*replies)
        asked = len(replies)
        if not accepted and asked < ATTEMPTS:  # past a short plan, a fatal error ends the turn
            server.push(Failure(401, type="authentication_error"))
            asked += 1
        first = len(server.requests)
        try:
            run.turn(frames, action)
        except TurnFailed:
            assert not accepted
            assert frozen(run.state) == before
        else:
            assert accepted
            inputs = [*pending, *frames]
            if not preamble and not reference:
                lead = next(i for i, m in enumerate(inputs) if m["role"] != "system")
                preamble, inputs = inputs[:lead], inputs[lead:]
            reference += [
                *inputs,
                assistant(f"ACTION {number}", f"r{number}.{len(replies) - 1}", f"c{number}"),
                result(f"c{number}"),
            ]
            pending = []
            assert run.state.payload == {
                "preamble": preamble,
                "messages": reference,
                "pending": [],
            }
        made = server.requests[first:]
        assert len(made) == asked
        for body in made:
            assert body["tools"] == [ANSWER_TOOL]
            assert "bad " not in json.dumps(body)
        assert not server.script


@STREAM
def test_the_example_profile_plays_a_turn_through_the_registry(stream: bool) -> None:
    server = DeepSeekServer()
    server.push(answer("ACTION2", reasoning="the door is left"))
    played = adapter(profile(DEEPSEEK, stream=stream), server)
    assert isinstance(played, DeepSeekChatAdapter)
    result = run_once(played, [user("frame 1")])
    assert action(result.response) == "ACTION2"
    body = server.requests[0]
    assert body["model"] == "deepseek-chat"
    assert body["reasoning_effort"] == "high"
    assert body["thinking"] == THINKING
    assert body["tools"] == [ANSWER_TOOL]
    assert bool(body.get("stream")) is stream
