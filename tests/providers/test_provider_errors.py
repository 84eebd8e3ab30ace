"""A provider's error in its own words: the real SDKs over `httpx.MockTransport` answer errors in
each provider's documented shape; the message a user sees keeps the status, the provider's code
and message and, for a connection that failed, the URL tried; no key ever, and the records keep
only the allowlisted diagnostics."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from anthropicwire import MessagesServer
from chatwire import Answer, ChatServer, Failure
from providers.provider_kit import CLAUDE, ENV, OPEN, action, profile, session, user
from satchel.providers import build_adapter
from satchel.providers.kit.errors import PROVIDER_TEXT_LIMIT, provider_words
from satchel.turns import FatalAttemptError, Session, TransientError, TurnFailed

MISSING = "The model `Qwen/Qwen3-32B` does not exist"
OPAQUE = "gAAAAB" + "x7Qz" * 20  # what an encrypted item or a signature looks like


def test_a_refusal_keeps_the_status_code_and_message() -> None:
    server = ChatServer(Failure(404, MISSING, type="invalid_request_error", code="model_not_found"))
    with pytest.raises(TurnFailed) as caught:
        session(profile(OPEN), server).turn([user("frame 1")], action)
    said = f"HTTP 404 model_not_found: {MISSING}"
    assert said in str(caught.value)
    assert str(caught.value).startswith("step 1 abandoned after 1 attempt(s): ")
    assert isinstance(caught.value.last_error, FatalAttemptError)
    diagnostics = caught.value.last_error.diagnostics
    assert diagnostics is not None and MISSING not in json.dumps(diagnostics.to_dict())


def test_no_key_bearer_token_or_opaque_run_survives_in_the_message() -> None:
    key = ENV["OPEN_WEIGHT_API_KEY"]
    echoed = f"bad credentials {key}; sent Authorization: Bearer abc.def; state {OPAQUE}"
    server = ChatServer(Failure(401, echoed, type="authentication_error", code="invalid_api_key"))
    with pytest.raises(TurnFailed) as caught:
        session(profile(OPEN), server).turn([user("frame 1")], action)
    message = str(caught.value)
    assert "HTTP 401 invalid_api_key: bad credentials" in message
    for secret in (key, "abc.def", OPAQUE):
        assert secret not in message


def test_the_retry_warning_keeps_allowlisted_diagnostics_not_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ChatServer(
        Failure(503, f"upstream said {OPAQUE}", type="server_error"), Answer("ACTION1")
    )
    caplog.set_level(logging.WARNING, "satchel.turns")
    turn = session(profile(OPEN), server).turn([user("frame 1")], action)
    assert turn.attempts == 2
    (warning,) = [record.getMessage() for record in caplog.records]
    assert warning == (
        "attempt 1 of step 1 failed: transient: HTTP 503 server_error "
        "(InternalServerError, request req_failure)"
    )


def test_a_connection_that_fails_names_the_url_tried() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    prof = profile(OPEN, settings={"client.max_retries": 0})
    adapter = build_adapter(
        prof, http_client=httpx.Client(transport=httpx.MockTransport(refuse)), env=ENV
    )
    with pytest.raises(TurnFailed) as caught:
        Session(adapter, sleep=lambda seconds: None).turn([user("frame 1")], action)
    assert isinstance(caught.value.last_error, TransientError)
    assert f"the provider at {prof.client.base_url}/chat/completions could not be reached" in str(
        caught.value
    )


def test_an_anthropic_refusal_keeps_its_type_and_message() -> None:
    server = MessagesServer(Failure(404, "model: claude-opus-9", type="not_found_error"))
    with pytest.raises(TurnFailed) as caught:
        session(profile(CLAUDE), server).turn([user("frame 1")], action)
    assert "HTTP 404 not_found_error: model: claude-opus-9" in str(caught.value)


def test_provider_words_are_one_bounded_line() -> None:
    said = provider_words(400, "bad_request", "first line\n\n  second\tline " + "word " * 200)
    assert "\n" not in said and said.startswith("HTTP 400 bad_request: first line second line")
    assert len(said) <= len("HTTP 400 bad_request: ") + PROVIDER_TEXT_LIMIT
    assert provider_words(None, None, None) == "no details"


def test_a_long_model_id_is_kept_and_an_opaque_run_is_masked() -> None:
    model = "meta-llama/Llama-3.3-70B-Instruct-Turbo-Free"
    said = provider_words(404, "model_not_found", f"The model `{model}` does not exist {OPAQUE}")
    assert said == f"HTTP 404 model_not_found: The model `{model}` does not exist [redacted]"
