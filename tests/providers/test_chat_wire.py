"""Chat Completions wire handling through the SDK: error classification, diagnostics, usage."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from provider_kit import ENV, OPEN, ROLLING, action, adapter, profile, run_once, session, user

from chatwire import Answer, ChatServer, Failure
from satchel.providers import build_adapter
from satchel.providers.chat.wire import call_chat
from satchel.turns import (
    AttemptError,
    ContextOverflowError,
    Diagnostics,
    FatalAttemptError,
    InterruptedStreamError,
    InvalidResponseError,
    RecordsWriter,
    RefusalError,
    TransientError,
    TruncatedError,
    TurnFailed,
    Usage,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
PROFILES = pytest.mark.parametrize("profile_id", [ROLLING, OPEN], ids=["rolling", "open"])
CANARY = "CANARY-provider-message-9f2c41"
VLLM_OVERFLOW = (
    "This model's maximum context length is 32768 tokens. However, you requested 40960 "
    f"tokens (8192 in the messages, 32768 in the completion). {CANARY}"
)

CLASSIFIED = [
    pytest.param(
        Failure(400, CANARY, "invalid_request_error", "context_length_exceeded", "req_a1"),
        ContextOverflowError,
        "BadRequestError",
        "invalid_request_error",
        id="400-context_length_exceeded",
    ),
    pytest.param(
        Failure(400, VLLM_OVERFLOW, "BadRequestError", 400, "req_a1"),  # type: ignore[arg-type]
        ContextOverflowError,
        "BadRequestError",
        None,
        id="400-vllm-maximum-context-length",
    ),
    pytest.param(
        Failure(429, CANARY, "rate_limit_exceeded", None, "req_a1"),
        TransientError,
        "RateLimitError",
        "rate_limit_exceeded",
        id="429",
    ),
    pytest.param(
        Failure(500, CANARY, "server_error", None, "req_a1"),
        TransientError,
        "InternalServerError",
        "server_error",
        id="500",
    ),
    pytest.param(
        Failure(503, CANARY, "service_unavailable", None, "req_a1"),
        TransientError,
        "InternalServerError",
        "service_unavailable",
        id="503",
    ),
    pytest.param(
        Failure(401, CANARY, "authentication_error", "invalid_api_key", "req_a1"),
        FatalAttemptError,
        "AuthenticationError",
        "authentication_error",
        id="401",
    ),
    pytest.param(
        Failure(403, CANARY, "permission_denied", None, "req_a1"),
        FatalAttemptError,
        "PermissionDeniedError",
        "permission_denied",
        id="403",
    ),
    pytest.param(
        Failure(404, CANARY, "not_found_error", "model_not_found", "req_a1"),
        FatalAttemptError,
        "NotFoundError",
        "not_found_error",
        id="404",
    ),
    pytest.param(
        Failure(400, f"Unsupported value: temperature. {CANARY}", "invalid_request_error"),
        FatalAttemptError,
        "BadRequestError",
        "invalid_request_error",
        id="400-other",
    ),
]

# Provider messages about the context (compaction may help) or about the requested output limit
# alone (no retry can help), all HTTP 400 without a `context_length_exceeded` code.
OVERFLOW_OR_OUTPUT_LIMIT = [
    pytest.param(
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130000 tokens. Please reduce the length of the messages.",
        ContextOverflowError,
        id="openai-context",
    ),
    pytest.param(VLLM_OVERFLOW, ContextOverflowError, id="vllm-messages-and-completion"),
    pytest.param(
        "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum "
        "context length is 2048 tokens and your request has 1500 input tokens "
        "(1000 > 2048 - 1500).",
        ContextOverflowError,
        id="vllm-output-limit-and-input",
    ),
    pytest.param(
        "`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` "
        "is less than the `context_window` for this model",
        FatalAttemptError,
        id="groq-max_tokens",
    ),
    pytest.param(
        "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
        "whereas you provided 100000.",
        FatalAttemptError,
        id="openai-max_tokens",
    ),
    pytest.param(
        "max_completion_tokens exceeds the model's maximum of 32768",
        FatalAttemptError,
        id="max_completion_tokens",
    ),
    pytest.param(
        "max_output_tokens: 200000 > 128000, the maximum allowed number of output tokens",
        FatalAttemptError,
        id="max_output_tokens",
    ),
]


def failing(failure: Failure, stream: bool, profile_id: str = OPEN) -> AttemptError:
    server = ChatServer(failure)
    with pytest.raises(AttemptError) as caught:
        run_once(adapter(profile(profile_id, stream=stream), server), [user("frame 1")])
    return caught.value


def assert_words_only_in_the_message(error: BaseException) -> None:
    """The provider's message is in the error's message, for the user, and never in the
    diagnostics that records keep."""
    assert CANARY in str(error)
    assert "\n" not in str(error)
    assert isinstance(error, AttemptError)
    assert error.diagnostics is not None
    assert CANARY not in json.dumps(error.diagnostics.to_dict())


@STREAM
@PROFILES
@pytest.mark.parametrize(("failure", "error", "exception_class", "error_type"), CLASSIFIED)
def test_http_errors_are_classified_with_allowlisted_diagnostics(
    stream: bool,
    profile_id: str,
    failure: Failure,
    error: type[AttemptError],
    exception_class: str,
    error_type: str | None,
) -> None:
    caught = failing(failure, stream, profile_id)

    assert type(caught) is error
    assert caught.diagnostics == Diagnostics(
        exception_class=exception_class,
        provider_error_type=error_type,
        http_status=failure.status,
        request_id=failure.request_id,
    )
    assert caught.retryable is (error is TransientError)
    assert_words_only_in_the_message(caught)


@pytest.mark.parametrize(("message", "error"), OVERFLOW_OR_OUTPUT_LIMIT)
def test_only_a_context_overflow_is_classified_as_one(
    message: str, error: type[AttemptError]
) -> None:
    caught = failing(Failure(400, f"{message} {CANARY}", "invalid_request_error"), stream=False)
    assert type(caught) is error
    assert caught.retryable is False
    assert_words_only_in_the_message(caught)


@pytest.mark.parametrize(
    "error_type",
    ["Invalid Request", "server error", "server_error\n", "Server_error", "x" * 81, "9_error"],
)
def test_a_malformed_provider_error_type_is_dropped(error_type: str) -> None:
    caught = failing(Failure(500, CANARY, error_type, None, "req_ok"), stream=False)
    assert type(caught) is TransientError
    assert caught.diagnostics is not None
    assert caught.diagnostics.provider_error_type is None
    assert caught.diagnostics.request_id == "req_ok"
    assert caught.diagnostics.http_status == 500
    assert_words_only_in_the_message(caught)


def test_the_longest_allowed_provider_error_type_is_kept() -> None:
    error_type = "e" + "_" * 79
    caught = failing(Failure(500, CANARY, error_type), stream=False)
    assert caught.diagnostics is not None
    assert caught.diagnostics.provider_error_type == error_type


def test_a_malformed_request_id_is_dropped() -> None:
    caught = failing(Failure(503, CANARY, "server_error", None, "req id; drop"), stream=True)
    assert caught.diagnostics is not None
    assert caught.diagnostics.request_id is None
    assert caught.diagnostics.provider_error_type == "server_error"


@pytest.mark.parametrize(
    ("raised", "exception_class"),
    [
        (httpx.ConnectError("connection refused"), "APIConnectionError"),
        (httpx.ReadTimeout("timed out"), "APITimeoutError"),
    ],
    ids=["connect", "timeout"],
)
@STREAM
def test_unreachable_provider_is_transient(
    stream: bool, raised: Exception, exception_class: str
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    client = httpx.Client(transport=httpx.MockTransport(handler))
    adapt = build_adapter(profile(OPEN, stream=stream), http_client=client, env=ENV)
    with pytest.raises(TransientError) as caught:
        run_once(adapt, [user("frame 1")])
    assert caught.value.diagnostics == Diagnostics(exception_class=exception_class)


class IdServer(ChatServer):
    """The scripted server, also keeping the request id of every answer it served."""

    def __init__(self, *replies: Answer | Failure) -> None:
        super().__init__(*replies)
        self.request_ids: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = super().handle(request)
        self.request_ids.append(response.headers["x-request-id"])
        return response


UNACCEPTED = [
    pytest.param(Answer("", refusal="I can't help with that."), RefusalError, id="refusal"),
    pytest.param(Answer("ACTION1", finish_reason="content_filter"), RefusalError, id="filter"),
    pytest.param(Answer("ACTION cut", finish_reason="length"), TruncatedError, id="length"),
    pytest.param(Answer("", tool_call=True), InvalidResponseError, id="tool-call"),
    pytest.param(Answer("ACTION1", finish_reason="pause"), InvalidResponseError, id="unfinished"),
    pytest.param(Answer("  "), InvalidResponseError, id="empty"),
    pytest.param(Answer("ACTION1", usage=False), InvalidResponseError, id="no-usage"),
]


@STREAM
@PROFILES
@pytest.mark.parametrize(("answer", "error"), UNACCEPTED)
def test_an_unaccepted_answer_is_diagnosed_as_the_error_raised(
    stream: bool, profile_id: str, answer: Answer, error: type[AttemptError]
) -> None:
    server = IdServer(answer)
    with pytest.raises(AttemptError) as caught:
        run_once(adapter(profile(profile_id, stream=stream), server), [user("frame 1")])
    assert type(caught.value) is error
    assert caught.value.diagnostics == Diagnostics(
        exception_class=error.__name__, request_id=server.request_ids[0]
    )


def test_a_stream_without_finish_reason_is_diagnosed_as_interrupted() -> None:
    server = IdServer(Answer("ACTION1", finish_reason=None))
    with pytest.raises(InterruptedStreamError) as caught:
        run_once(adapter(profile(OPEN), server), [user("frame 1")])
    assert caught.value.diagnostics == Diagnostics(
        exception_class="InterruptedStreamError", request_id=server.request_ids[0]
    )


@STREAM
def test_retries_of_unaccepted_answers_name_the_error_raised(stream: bool, tmp_path) -> None:
    server = IdServer(
        Answer("", refusal="I can't help with that."),
        Answer("ACTION cut", finish_reason="length"),
        Answer("ACTION1"),
    )
    run = session(profile(OPEN, stream=stream), server, records=RecordsWriter(tmp_path))
    run.turn([user("frame 1")], action)

    step = json.loads((tmp_path / "step_001.json").read_text(encoding="utf-8"))
    assert step["retries"] == [
        {
            "attempt": attempt,
            "kind": kind,
            "diagnostics": Diagnostics(exception_class, request_id=request_id).to_dict(),
        }
        for attempt, kind, exception_class, request_id in [
            (1, "refusal", "RefusalError", server.request_ids[0]),
            (2, "truncated", "TruncatedError", server.request_ids[1]),
        ]
    ]


@STREAM
@PROFILES
def test_usage_is_normalized(stream: bool, profile_id: str) -> None:
    server = ChatServer(
        Answer(
            "ACTION1",
            prompt_tokens=1200,
            completion_tokens=300,
            cached_tokens=1000,
            reasoning_tokens=250,
        )
    )
    result = run_once(adapter(profile(profile_id, stream=stream), server), [user("frame 1")])
    assert result.usage == Usage(
        input_tokens=1200,
        output_tokens=300,
        total_tokens=1500,
        reasoning_tokens=250,
        cache_read_tokens=1000,
        cache_write_tokens=0,
        cost=None,
        requests=1,
    )


@STREAM
def test_failed_attempt_usage_is_billed_to_the_accepted_turn(stream: bool) -> None:
    server = ChatServer(
        Answer("ACTION cut", finish_reason="length", prompt_tokens=100, completion_tokens=50),
        Answer("ACTION1", prompt_tokens=100, completion_tokens=20),
    )
    run = session(profile(OPEN, stream=stream), server)
    accepted = run.turn([user("frame 1")], action)
    expected = Usage(input_tokens=200, output_tokens=70, total_tokens=270, requests=2)
    assert accepted.usage == expected
    assert run.total_usage == expected


def test_transient_errors_are_retried_with_backoff() -> None:
    server = ChatServer(
        Failure(429, CANARY, "rate_limit_exceeded"),
        Failure(503, CANARY, "server_error"),
        Answer("ACTION1"),
    )
    sleeps: list[float] = []
    run = session(profile(ROLLING), server, sleep=sleeps.append)
    accepted = run.turn([user("frame 1")], action)

    assert accepted.attempts == 3
    assert [f.kind for f in accepted.failures] == ["transient", "transient"]
    assert [f.diagnostics["http_status"] for f in accepted.failures] == [429, 503]
    assert sleeps == [1.0, 2.0]


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (Failure(401, CANARY, "authentication_error"), FatalAttemptError),
        (Failure(400, CANARY, None, "context_length_exceeded"), ContextOverflowError),
    ],
    ids=["fatal", "overflow-without-compactor"],
)
def test_final_errors_end_the_turn_at_once(failure: Failure, error: type[AttemptError]) -> None:
    server = ChatServer(failure, Answer("ACTION1"))
    run = session(profile(OPEN), server)
    with pytest.raises(TurnFailed) as caught:
        run.turn([user("frame 1")], action)
    assert caught.value.attempts == 1
    assert type(caught.value.last_error) is error
    assert len(server.requests) == 1
    assert CANARY in str(caught.value)  # the provider's words reach the one running the turn


def test_records_carry_diagnostics_but_no_provider_message_or_key(tmp_path) -> None:
    server = ChatServer(Failure(500, CANARY, "server_error", None, "req_rec"), Answer("ACTION1"))
    run = session(profile(ROLLING), server, records=RecordsWriter(tmp_path))
    run.turn([user("frame 1")], action)

    step = json.loads((tmp_path / "step_001.json").read_text(encoding="utf-8"))
    assert step["retries"] == [
        {
            "attempt": 1,
            "kind": "transient",
            "diagnostics": {
                "exception_class": "InternalServerError",
                "provider_error_type": "server_error",
                "http_status": 500,
                "request_id": "req_rec",
            },
        }
    ]
    for path in tmp_path.iterdir():
        text = path.read_text(encoding="utf-8")
        assert CANARY not in text
        assert ENV["OPENAI_API_KEY"] not in text


def _sent_bytes(send: Any) -> bytes:
    """The request body the SDK puts on the wire when `send(client)` is called."""
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(200, json=_COMPLETION)

    client = openai.OpenAI(
        api_key="unused",
        base_url="http://wire.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    send(client)
    return seen[0]


_COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
_TEXT = st.text(max_size=20)
_PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": _TEXT})}
    ),
)
_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant"]),
        "content": st.one_of(_TEXT, st.lists(_PART, max_size=3)),
    },
    optional={"reasoning_content": _TEXT, "reasoning": _TEXT, "name": _TEXT},
)


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(_MESSAGE, min_size=1, max_size=5),
    extra=st.dictionaries(st.sampled_from(["top_k", "min_p", "chat_template_kwargs"]), _TEXT),
)
def test_messages_in_extra_body_put_the_same_bytes_on_the_wire(
    messages: list[dict[str, Any]], extra: dict[str, Any]
) -> None:
    body: dict[str, Any] = {"model": "m", "messages": messages, "temperature": 0.5}
    if extra:
        body["extra_body"] = extra
    plain = _sent_bytes(lambda client: client.chat.completions.create(**body))
    ours = _sent_bytes(lambda client: call_chat(client, body))
    assert ours == plain
    assert json.loads(ours)["messages"] == messages
