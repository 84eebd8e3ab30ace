"""`openai.responses.v1` through the real openai SDK against the documented wire shapes."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_kit import DELETE, ENV, HANDLE, RESPONSES, action, entry, load, profile, user

from chatwire import Failure
from responseswire import Output, ResponsesServer
from satchel.harness import build_session
from satchel.providers import build_adapter
from satchel.providers.profiles import ProfileError
from satchel.providers.responses.openai_responses import (
    OpenAIResponseHandleAdapter,
    OpenAIResponsesAdapter,
)
from satchel.providers.responses.wire import call_responses
from satchel.turns import (
    InvalidResponseError,
    RefusalError,
    RetryPolicy,
    Session,
    TransientError,
    TruncatedError,
    TurnFailed,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])


def responses_session(
    server: ResponsesServer, *, stream: bool = True, attempts: int = 3, **settings: Any
) -> Session:
    prof = profile(RESPONSES, stream=stream, settings=settings)
    adapter = build_adapter(prof, http_client=server.client(), env=ENV)
    assert isinstance(adapter, OpenAIResponsesAdapter)
    return Session(adapter, policy=RetryPolicy(max_attempts=attempts), sleep=lambda s: None)


def replayed(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as the next request must carry it: only the response-only field gone."""
    drop = {"reasoning": "status", "compaction": "created_by"}.get(item["type"])
    return {k: v for k, v in item.items() if k != drop}


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@STREAM
def test_every_output_item_is_replayed_exactly(stream: bool) -> None:
    server = ResponsesServer(
        Output("ACTION1", summary="look left", reasoning_extra={"provider_note": {"k": [1, 2]}}),
        Output("ACTION2", summary=""),
    )
    session = responses_session(server, stream=stream)
    system = {"role": "system", "content": "rules"}
    session.turn([system, user("frame 1")], action)
    session.turn([user("frame 2")], action)
    first, second = server.actions()
    assert first["input"] == [system, user("frame 1")]
    assert first["store"] is False
    assert first["include"] == ["reasoning.encrypted_content"]
    assert first["reasoning"] == {"effort": "max", "context": "auto", "summary": "auto"}
    served = [replayed(item) for item in server.served[0]["output"]]
    assert canonical(second["input"]) == canonical(
        [system, user("frame 1"), *served, user("frame 2")]
    )
    reasoning = second["input"][2]
    assert reasoning["type"] == "reasoning" and "status" not in reasoning
    assert reasoning["encrypted_content"] == server.served[0]["output"][0]["encrypted_content"]
    assert reasoning["provider_note"] == {"k": [1, 2]}
    assert second["input"][3]["status"] == "completed"  # a message keeps its status


@STREAM
def test_the_latest_compaction_item_carries_everything_before_it(stream: bool) -> None:
    server = ResponsesServer(
        Output("ACTION1"),
        Output("ACTION2", compaction="compacted-blob-1"),
        Output("ACTION3"),
    )
    session = responses_session(server, stream=stream)
    for n in (1, 2, 3):
        session.turn([user(f"frame {n}")], action)
    third = server.actions()[2]["input"]
    served = [replayed(item) for item in server.served[1]["output"]]
    assert served[0] == {
        "id": served[0]["id"],
        "type": "compaction",
        "encrypted_content": "compacted-blob-1",
    }
    assert third == [*served, user("frame 3")]
    assert session.state.payload["items"][0]["type"] == "compaction"
    assert len(session.state.accepted_turns) == 2


def test_a_retry_after_an_invalid_answer_sends_the_same_input() -> None:
    server = ResponsesServer(Output("ACTION1"), Output("no action"), Output("ACTION2"))
    session = responses_session(server)
    session.turn([user("frame 1")], action)
    accepted = session.turn([user("frame 2")], action)
    _, retried, final = server.actions()
    assert retried["input"] == final["input"]
    assert accepted.attempts == 2
    rejected = server.served[1]["output"][0]["encrypted_content"]
    assert rejected not in json.dumps(session.state.to_json())


UNACCEPTED = [
    pytest.param(
        Output("ACTION", status="incomplete", incomplete_reason="max_output_tokens"),
        TruncatedError,
        id="incomplete-max-output",
    ),
    pytest.param(
        Output("ACTION", status="incomplete", incomplete_reason="content_filter"),
        RefusalError,
        id="incomplete-filtered",
    ),
    pytest.param(
        Output("ACTION", status="failed", error_code="server_error"),
        TransientError,
        id="failed-server-error",
    ),
    pytest.param(
        Output("ACTION", status="failed", error_code="invalid_prompt"),
        InvalidResponseError,
        id="failed-invalid",
    ),
    pytest.param(Output("", refusal="I will not"), RefusalError, id="refusal"),
    pytest.param(Output("ACTION", tool_call=True), InvalidResponseError, id="tool-call"),
    pytest.param(Output("ACTION", encrypted=None), InvalidResponseError, id="no-encrypted"),
    pytest.param(Output("   "), InvalidResponseError, id="empty"),
    pytest.param(Output("ACTION", usage=False), InvalidResponseError, id="no-usage"),
]


@STREAM
@pytest.mark.parametrize(("reply", "error"), UNACCEPTED)
def test_only_a_completed_answer_supplies_an_action(
    stream: bool, reply: Output, error: type[Exception]
) -> None:
    server = ResponsesServer(copy.copy(reply), Output("ACTION ok"))
    session = responses_session(server, stream=stream)
    accepted = session.turn([user("frame")], action)
    assert accepted.action == "ACTION ok"
    (failure,) = accepted.failures
    assert failure.diagnostics is not None
    assert failure.diagnostics["exception_class"] == error.__name__
    first, second = server.actions()
    assert first["input"] == second["input"] == [user("frame")]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Output("ACTION", interrupt_after=4), "interrupted_stream"),
        (Output("ACTION", error_event="server_error"), "transient"),
        (Output("ACTION", error_event="context_length_exceeded"), "context_overflow"),
    ],
    ids=["broken", "error-event", "overflow-event"],
)
def test_streams_that_do_not_complete_are_never_accepted(reply: Output, kind: str) -> None:
    server = ResponsesServer(reply, Output("ACTION ok"))
    session = responses_session(server, attempts=2)
    if kind == "context_overflow":
        with pytest.raises(TurnFailed):
            session.turn([user("frame")], action)
        assert session.state == session.adapter.initial_state()
        return
    accepted = session.turn([user("frame")], action)
    assert [failure.kind for failure in accepted.failures] == [kind]


def test_a_stream_that_ends_without_its_final_event_is_interrupted() -> None:
    server = ResponsesServer(Output("ACTION", drop_final=True), Output("ACTION ok"))
    accepted = responses_session(server).turn([user("frame")], action)
    assert [failure.kind for failure in accepted.failures] == ["interrupted_stream"]
    diagnostics = accepted.failures[0].diagnostics
    assert diagnostics is not None
    assert diagnostics["exception_class"] == "InterruptedStreamError"
    assert diagnostics["request_id"].startswith("req_")


@STREAM
def test_usage_is_normalized_with_its_breakdowns(stream: bool) -> None:
    server = ResponsesServer(
        Output(
            "ACTION", input_tokens=1200, output_tokens=300, cached_tokens=1024, reasoning_tokens=250
        )
    )
    accepted = responses_session(server, stream=stream).turn([user("frame")], action)
    assert accepted.usage == Usage(1200, 300, 1500, 250, 1024, 0, None, 1)


def test_buffered_inputs_are_sent_before_the_new_ones_and_survive_retries() -> None:
    server = ResponsesServer(Output("ACTION1"), Output("nope"), Output("ACTION2"))
    session = responses_session(server)
    session.turn([user("frame 1")], action)
    session.buffer([user("GAME_OVER: reset")])
    session.turn([user("frame 2")], action)
    retried, final = server.actions()[1:]
    assert (
        retried["input"][-2:] == final["input"][-2:] == [user("GAME_OVER: reset"), user("frame 2")]
    )
    assert session.state.payload["pending"] == []


def test_records_show_readable_requests_and_never_an_encrypted_blob(tmp_path: Any) -> None:
    from satchel.turns import RecordsWriter

    server = ResponsesServer(Output("ACTION1", summary="plan"), Output("ACTION2"))
    prof = profile(RESPONSES)
    adapter = build_adapter(prof, http_client=server.client(), env=ENV)
    session = Session(adapter, records=RecordsWriter(tmp_path), sleep=lambda s: None)
    session.turn([user("frame 1")], action)
    session.turn([user("frame 2")], action)
    step = json.loads((tmp_path / "step_002.json").read_text())
    assert step["messages_sent"][:3] == [
        user("frame 1"),
        {"role": "assistant", "content": "", "reasoning": "plan"},
        {"role": "assistant", "content": "ACTION1"},
    ]
    kinds = [item["type"] for item in step["request"]["input_items"]]
    assert kinds == ["message", "reasoning", "message", "message"]
    blob = server.served[0]["output"][0]["encrypted_content"]
    for path in tmp_path.iterdir():
        assert blob not in path.read_text()


# ---- previous_response_id ------------------------------------------------------------------


def handle_session(server: ResponsesServer, **settings: Any) -> Session:
    adapter = build_adapter(
        profile(HANDLE, settings=settings), http_client=server.client(), env=ENV
    )
    assert isinstance(adapter, OpenAIResponseHandleAdapter)
    return Session(adapter, sleep=lambda s: None)


def test_previous_response_id_chains_accepted_responses_only() -> None:
    server = ResponsesServer(
        Output("ACTION1"), Output("nope"), Output("ACTION2"), Output("ACTION3")
    )
    session = handle_session(server)
    session.turn([{"role": "system", "content": "rules"}, user("frame 1")], action)
    first_id = session.state.payload["response_id"]
    session.buffer([user("GAME_OVER")])
    session.turn([user("frame 2")], action)
    session.turn([user("frame 3")], action)
    one, rejected, two, three = server.actions()
    assert "previous_response_id" not in one
    assert one["input"] == [{"role": "system", "content": "rules"}, user("frame 1")]
    assert rejected["previous_response_id"] == two["previous_response_id"] == first_id
    assert rejected["input"] == two["input"] == [user("GAME_OVER"), user("frame 2")]
    assert three["previous_response_id"] != first_id
    assert three["input"] == [user("frame 3")]
    assert "store" not in three


# ---- profiles ----------------------------------------------------------------------------------


REFUSED = [
    (RESPONSES, {"request.store": DELETE}, "request.store"),
    (RESPONSES, {"request.store": True}, "request.store"),
    (RESPONSES, {"request.include": DELETE}, "request.include"),
    (RESPONSES, {"request.include": ["message.output_text.logprobs"]}, "request.include"),
    (RESPONSES, {"request.previous_response_id": "resp_1"}, "request.previous_response_id"),
    (RESPONSES, {"request.conversation": "conv_1"}, "request.conversation"),
    (RESPONSES, {"request.background": True}, "request.background"),
    (RESPONSES, {"request.input": []}, "request.input"),
    (RESPONSES, {"request.tools": []}, "request.tools"),
    (RESPONSES, {"request.reasoning.context": "current_turn"}, "request.reasoning.context"),
    (RESPONSES, {"request.reasoning.summary": DELETE}, "request.reasoning.summary"),
    (RESPONSES, {"request.reasoning": DELETE}, "request.reasoning"),
    (RESPONSES, {"request.truncation": "auto"}, "request.truncation"),
    (
        RESPONSES,
        {"request.context_management": [{"type": "compaction"}]},
        "request.context_management",
    ),
    (RESPONSES, {"request.bogus": 1}, "request.bogus"),
    (RESPONSES, {"request.extra_body": {"input": []}}, "request.extra_body.input"),
    (RESPONSES, {"request.extra_body": {"tools": []}}, "request.extra_body.tools"),
    (
        HANDLE,
        {"request.extra_body": {"previous_response_id": "r"}},
        "request.extra_body.previous_response_id",
    ),
    (RESPONSES, {"request.extra_body": "x"}, "request.extra_body"),
    (
        RESPONSES,
        {
            "runtime.compaction.strategy": "harness_summary",
            "runtime.compaction.trigger_tokens": 1000,
        },
        "request.context_management",
    ),
    (RESPONSES, {"runtime.compaction.strategy": "native"}, "runtime.compaction.strategy"),
    (HANDLE, {"request.store": False}, "request.store"),
    (HANDLE, {"request.previous_response_id": "resp_1"}, "request.previous_response_id"),
    (
        HANDLE,
        {"runtime.compaction.strategy": "harness_summary", "runtime.compaction.trigger_tokens": 1},
        "runtime.compaction.strategy",
    ),
]


@pytest.mark.parametrize(("profile_id", "settings", "field"), REFUSED)
def test_a_profile_that_cannot_be_honoured_is_refused_naming_the_field(
    profile_id: str, settings: dict[str, Any], field: str
) -> None:
    with pytest.raises(ProfileError, match=field.replace(".", r"\.")):
        load(entry(profile_id, settings))


def test_harness_summary_profiles_load_without_inline_compaction() -> None:
    loaded = load(
        entry(
            RESPONSES,
            {
                "request.context_management": DELETE,
                "runtime.compaction.strategy": "harness_summary",
                "runtime.compaction.trigger_tokens": 150_000,
            },
        )
    )
    assert loaded.runtime.compaction.strategy == "harness_summary"


def test_transient_http_errors_are_retried_with_the_same_input() -> None:
    server = ResponsesServer(Failure(503, type="server_error"), Output("ACTION"))
    accepted = responses_session(server).turn([user("frame")], action)
    assert [f.kind for f in accepted.failures] == ["transient"]
    first, second = server.actions()
    assert first["input"] == second["input"]


def _wire_bytes(send: Any) -> bytes:
    seen: list[bytes] = []
    server = ResponsesServer(Output("ok"))

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return server.handle(request)

    client = openai.OpenAI(
        api_key="unused",
        base_url="http://wire.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    send(client)
    return seen[0]


_TEXT = st.text(max_size=16)
_ITEM = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": _TEXT}),
    st.fixed_dictionaries(
        {
            "id": _TEXT,
            "type": st.just("reasoning"),
            "summary": st.lists(
                st.fixed_dictionaries({"type": st.just("summary_text"), "text": _TEXT}),
                max_size=2,
            ),
            "encrypted_content": _TEXT,
        }
    ),
    st.fixed_dictionaries(
        {
            "id": _TEXT,
            "type": st.just("message"),
            "role": st.just("assistant"),
            "status": st.just("completed"),
            "content": st.lists(
                st.fixed_dictionaries(
                    {"type": st.just("output_text"), "text": _TEXT, "annotations": st.just([])}
                ),
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries({"id": _TEXT, "type": st.just("compaction"), "encrypted_content": _TEXT}),
)


@settings(max_examples=60, deadline=None)
@given(items=st.lists(_ITEM, min_size=1, max_size=5), stream=st.booleans())
def test_input_in_extra_body_puts_the_same_bytes_on_the_wire(
    items: list[dict[str, Any]], stream: bool
) -> None:
    body: dict[str, Any] = {"model": "m", "input": items, "store": False, "stream": stream}
    plain = _wire_bytes(lambda client: client.responses.create(**body))
    ours = _wire_bytes(lambda client: call_responses(client, body))
    assert ours == plain
    assert json.loads(ours)["input"] == items


def summary_session(server: ResponsesServer) -> Session:
    settings = {
        "request.context_management": DELETE,
        "runtime.compaction.strategy": "harness_summary",
        "runtime.compaction.trigger_tokens": 100_000,
        "runtime.compaction.summary_max_output_tokens": 2_000,
    }
    prof = profile(RESPONSES, settings=settings)
    return build_session(prof, http_client=server.client(), env=ENV, sleep=lambda s: None)


OVERFLOW = Failure(400, message="maximum context length", code="context_length_exceeded")


def test_a_harness_summary_bridges_into_a_fresh_item_list() -> None:
    server = ResponsesServer(Output("ACTION1"))
    session = summary_session(server)
    session.turn([user("frame 1")], action)
    session.buffer([user("GAME_OVER")])
    server.push(OVERFLOW, Output("the summary", summary=None), Output("ACTION3"))
    turn = session.turn([user("frame 2")], action)
    summary_request = server.requests[2]
    assert summary_request["max_output_tokens"] == 2_000
    assert summary_request["input"][:-1] == server.requests[0]["input"] + [
        replayed(item) for item in server.served[0]["output"]
    ]
    assert "summary" in summary_request["input"][-1]["content"]
    bridge, *rest = server.actions()[-1]["input"]
    assert bridge["role"] == "user" and "the summary" in bridge["content"]
    assert rest == [user("GAME_OVER"), user("frame 2")]
    assert session.compactions == 1
    assert turn.compaction_usage is not None


def test_an_overflowing_summary_keeps_the_unwound_turn_exactly() -> None:
    server = ResponsesServer(Output("ACTION1"), Output("ACTION2"))
    session = summary_session(server)
    session.turn([user("frame 1")], action)
    session.turn([user("frame 2")], action)
    second_turn = [user("frame 2"), *(replayed(item) for item in server.served[1]["output"])]
    server.push(OVERFLOW, OVERFLOW, Output("the summary", summary=None), Output("ACTION3"))
    session.turn([user("frame 3")], action)
    bridge, *rest = server.actions()[-1]["input"]
    assert "the summary" in bridge["content"]
    assert rest == [*second_turn, user("frame 3")]
    assert rest[1]["encrypted_content"] == server.served[1]["output"][0]["encrypted_content"]
