"""`google.interactions.v1` through the real google-genai SDK against the Interactions wire
shapes, streaming included."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from google import genai
from google.genai import types as genai_types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from provider_kit import action, system, user

from googlewire import Answer, Failure, InteractionsServer
from satchel.compaction.harness_summary import HarnessSummaryCompactor, HarnessSummaryPolicy
from satchel.providers.google.adapter import DESCRIPTOR, GoogleInteractionsAdapter
from satchel.providers.google.spec import GOOGLE_INTERACTIONS
from satchel.providers.google.wire import normalize_usage
from satchel.turns import (
    AttemptError,
    ConfigurationError,
    ContextOverflowError,
    FatalAttemptError,
    InterruptedStreamError,
    InvalidResponseError,
    ModelTurnRequest,
    RetryPolicy,
    RuntimeState,
    Session,
    SummaryCompactionAdapter,
    TransientError,
    TruncatedError,
    TurnFailed,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
REQUEST: dict[str, Any] = {
    "model": "gemini-test",
    "generation_config": {"thinking_level": "high", "thinking_summaries": "auto"},
}
Step = dict[str, Any]


def make_adapter(
    server: InteractionsServer, *, stream: bool = True, summary_max_tokens: int | None = None
) -> GoogleInteractionsAdapter:
    options = genai_types.HttpOptions(
        base_url="https://gemini.test",
        retry_options=genai_types.HttpRetryOptions(attempts=1),
        httpx_client=server.client(),
    )
    client = genai.Client(api_key="g-test-key", http_options=options)
    request = {**REQUEST, "stream": True} if stream else dict(REQUEST)
    return GoogleInteractionsAdapter(client, request, summary_max_tokens=summary_max_tokens)


def make_session(server: InteractionsServer, *, stream: bool = True, **kwargs: Any) -> Session:
    kwargs.setdefault("policy", RetryPolicy(max_attempts=3))
    return Session(make_adapter(server, stream=stream), sleep=lambda s: None, **kwargs)


def step(text: str) -> Step:
    return {"type": "user_input", "content": [{"type": "text", "text": text}]}


def run(adapter: GoogleInteractionsAdapter, state: RuntimeState, *texts: str) -> Any:
    return adapter.run(ModelTurnRequest(state, tuple(user(t) for t in texts)))


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@STREAM
def test_every_step_is_replayed_exactly_with_its_signature(stream: bool) -> None:
    server = InteractionsServer(
        Answer("ACTION1", thought="look left", step_extra={"provider_note": {"k": [1, 2]}}),
        Answer("ACTION2", thought=""),
        Answer("ACTION3"),
    )
    session = make_session(server, stream=stream)
    session.turn([system("rules"), user("frame 1")], action)
    session.turn([user("frame 2")], action)
    session.turn([user("frame 3")], action)
    first, second, third = server.requests
    assert first["input"] == [step("frame 1")]
    assert second["input"] == [step("frame 1"), *server.served[0], step("frame 2")]
    assert third["input"] == [*second["input"], *server.served[1], step("frame 3")]
    assert canonical(second["input"][1:3]) == canonical(server.served[0])
    thought = second["input"][1]
    assert thought["provider_note"] == {"k": [1, 2]}
    assert thought["signature"] == server.served[0][0]["signature"]
    assert all(body["store"] is False for body in server.requests)
    assert all(body["system_instruction"] == "rules" for body in server.requests)
    assert session.state.payload["steps"] == [*third["input"], *server.served[2]]


def test_the_completed_event_steps_are_authoritative_when_present() -> None:
    server = InteractionsServer(Answer("ACTION1", steps_in_completed=True), Answer("ACTION2"))
    session = make_session(server)
    session.turn([user("frame 1")], action)
    session.turn([user("frame 2")], action)
    assert server.requests[1]["input"] == [step("frame 1"), *server.served[0], step("frame 2")]


def test_a_retry_after_an_invalid_answer_sends_the_same_input() -> None:
    server = InteractionsServer(Answer("ACTION1"), Answer("no action"), Answer("ACTION2"))
    session = make_session(server)
    session.turn([user("frame 1")], action)
    accepted = session.turn([user("frame 2")], action)
    _, retried, final = server.requests
    assert retried["input"] == final["input"]
    assert accepted.attempts == 2
    served = server.served[1]
    assert served is not None
    rejected = served[0]["signature"]
    assert rejected not in json.dumps(session.state.to_json())


UNACCEPTED = [
    pytest.param(
        Answer("ACTION", status="requires_continuation"), TruncatedError, id="continuation"
    ),
    pytest.param(Answer("ACTION", status="incomplete"), TruncatedError, id="incomplete"),
    pytest.param(
        Answer("ACTION", status="failed", error_code="RESOURCE_EXHAUSTED"),
        TransientError,
        id="failed-transient",
    ),
    pytest.param(
        Answer("ACTION", status="failed", error_code="SAFETY"),
        InvalidResponseError,
        id="failed",
    ),
    pytest.param(Answer("ACTION", status="cancelled"), InvalidResponseError, id="cancelled"),
    pytest.param(Answer("ACTION", status="in_progress"), InvalidResponseError, id="in-progress"),
    pytest.param(
        Answer(
            "ACTION",
            extra_steps=[{"type": "function_call", "id": "c1", "name": "f", "arguments": {}}],
        ),
        InvalidResponseError,
        id="tool-step",
    ),
    pytest.param(Answer("ACTION", signature=None), InvalidResponseError, id="unsigned-thought"),
    pytest.param(Answer("   "), InvalidResponseError, id="empty"),
    pytest.param(Answer("ACTION", usage=False), InvalidResponseError, id="no-usage"),
]


@STREAM
@pytest.mark.parametrize(("reply", "error"), UNACCEPTED)
def test_only_a_completed_interaction_supplies_an_action(
    stream: bool, reply: Answer, error: type[AttemptError]
) -> None:
    server = InteractionsServer(Answer("ACTION1"), reply)
    adapter = make_adapter(server, stream=stream)
    accepted = run(adapter, adapter.initial_state(), "frame 1").provisional_state
    before = canonical(accepted.to_json())
    with pytest.raises(error) as raised:
        run(adapter, accepted, "frame 2")
    assert canonical(accepted.to_json()) == before
    if reply.usage:
        assert raised.value.usage is not None and raised.value.usage.input_tokens == 10


BROKEN = [
    pytest.param(Answer("ACTION", interrupt_after=5), InterruptedStreamError, id="dropped"),
    pytest.param(Answer("ACTION", drop_final=True), InterruptedStreamError, id="no-completion"),
    pytest.param(Answer("ACTION", error_event="ABORTED"), InterruptedStreamError, id="error"),
    pytest.param(Answer("ACTION", error_event="UNAVAILABLE"), TransientError, id="unavailable"),
]


@pytest.mark.parametrize(("reply", "error"), BROKEN)
def test_streams_that_do_not_complete_leave_the_state_unchanged(
    reply: Answer, error: type[AttemptError]
) -> None:
    server = InteractionsServer(Answer("ACTION1"), reply, Answer("ACTION2"))
    session = make_session(server)
    session.turn([user("frame 1")], action)
    before = canonical(session.state.to_json())
    adapter = session.adapter
    with pytest.raises(error):
        adapter.run(ModelTurnRequest(session.state, (user("frame 2"),)))
    assert canonical(session.state.to_json()) == before
    session.turn([user("frame 2")], action)
    assert server.requests[1]["input"] == server.requests[2]["input"]


HTTP_ERRORS = [
    pytest.param(Failure(429, reason="RESOURCE_EXHAUSTED"), TransientError, id="429"),
    pytest.param(Failure(503, reason="UNAVAILABLE"), TransientError, id="503"),
    pytest.param(Failure(500, reason="INTERNAL"), TransientError, id="500"),
    pytest.param(
        Failure(400, "The input token count (9) exceeds the maximum number of tokens allowed (3)."),
        ContextOverflowError,
        id="overflow",
    ),
    pytest.param(Failure(400, "bad field"), FatalAttemptError, id="400"),
    pytest.param(
        Failure(403, "secret-ish detail", "PERMISSION_DENIED"), FatalAttemptError, id="403"
    ),
]


@pytest.mark.parametrize(("reply", "error"), HTTP_ERRORS)
def test_http_errors_are_classified_with_the_provider_message_out_of_the_diagnostics(
    reply: Failure, error: type[AttemptError]
) -> None:
    server = InteractionsServer(reply)
    adapter = make_adapter(server, stream=False)
    with pytest.raises(error) as raised:
        run(adapter, adapter.initial_state(), "frame 1")
    assert f"HTTP {reply.status} {reply.reason}: {reply.message}" in str(raised.value)
    diagnostics = raised.value.diagnostics
    assert diagnostics is not None
    assert diagnostics.http_status == reply.status
    assert diagnostics.provider_error_type == reply.reason.lower()
    assert reply.message not in json.dumps(diagnostics.to_dict())


def test_transient_http_errors_are_retried_with_the_same_input() -> None:
    server = InteractionsServer(Failure(503, reason="UNAVAILABLE"), Answer("ACTION1"))
    session = make_session(server)
    accepted = session.turn([user("frame 1")], action)
    assert accepted.attempts == 2
    assert server.requests[0] == server.requests[1]


def test_a_turn_that_fails_every_attempt_keeps_the_accepted_state() -> None:
    server = InteractionsServer(
        Answer("ACTION1"),
        Answer("ACTION", status="requires_continuation"),
        Answer("ACTION", status="incomplete"),
        Answer("ACTION", status="cancelled"),
    )
    session = make_session(server)
    session.turn([user("frame 1")], action)
    before = canonical(session.state.to_json())
    with pytest.raises(TurnFailed):
        session.turn([user("frame 2")], action)
    assert canonical(session.state.to_json()) == before
    assert session.abandoned_usage.requests == 3


@STREAM
def test_usage_is_normalized_with_its_breakdowns(stream: bool) -> None:
    server = InteractionsServer(
        Answer("ACTION1", input_tokens=120, cached_tokens=80, output_tokens=7, thought_tokens=30)
    )
    adapter = make_adapter(server, stream=stream)
    result = run(adapter, adapter.initial_state(), "frame 1")
    assert result.usage == Usage(
        input_tokens=120,
        output_tokens=37,
        total_tokens=157,
        reasoning_tokens=30,
        cache_read_tokens=80,
        requests=1,
    )


def test_usage_counts_that_are_missing_or_malformed_are_zero() -> None:
    usage = normalize_usage({"total_input_tokens": 5, "total_output_tokens": "7"})
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (5, 0, 5)


@STREAM
def test_thought_summaries_are_the_readable_reasoning_and_signatures_stay_out(
    stream: bool,
) -> None:
    server = InteractionsServer(Answer("ACTION1", thought="look left"), Answer("ACTION2"))
    adapter = make_adapter(server, stream=stream)
    first = run(adapter, adapter.initial_state(), "frame 1")
    second = run(adapter, first.provisional_state, "frame 2")
    assert first.response.reasoning == "look left"
    boundary = first.provisional_state.accepted_turns[-1]
    assert boundary.reasoning_summary == "look left"
    assert {"role": "assistant", "content": "", "reasoning": "look left"} in boundary.messages
    served = server.served[0]
    assert served is not None
    signature = served[0]["signature"]
    for shown in (
        second.request_record.to_dict(),
        list(second.readable_request_messages),
        [turn.to_json() for turn in second.provisional_state.accepted_turns],
    ):
        assert signature not in json.dumps(shown)
    assert [item["type"] for item in second.request_record.input_items] == [
        "user_input",
        "thought",
        "model_output",
        "user_input",
    ]


def test_buffered_inputs_are_sent_before_the_new_ones_and_survive_retries() -> None:
    server = InteractionsServer(Answer("ACTION1"), Answer("nope"), Answer("ACTION2"))
    session = make_session(server)
    session.turn([user("frame 1")], action)
    session.buffer([user("GAME_OVER")])
    session.turn([user("frame 2")], action)
    tail = [step("GAME_OVER"), step("frame 2")]
    assert server.requests[1]["input"][-2:] == tail
    assert server.requests[2]["input"][-2:] == tail
    assert session.state.payload["pending"] == []


def test_the_system_instruction_cannot_change_during_a_session() -> None:
    server = InteractionsServer(Answer("ACTION1"))
    adapter = make_adapter(server)
    state = adapter.run(
        ModelTurnRequest(adapter.initial_state(), (system("rules"), user("frame 1")))
    ).provisional_state
    assert state.payload["system"] == "rules"
    with pytest.raises(ConfigurationError, match="system prompt"):
        adapter.run(ModelTurnRequest(state, (system("other"), user("frame 2"))))
    with pytest.raises(ConfigurationError, match="buffered"):
        adapter.buffer_inputs(state, [system("late")])


REFUSED = [
    pytest.param({"store": True}, "request.store", id="store"),
    pytest.param(
        {"previous_interaction_id": "int_1"}, "request.previous_interaction_id", id="prev"
    ),
    pytest.param({"background": True}, "request.background", id="background"),
    pytest.param({"input": "hi"}, "request.input", id="input"),
    pytest.param({"system_instruction": "x"}, "request.system_instruction", id="system"),
    pytest.param({"extra_body": {"input": []}}, "request.extra_body.input", id="extra-input"),
    pytest.param(
        {"generation_config": {"thinking_summaries": "none"}},
        "request.generation_config.thinking_summaries",
        id="summaries-none",
    ),
    pytest.param(
        {"generation_config": {"thinking_level": "low"}},
        "request.generation_config.thinking_summaries",
        id="summaries-missing",
    ),
    pytest.param({"generation_config": None}, "request.generation_config", id="no-config"),
    pytest.param({"stream": "yes"}, "request.stream", id="stream"),
    pytest.param({"temperature": 0.2}, "request.temperature", id="unknown"),
    pytest.param({"model": ""}, "request.model", id="model"),
]


@pytest.mark.parametrize(("edit", "field"), REFUSED)
def test_a_profile_that_cannot_be_honoured_is_refused_naming_the_field(
    edit: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        GOOGLE_INTERACTIONS.validate_request({**REQUEST, **edit}, "continuous_conversation")
    assert str(raised.value).startswith(f"{field}:")


def test_store_may_be_left_out_and_is_always_sent_false() -> None:
    assert GOOGLE_INTERACTIONS.validate_request(
        {**REQUEST, "store": False}, "continuous_conversation"
    )
    server = InteractionsServer(Answer("ACTION1"))
    adapter = make_adapter(server)
    run(adapter, adapter.initial_state(), "frame 1")
    assert server.requests[0]["store"] is False
    assert server.requests[0]["generation_config"]["thinking_summaries"] == "auto"


def test_the_factory_builds_the_sdk_client_on_the_given_http_client() -> None:
    server = InteractionsServer(Answer("ACTION1"))
    profile = SimpleNamespace(
        request={**REQUEST, "stream": True},
        client=SimpleNamespace(base_url="https://gemini.test", timeout_s=30.0, max_retries=0),
        runtime=SimpleNamespace(compaction=SimpleNamespace(summary_max_output_tokens=500)),
    )
    adapter = GOOGLE_INTERACTIONS.factory(profile, server.client(), "g-test-key")  # type: ignore[arg-type]
    assert isinstance(adapter, SummaryCompactionAdapter)
    assert adapter.descriptor == DESCRIPTOR
    result = run(adapter, adapter.initial_state(), "frame 1")
    assert result.response.text == "ACTION1"
    assert server.headers[0]["x-goog-api-key"] == "g-test-key"
    assert "g-test-key" not in json.dumps(result.request_record.to_dict())


def test_the_descriptor_names_the_adapter() -> None:
    assert DESCRIPTOR.to_dict() == {
        "adapter_id": "google.interactions.v1",
        "provider": "google",
        "api_surface": "interactions",
        "implementation_path": "src/satchel/providers/google/adapter.py",
        "version": "1.0.0",
        "strategies": ["continuous_conversation"],
        "review_status": "unreviewed",
        "compaction": ["none", "harness_summary"],
    }


# The harness-summary capability.


def test_summarize_sends_the_accepted_history_without_pending_inputs() -> None:
    server = InteractionsServer(Answer("ACTION1"), Answer("the summary", thought="condense"))
    adapter = make_adapter(server, summary_max_tokens=2_000)
    state = adapter.run(
        ModelTurnRequest(adapter.initial_state(), (system("rules"), user("frame 1")))
    ).provisional_state
    state = adapter.buffer_inputs(state, [user("GAME_OVER")])
    reply = adapter.summarize(state, "summarize please")
    assert reply.complete and reply.text == "the summary"
    body = server.requests[1]
    assert body["input"] == [step("frame 1"), *server.served[0], step("summarize please")]
    assert body["generation_config"]["max_output_tokens"] == 2_000
    assert body["system_instruction"] == "rules"
    assert "max_output_tokens" not in server.requests[0]["generation_config"]


@pytest.mark.parametrize(
    "reply",
    [
        Answer("the summary", status="incomplete"),
        Answer("", thought="only thinking"),
        Answer("x", extra_steps=[{"type": "function_call", "id": "c", "name": "f"}]),
    ],
    ids=["incomplete", "empty", "tool"],
)
def test_a_summary_that_is_not_plain_finished_text_is_not_complete(reply: Answer) -> None:
    server = InteractionsServer(reply)
    adapter = make_adapter(server)
    assert not adapter.summarize(adapter.initial_state(), "summarize").complete


def test_unwind_and_rebuild_keep_the_tail_steps_byte_exact() -> None:
    server = InteractionsServer(
        Answer("ACTION1"), Answer("ACTION2", step_extra={"x": 1}), Answer("ACTION3")
    )
    adapter = make_adapter(server)
    state = adapter.initial_state()
    for text in ("frame 1", "frame 2"):
        state = run(adapter, state, text).provisional_state
    state = adapter.buffer_inputs(state, [user("GAME_OVER")])
    assert adapter.native_items(state) == 6
    shorter, unwound = adapter.unwind_latest_turn(state)
    assert list(unwound.items) == [step("frame 2"), *server.served[1]]
    assert shorter.payload["pending"] == [step("GAME_OVER")]
    rebuilt = adapter.rebuild(shorter, "the bridge", [unwound])
    adapter.check_state(rebuilt)
    bridge, *tail = rebuilt.payload["steps"]
    assert bridge == step("the bridge")
    assert canonical(tail) == canonical(list(unwound.items))
    run(adapter, rebuilt, "frame 3")
    sent = server.requests[-1]["input"]
    assert sent == [
        step("the bridge"),
        step("frame 2"),
        *server.served[1],
        step("GAME_OVER"),
        step("frame 3"),
    ]
    assert sent[2]["signature"] == server.served[1][0]["signature"]
    again, unwound_again = adapter.unwind_latest_turn(rebuilt)
    assert unwound_again.items == unwound.items
    assert again.payload["steps"] == [step("the bridge")]


def test_an_overflow_recovers_through_a_harness_summary() -> None:
    overflow = Failure(
        400, "The input token count (9) exceeds the maximum number of tokens allowed (3)."
    )
    server = InteractionsServer(Answer("ACTION1"), Answer("ACTION2"))
    adapter = make_adapter(server, summary_max_tokens=1_000)
    policy = HarnessSummaryPolicy(trigger_tokens=100_000, max_context_tokens=200_000)
    compactor = HarnessSummaryCompactor(adapter, policy, sleep=lambda s: None)
    session = Session(adapter, compactor=compactor, sleep=lambda s: None)
    session.turn([user("frame 1")], action)
    session.turn([user("frame 2")], action)
    second = [step("frame 2"), *server.served[1]]
    server.push(overflow, overflow, Answer("the summary", thought=None), Answer("ACTION3"))
    session.turn([user("frame 3")], action)
    bridge, *rest = server.requests[-1]["input"]
    assert "the summary" in bridge["content"][0]["text"]
    assert rest == [*second, step("frame 3")]
    assert session.compactions == 1


# Property: over any sequence of good and bad replies, every request carries exactly the state
# built from accepted turns, and no rejected attempt's steps ever reach a later request.

BAD: dict[str, Any] = {
    "invalid": lambda: Answer("no action"),
    "continuation": lambda: Answer("ACTION", status="requires_continuation"),
    "failed": lambda: Answer("ACTION", status="failed", error_code="INTERNAL"),
    "unsigned": lambda: Answer("ACTION", signature=None),
    "broken": lambda: Answer("ACTION", interrupt_after=4),
    "no_final": lambda: Answer("ACTION", drop_final=True),
    "transient": lambda: Failure(503, reason="UNAVAILABLE"),
}
ATTEMPTS = 3
TURNS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.lists(st.sampled_from(["valid", "valid", *BAD]), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=TURNS, stream=st.booleans())
def test_every_request_carries_exactly_the_accepted_steps(
    turns: list[tuple[int, list[str]]], stream: bool
) -> None:
    server = InteractionsServer()
    session = make_session(server, stream=stream, policy=RetryPolicy(max_attempts=ATTEMPTS))
    accepted: list[Step] = []
    carried: list[Step] = []  # buffered inputs of failed turns: still pending
    rejected: set[str] = set()
    for number, (buffered, outcomes) in enumerate(turns):
        pending = [step(f"buffered {number}.{i}") for i in range(buffered)]
        if pending:
            session.buffer([user(s["content"][0]["text"]) for s in pending])
        inputs = [*carried, *pending, step(f"frame {number}")]
        tried = outcomes[:ATTEMPTS]
        for outcome in tried:
            if outcome == "valid":
                server.push(Answer(f"ACTION {number}"))
                break
            reply = BAD[outcome]()
            if outcome in ("broken", "no_final") and not stream:  # a JSON answer cannot break
                reply = Answer("no action")
            server.push(reply)
        else:
            if len(tried) < ATTEMPTS:  # a fatal answer ends the turn before its retries run out
                server.push(Failure(403, reason="PERMISSION_DENIED"))
        first = len(server.requests)
        try:
            session.turn([user(f"frame {number}")], action)
        except TurnFailed:
            assert "valid" not in tried
        else:
            assert "valid" in tried
        for body, served in zip(server.requests[first:], server.served[first:], strict=True):
            assert body["input"] == [*accepted, *inputs]
            assert not rejected & signatures(body["input"])
            if served is not None:
                rejected |= signatures(served)
        if "valid" in tried:
            last = server.served[-1]
            assert last is not None
            accepted = [*accepted, *inputs, *last]
            rejected -= signatures(last)
            carried = []
        else:
            carried = [*carried, *pending]
        assert session.state.payload["steps"] == accepted
        assert session.state.payload["pending"] == carried


def signatures(steps: list[Step]) -> set[str]:
    return {s["signature"] for s in steps if s.get("type") == "thought" and s.get("signature")}


def test_the_sdk_debug_log_never_carries_bodies(caplog: pytest.LogCaptureFixture) -> None:
    server = InteractionsServer(Answer("ACTION1"))
    adapter = make_adapter(server, stream=False)
    sdk_log = logging.getLogger("google.genai")
    with caplog.at_level(logging.DEBUG, logger="google.genai"):
        sdk_log.debug("Request:\nMethod: %s\nBody: %s", "POST", "tsig-secret g-test-key")
        sdk_log.debug("Response:\nStatus Code: %s\nBody: %s", 200, "tsig-secret")
        run(adapter, adapter.initial_state(), "frame 1")
    assert "tsig-secret" not in caplog.text
    assert "g-test-key" not in caplog.text
