"""Helpers shared by the turn and compaction tests: adapters over the scripted server."""

from __future__ import annotations

import json
from typing import Any

import openai
from google import genai
from google.genai import types as genai_types

from chatwire import ChatServer
from googlewire import InteractionsServer
from satchel.compaction import SUMMARY_PROMPT, HarnessSummaryCompactor, HarnessSummaryPolicy
from satchel.providers import OpenAIChatAdapter, OpenSourceChatAdapter
from satchel.providers.chat.deepseek_chat import DeepSeekChatAdapter
from satchel.providers.google.adapter import GoogleInteractionsAdapter
from satchel.turns import InvalidAnswer, ModelResponse, NeutralMessage, SummaryCompactionAdapter


def client(server: ChatServer, api_key: str = "sk-test") -> openai.OpenAI:
    """A real `openai` client whose transport is the scripted server, with SDK retries off."""
    return openai.OpenAI(api_key=api_key, http_client=server.client(), max_retries=0)


def openai_adapter(
    server: ChatServer, *, stream: bool = False, limit_tokens: int = 10**9, **request: Any
) -> OpenAIChatAdapter:
    return OpenAIChatAdapter(
        client(server),
        {"model": "gpt-test", "stream": stream, **request},
        limit_tokens=limit_tokens,
    )


def open_source_adapter(
    server: ChatServer,
    *,
    stream: bool = False,
    replay: tuple[str, ...] = ("reasoning_content",),
    summary_max_tokens: int | None = None,
    **request: Any,
) -> OpenSourceChatAdapter:
    return OpenSourceChatAdapter(
        client(server),
        {"model": "open-test", "stream": stream, **request},
        reasoning_replay=replay,
        summary_max_tokens=summary_max_tokens,
    )


def deepseek_adapter(
    server: ChatServer,
    *,
    stream: bool = False,
    summary_max_tokens: int | None = None,
    **request: Any,
) -> DeepSeekChatAdapter:
    """DeepSeek thinking mode; serve its answers with `chatwire.DeepSeekServer`."""
    return DeepSeekChatAdapter(
        client(server),
        {"model": "deepseek-test", "stream": stream, **request},
        summary_max_tokens=summary_max_tokens,
    )


def google_adapter(
    server: InteractionsServer,
    *,
    stream: bool = False,
    summary_max_tokens: int | None = None,
    **request: Any,
) -> GoogleInteractionsAdapter:
    """Gemini Interactions through a real `google-genai` client on the scripted server, with
    the SDK's retries off."""
    options = genai_types.HttpOptions(
        base_url="https://gemini.test",
        retry_options=genai_types.HttpRetryOptions(attempts=1),
        httpx_client=server.client(),
    )
    settings = {
        "model": "gemini-test",
        "stream": stream,
        "store": False,
        "generation_config": {"thinking_level": "high", "thinking_summaries": "auto"},
        **request,
    }
    return GoogleInteractionsAdapter(
        genai.Client(api_key="g-test-key", http_options=options),
        settings,
        summary_max_tokens=summary_max_tokens,
    )


def compactor(
    adapter: SummaryCompactionAdapter,
    *,
    trigger_tokens: int = 10**6,
    max_attempts: int = 3,
    sleep: Any = None,
) -> HarnessSummaryCompactor:
    policy = HarnessSummaryPolicy(
        trigger_tokens=trigger_tokens,
        max_context_tokens=trigger_tokens * 2,
        max_attempts=max_attempts,
    )
    return HarnessSummaryCompactor(adapter, policy, sleep=sleep if sleep is not None else Sleeps())


def parse_action(response: ModelResponse) -> str:
    """Accept any answer that starts with ACT; the adapters decide what is complete."""
    if not response.text.startswith("ACT"):
        raise InvalidAnswer("not an action")
    return response.text


class Sleeps(list[float]):
    """An injected sleep that records the delays it was asked for."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def user(text: str) -> NeutralMessage:
    return {"role": "user", "content": text}


def system(text: str) -> NeutralMessage:
    return {"role": "system", "content": text}


def is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][-1] == {"role": "user", "content": SUMMARY_PROMPT}


def summary_bodies(server: ChatServer) -> list[dict[str, Any]]:
    return [body for body in server.requests if is_summary(body)]


def action_bodies(server: ChatServer) -> list[dict[str, Any]]:
    return [body for body in server.requests if not is_summary(body)]


def dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
