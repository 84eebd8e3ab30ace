"""The scripted Chat Completions server, driven through the real `openai` SDK over loopback."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from providers.provider_kit import ENV, OPEN, action, profile, system, user
from satchel.harness.script import Reply, ReplyUsage, ScriptError, load_script, parse_script
from satchel.harness.scripted import ScriptedModelServer, serve_forever
from satchel.providers import build_adapter
from satchel.providers.chat.wire import call_chat
from satchel.turns import InterruptedStreamError, Session

MESSAGES: list[Any] = [{"role": "user", "content": "frame 1"}]


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedModelServer] = []

    def start(script: Any) -> tuple[ScriptedModelServer, openai.OpenAI]:
        server = ScriptedModelServer(script).start()
        servers.append(server)
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=5)
        return server, client

    yield start
    for server in servers:
        server.stop()


def ask(client: openai.OpenAI, content: str = "frame 1", **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": content}], **kwargs
    )


def stream(client: openai.OpenAI, content: str = "frame 1", usage: bool = True) -> list[Any]:
    options = {"stream_options": {"include_usage": True}} if usage else {}
    return list(ask(client, content, stream=True, **options))


def test_non_streaming_text_with_reasoning_and_usage(serve: Any) -> None:
    server, client = serve(
        [
            Reply("ACTION1", reasoning="look left", usage=ReplyUsage(11, 7)),
            Reply("ACTION2"),
        ]
    )
    first = ask(client)
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert first.object == "chat.completion"
    assert first.model == "m"
    choice = first.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("ACTION1", "stop")
    assert choice.message.model_extra == {"reasoning_content": "look left"}
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (11, 7)
    assert first.usage.total_tokens == 18

    second = ask(client, "x" * 400)
    assert second.choices[0].message.content == "ACTION2"
    assert second.choices[0].message.model_extra == {}
    assert second.usage is not None  # computed when the reply names none
    assert second.usage.prompt_tokens >= 100
    assert second.usage.completion_tokens >= 1


def test_streaming_reasoning_then_content_then_finish_then_usage(serve: Any) -> None:
    _, client = serve([Reply("ACTION1 now", reasoning="the door is left", usage=ReplyUsage(9, 4))])
    chunks = stream(client)
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [chunk.choices[0].delta for chunk in chunks if chunk.choices]
    reasoning = [d.model_extra["reasoning_content"] for d in deltas if d.model_extra]
    content = [d.content for d in deltas if d.content]
    assert "".join(reasoning) == "the door is left"
    assert "".join(content) == "ACTION1 now"
    assert len(content) > 1 and len(reasoning) > 1
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not d.model_extra for d in deltas[first_content:])  # reasoning comes first
    finish, last = chunks[-2], chunks[-1]
    assert finish.choices[0].finish_reason == "stop" and finish.usage is None
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (9, 4)


def test_streaming_without_include_usage_sends_no_usage_chunk(serve: Any) -> None:
    _, client = serve([Reply("ACTION1")])
    chunks = stream(client, usage=False)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)


def test_queues_are_chosen_by_request_content_with_star_fallback(serve: Any) -> None:
    server, client = serve(
        {
            "frame 2": [Reply("TWO-a"), Reply("TWO-b")],
            "frame": [Reply("ANY-FRAME")],
            "*": [Reply("STAR-1"), Reply("STAR-2")],
        }
    )
    assert ask(client, "hello").choices[0].message.content == "STAR-1"
    # the first matching key in script order wins, even when a later key also matches
    assert ask(client, "this is frame 2").choices[0].message.content == "TWO-a"
    assert ask(client, "frame 7").choices[0].message.content == "ANY-FRAME"
    parts = [{"type": "text", "text": "see frame 2"}]
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": parts}]
    )
    assert answer.choices[0].message.content == "TWO-b"
    assert ask(client, "hello again").choices[0].message.content == "STAR-2"
    assert server.remaining() == {"frame 2": 0, "frame": 0, "*": 0}


def test_an_exhausted_queue_answers_410(serve: Any) -> None:
    _, client = serve({"frame 1": [Reply("ONE")], "*": [Reply("STAR")]})
    ask(client)
    with pytest.raises(openai.APIStatusError) as caught:
        ask(client)  # no fallback to "*": the matched queue is exhausted
    assert caught.value.status_code == 410
    assert "exhausted" in caught.value.message
    assert "'frame 1'" in caught.value.message
    assert ask(client, "other").choices[0].message.content == "STAR"


def test_no_matching_key_and_no_star_answers_410(serve: Any) -> None:
    _, client = serve({"frame 9": [Reply("NINE")]})
    with pytest.raises(openai.APIStatusError) as caught:
        ask(client)
    assert caught.value.status_code == 410
    assert "exhausted" in caught.value.message


def test_context_overflow_is_a_bad_request_with_the_code(serve: Any) -> None:
    _, client = serve([Reply(status=400, error_code="context_length_exceeded")])
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client)
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.type == "invalid_request_error"
    body = caught.value.body
    assert isinstance(body, dict) and set(body) >= {"message", "type", "code"}


@pytest.mark.parametrize("stream_mode", [False, True], ids=["json", "stream"])
def test_transient_errors_map_to_sdk_exceptions_with_retry_after(
    serve: Any, stream_mode: bool
) -> None:
    _, client = serve(
        [
            Reply(status=429, error_code="rate_limit_exceeded"),
            Reply(status=503, error_type="server_error"),
            Reply(status=500),
        ]
    )
    with pytest.raises(openai.RateLimitError) as limited:
        ask(client, stream=stream_mode)
    assert limited.value.code == "rate_limit_exceeded"
    assert limited.value.response.headers["retry-after"] == "0"
    with pytest.raises(openai.InternalServerError) as unavailable:
        ask(client, stream=stream_mode)
    assert unavailable.value.status_code == 503
    assert unavailable.value.response.headers["retry-after"] == "0"
    with pytest.raises(openai.InternalServerError) as failed:
        ask(client, stream=stream_mode)
    assert failed.value.status_code == 500
    assert "retry-after" not in failed.value.response.headers


def test_finish_reason_length_and_refusal_are_seen_by_the_sdk(serve: Any) -> None:
    _, client = serve(
        [
            Reply("ACTI", finish_reason="length"),
            Reply("ACTI", finish_reason="length"),
            Reply(refusal="I will not", finish_reason="content_filter"),
            Reply(refusal="I will not", finish_reason="content_filter"),
        ]
    )
    assert ask(client).choices[0].finish_reason == "length"
    assert stream(client)[-2].choices[0].finish_reason == "length"
    refused = ask(client).choices[0]
    assert (refused.finish_reason, refused.message.refusal) == ("content_filter", "I will not")
    assert refused.message.content is None
    chunks = stream(client)
    assert "".join(c.choices[0].delta.refusal or "" for c in chunks if c.choices) == "I will not"
    assert chunks[-2].choices[0].finish_reason == "content_filter"


def test_a_cut_stream_ends_the_sdk_iteration_without_finish_reason_or_usage(serve: Any) -> None:
    server, client = serve([Reply("ACTION1 and more", reasoning="hmm", cut_stream=True)] * 2)
    chunks = stream(client)  # the SDK's iteration simply ends: no exception
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices[0].finish_reason is None for chunk in chunks)
    content = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert len(content) == 1 and "ACTION1 and more".startswith(content[0])
    assert content[0] != "ACTION1 and more"
    # the shared Chat Completions reader classifies it as an interrupted stream
    with pytest.raises(InterruptedStreamError, match="without a finish reason"):
        call_chat(client, {"model": "m", "messages": MESSAGES, "stream": True})
    assert len(server.requests) == 2


def test_cut_stream_is_ignored_for_json_requests(serve: Any) -> None:
    _, client = serve([Reply("ACTION1", cut_stream=True)])
    answer = ask(client)
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == (
        "ACTION1",
        "stop",
    )


def test_delay_is_served_before_the_answer(serve: Any) -> None:
    _, client = serve([Reply("SLOW", delay_s=0.2), Reply("SLOW", delay_s=0.2)])
    started = time.monotonic()
    ask(client)
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    stream(client)
    assert time.monotonic() - started >= 0.2


def test_requests_are_recorded_in_order_and_headers_are_not(serve: Any) -> None:
    server, client = serve([Reply("A"), Reply("B"), Reply("C")])
    ask(client, "first")
    stream(client, "second")
    ask(client, "third", temperature=0.5)
    requests = server.requests
    assert [r["messages"][0]["content"] for r in requests] == ["first", "second", "third"]
    assert requests[1]["stream"] is True
    assert requests[1]["stream_options"] == {"include_usage": True}
    assert requests[2]["temperature"] == 0.5
    assert "test" not in json.dumps(requests)  # the api key travels only in a header
    requests.clear()  # a snapshot: the server's record is untouched
    assert len(server.requests) == 3


def test_concurrent_requests_are_all_recorded(serve: Any) -> None:
    server, client = serve([Reply(f"R{n}") for n in range(8)])
    answers: list[str] = []

    def one(n: int) -> None:
        answers.append(ask(client, f"request {n}").choices[0].message.content)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [f"R{n}" for n in range(8)]
    assert len(server.requests) == 8


def test_other_routes_are_404_in_openai_error_shape_and_models_are_listed(serve: Any) -> None:
    server, client = serve([])
    assert [model.id for model in client.models.list()] == ["scripted-model"]
    for method, path in [("GET", "/v1/nothing"), ("POST", "/v1/completions"), ("DELETE", "/")]:
        answer = httpx.request(method, server.base_url.removesuffix("/v1") + path, json={})
        assert answer.status_code == 404
        error = answer.json()["error"]
        assert set(error) >= {"message", "type", "code"}
    bad = httpx.post(server.base_url + "/chat/completions", content=b"not json")
    assert bad.status_code == 400 and "error" in bad.json()
    assert server.requests == []


def test_the_server_writes_nothing_to_stderr(serve: Any, capfd: pytest.CaptureFixture[str]) -> None:
    _, client = serve([Reply("A"), Reply(status=500)])
    ask(client)
    with pytest.raises(openai.InternalServerError):
        ask(client)
    httpx.get(f"{client.base_url}nothing")
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


def test_unknown_and_invalid_reply_fields_are_refused_by_name() -> None:
    with pytest.raises(ScriptError, match="txt: unknown field"):
        Reply.from_dict({"txt": "hello"})
    with pytest.raises(ScriptError, match=r"usage\.cached: unknown field"):
        Reply.from_dict({"usage": {"prompt_tokens": 1, "completion_tokens": 1, "cached": 2}})
    with pytest.raises(ScriptError, match="finish_reason"):
        Reply.from_dict({"finish_reason": "tool_calls"})
    with pytest.raises(ScriptError, match="status"):
        Reply(status=200)
    with pytest.raises(ScriptError, match="error_code"):
        Reply("text", error_code="x")
    with pytest.raises(ScriptError, match="delay_s"):
        Reply(delay_s=-1)
    assert Reply.from_dict("ACTION1") == Reply("ACTION1")
    assert Reply.from_dict({"usage": {"prompt_tokens": 3, "completion_tokens": 2}}).usage == (
        ReplyUsage(3, 2)
    )


def test_a_bad_script_file_is_refused_naming_file_key_index_and_field(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text('"frame 1":\n  - {text: ok}\n  - {text: ok, colour: red}\n', encoding="utf-8")
    with pytest.raises(ScriptError) as caught:
        load_script(path)
    message = str(caught.value)
    assert str(path) in message
    assert "'frame 1'" in message and "reply 1" in message and "colour" in message

    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(ScriptError, match=r"broken\.json: not valid JSON"):
        load_script(broken)
    with pytest.raises(ScriptError, match=r"missing\.yaml"):
        load_script(tmp_path / "missing.yaml")
    with pytest.raises(ScriptError, match="expected a list of replies"):
        parse_script({"*": "ACTION1"})


def test_script_files_load_as_yaml_or_json_and_a_bare_list_is_star(tmp_path: Path) -> None:
    yaml_file = tmp_path / "script.yml"
    yaml_file.write_text(
        '"frame 1":\n  - {text: ACTION1, reasoning: left}\n"*":\n  - ACTION2\n'
        "  - {status: 400, error_code: context_length_exceeded}\n",
        encoding="utf-8",
    )
    assert load_script(yaml_file) == {
        "frame 1": (Reply("ACTION1", reasoning="left"),),
        "*": (Reply("ACTION2"), Reply(status=400, error_code="context_length_exceeded")),
    }
    json_file = tmp_path / "script.json"
    json_file.write_text(json.dumps([{"text": "A", "delay_s": 0.5}]), encoding="utf-8")
    assert load_script(json_file) == {"*": (Reply("A", delay_s=0.5),)}


def test_the_open_source_adapter_accepts_a_turn_through_the_server(serve: Any) -> None:
    thought = "  The lamp is on.\n"
    server, _ = serve({"frame 1": [Reply("ACTION3", reasoning=thought)]})
    prof = profile(OPEN, stream=True, settings={"client.base_url": server.base_url})
    run = Session(build_adapter(prof, env=ENV), sleep=lambda seconds: None)
    turn = run.turn([system("Answer with one ACTION."), user("frame 1")], action)
    assert turn.action == "ACTION3"
    assert turn.response.reasoning == thought
    assert turn.attempts == 1
    assert turn.usage.input_tokens > 0 and turn.usage.output_tokens > 0
    (sent,) = server.requests
    assert sent["model"] == prof.request["model"]
    assert sent["stream"] is True
    assert sent["messages"][-1] == user("frame 1")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_forever_announces_the_url_and_stops_on_a_signal(signum: int) -> None:
    seen: list[str] = []
    before = signal.getsignal(signum)

    def announce(url: str) -> None:
        client = openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=5)
        seen.append(ask(client).choices[0].message.content or "")
        seen.append(url)
        signal.raise_signal(signum)

    serve_forever([Reply("HELLO")], port=0, announce=announce)
    assert seen[0] == "HELLO"
    assert seen[1].startswith("http://127.0.0.1:") and seen[1].endswith("/v1")
    assert signal.getsignal(signum) == before  # the handlers are put back
    with pytest.raises(httpx.ConnectError):
        httpx.get(seen[1] + "/models", timeout=1)
