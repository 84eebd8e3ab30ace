"""The errors of real open-weight servers, in each server's own body, through the real `openai`
SDK over `httpx.MockTransport`: an overflow is a `ContextOverflowError` carrying the sizes the
body states; a busy or loading server is a `TransientError`; other refusals stay fatal.

Sources: llama.cpp's body was answered by its server (the `xllamacpp` wheel) for a prompt past
`n_ctx`; the others are each server's documented or published shapes (see docs/providers/
open-source-chat-completions.md, "Errors of open-weight servers").
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_kit import OPEN, ROLLING, action, adapter, profile, run_once, sent, session, user

from chatwire import Answer, ChatServer, Raw
from satchel.turns import (
    AttemptError,
    ContextOverflowError,
    FatalAttemptError,
    TransientError,
    TurnFailed,
)

STREAM = pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
LLAMA_CPP_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (12381 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 12381,
        "n_ctx": 8192,
    }
}


def vllm(message: str, *, nested: bool = True, code: int = 400) -> dict[str, Any]:
    """vLLM's `ErrorResponse`: top level up to 0.10, under `error` since."""
    error = {"message": message, "type": "BadRequestError", "param": None, "code": code}
    return {"error": error} if nested else {"object": "error", **error}


def ollama(message: str, error_type: str = "invalid_request_error") -> dict[str, Any]:
    """Ollama's OpenAI-compatible error (`openai.NewError`): `code` is always null."""
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


OVERFLOWS = [
    pytest.param(LLAMA_CPP_OVERFLOW, 12381, 8192, id="llama.cpp"),
    pytest.param(
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing the "
                "context size or enable context shift",
                "type": "invalid_request_error",
            }
        },
        None,
        None,
        id="llama.cpp-without-counts",
    ),
    pytest.param(
        vllm(
            "This model's maximum context length is 8192 tokens. However, you requested 12893 "
            "tokens (12381 in the messages, 512 in the completion). Please reduce the length of "
            "the messages or completion.",
            nested=False,
        ),
        12381,
        8192,
        id="vllm-0.6",
    ),
    pytest.param(
        vllm(
            "This model's maximum context length is 8192 tokens. However, your request has 12381 "
            "input tokens. Please reduce the length of the input messages."
        ),
        12381,
        8192,
        id="vllm-input-tokens",
    ),
    pytest.param(
        vllm(
            "This model's maximum context length is 8192 tokens. However, you requested 512 "
            "output tokens and your prompt contains at least 7681 input tokens, for a total of "
            "at least 8193 tokens. Please reduce the length of the input prompt or the number "
            "of requested output tokens."
        ),
        7681,
        8192,
        id="vllm-output-and-input",
    ),
    pytest.param(
        vllm(
            "The decoder prompt (length 12381) is longer than the maximum model length of 8192. "
            "Make sure that `max_model_len` is no smaller than the number of text tokens."
        ),
        12381,
        8192,
        id="vllm-v1-decoder-prompt",
    ),
    pytest.param(
        {
            "object": "error",
            "message": "The input (12381 tokens) is longer than the model's context length "
            "(8192 tokens).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        12381,
        8192,
        id="sglang",
    ),
    pytest.param(
        {
            "object": "error",
            "message": "Requested token count exceeds the model's maximum context length of 8192 "
            "tokens. You requested a total of 12893 tokens: 12381 tokens from the input messages "
            "and 512 tokens for the completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        12381,
        8192,
        id="sglang-with-completion",
    ),
    pytest.param(
        ollama("prompt too long; exceeded max context length by 4189 tokens"),
        None,
        None,
        id="ollama",
    ),
    pytest.param(
        ollama("the input length exceeds the context length"), None, None, id="ollama-input"
    ),
    pytest.param(
        ollama(json.dumps(LLAMA_CPP_OVERFLOW)), 12381, 8192, id="ollama-passing-llama.cpp-on"
    ),
]

TRANSIENT = [
    pytest.param(
        503,
        {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
        "Loading model",
        id="llama.cpp-loading",
    ),
    pytest.param(
        503,
        {"error": {"code": 503, "message": "no slot available", "type": "unavailable_error"}},
        "no slot available",
        id="llama.cpp-no-slot",
    ),
    pytest.param(
        503,
        ollama("server busy, please try again.  maximum pending requests exceeded", "api_error"),
        "server busy",
        id="ollama-busy",
    ),
    pytest.param(
        503,
        {"error": "server busy, please try again.  maximum pending requests exceeded"},
        "server busy",
        id="ollama-native-busy",
    ),
    pytest.param(
        503,
        vllm("The request queue is full; retry later.", nested=False, code=503),
        "queue is full",
        id="vllm-overloaded",
    ),
    pytest.param(
        429,
        {"error": "too many requests"},
        "too many requests",
        id="string-rate-limit",
    ),
]


def failing(status: int, body: Any, stream: bool, profile_id: str = OPEN) -> AttemptError:
    server = ChatServer(Raw(status, body))
    with pytest.raises(AttemptError) as caught:
        run_once(adapter(profile(profile_id, stream=stream), server), [user("frame 1")])
    return caught.value


@STREAM
@pytest.mark.parametrize("profile_id", [OPEN, ROLLING], ids=["open", "rolling"])
@pytest.mark.parametrize(("body", "prompt_tokens", "context_tokens"), OVERFLOWS)
def test_each_servers_overflow_is_a_context_overflow_with_its_sizes(
    stream: bool,
    profile_id: str,
    body: dict[str, Any],
    prompt_tokens: int | None,
    context_tokens: int | None,
) -> None:
    caught = failing(400, body, stream, profile_id)
    assert type(caught) is ContextOverflowError
    assert (caught.prompt_tokens, caught.context_tokens) == (prompt_tokens, context_tokens)
    assert caught.retryable is False
    assert "\n" not in str(caught)


@STREAM
@pytest.mark.parametrize(("status", "body", "words"), TRANSIENT)
def test_a_busy_or_loading_server_is_retried_with_its_words_kept(
    stream: bool, status: int, body: dict[str, Any], words: str
) -> None:
    caught = failing(status, body, stream)
    assert type(caught) is TransientError
    assert caught.retryable is True
    assert f"HTTP {status}" in str(caught) and words in str(caught)


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "code": 400,
                "message": "Multimodal data provided, but model does not support multimodal "
                "requests.",
                "type": "invalid_request_error",
            }
        },
        ollama("model 'qwen3:0.6b' not found", "not_found_error"),
        vllm("max_tokens must be at least 1, got 0.", nested=False),
    ],
    ids=["llama.cpp-multimodal", "ollama-unknown-model", "vllm-bad-max_tokens"],
)
def test_other_refusals_of_these_servers_stay_fatal(body: dict[str, Any]) -> None:
    caught = failing(400, body, stream=False)
    assert type(caught) is FatalAttemptError


def test_a_rolling_window_is_trimmed_to_the_servers_count_after_an_overflow() -> None:
    server = ChatServer(Answer("ACTION1"), Answer("ACTION2"))
    rolling = session(profile(ROLLING), server)
    rolling.turn([user("frame 1")], action)
    rolling.turn([user("frame 2")], action)
    server.push(Raw(400, LLAMA_CPP_OVERFLOW), Answer("ACTION3"))

    turn = rolling.turn([user("frame 3")], action)

    assert turn.action == "ACTION3"
    assert [failure.kind for failure in turn.failures] == ["context_overflow"]
    refused, retried = sent(server, -2), sent(server, -1)
    assert [m["content"] for m in refused if m["role"] == "user"] == [
        "frame 1",
        "frame 2",
        "frame 3",
    ]
    assert [m["content"] for m in retried] == ["frame 3"]
    # The calibrated estimate holds the window until the model's context is near, then trims.
    server.push(Answer("ACTION4"), Answer("ACTION5"))
    rolling.turn([user("frame 4")], action)
    assert [m["content"] for m in sent(server)] == ["frame 3", "ACTION3", "frame 4"]
    rolling.turn([user("frame 5")], action)
    assert [m["content"] for m in sent(server)] == ["frame 5"]


@pytest.mark.parametrize("profile_id", [OPEN, ROLLING], ids=["open", "rolling"])
def test_an_overflow_with_nothing_to_drop_fails_the_turn_at_once(profile_id: str) -> None:
    server = ChatServer(Raw(400, LLAMA_CPP_OVERFLOW))
    with pytest.raises(TurnFailed) as caught:
        session(profile(profile_id), server).turn([user("frame 1")], action)
    assert isinstance(caught.value.last_error, ContextOverflowError)
    assert caught.value.attempts == 1
    assert len(server.requests) == 1
