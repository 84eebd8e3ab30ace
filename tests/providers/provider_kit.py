"""Helpers for the provider tests: example profiles with edits, sessions on the scripted server."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from anthropicwire import MessagesServer
from chatwire import ChatServer
from responseswire import ResponsesServer
from satchel.providers import Profile, build_adapter, parse_profiles
from satchel.providers import profiles as profiles_module
from satchel.turns import (
    InvalidAnswer,
    ModelResponse,
    ModelTurnRequest,
    NeutralMessage,
    ProviderAdapter,
    RuntimeState,
    Session,
)

EXAMPLES_FILE = Path(profiles_module.__file__).parent / "profiles" / "examples.yaml"
REPO_ROOT = Path(__file__).resolve().parents[2]
ROLLING = "gpt-5-mini-chat-rolling"
OPEN = "qwen3-open-weight-continuous"
RESPONSES = "gpt-5.6-sol-responses-continuous"
HANDLE = "gpt-5.6-sol-responses-handle"
XAI = "grok-4.6-xai-responses-native"
CLAUDE = "claude-opus-5-messages-native"
GLM = "glm-5.3-flash-continuous"
QWEN = "qwen3.8-27b-continuous"
DEEPSEEK = "deepseek-thinking-continuous"
GEMINI = "gemini-3.5-pro-interactions-continuous"
ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-test-key",
    "OPENAI_API_KEY": "sk-test-key",
    "OPEN_WEIGHT_API_KEY": "ow-test-key",
    "XAI_API_KEY": "xai-test-key",
    "DEEPSEEK_API_KEY": "ds-test-key",
    "GEMINI_API_KEY": "gm-test-key",
}
DELETE = object()


@cache
def _examples() -> tuple[dict[str, Any], ...]:
    return tuple(yaml.safe_load(EXAMPLES_FILE.read_text(encoding="utf-8")))


def entry(profile_id: str, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A deep copy of an example entry with dotted-path `settings` applied (`DELETE` removes)."""
    for raw in _examples():
        if raw["id"] == profile_id:
            data = copy.deepcopy(raw)
            break
    else:
        raise KeyError(profile_id)
    for dotted, value in (settings or {}).items():
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return data


def load(data: dict[str, Any]) -> Profile:
    return parse_profiles([data])[data["id"]]


def profile(
    profile_id: str, *, stream: bool = True, settings: Mapping[str, Any] | None = None
) -> Profile:
    """An example profile, streamed or not, with `settings` applied."""
    edits: dict[str, Any] = {"request.stream": True if stream else DELETE}
    edits.update(settings or {})
    return load(entry(profile_id, edits))


def adapter(
    prof: Profile, server: ChatServer | ResponsesServer | MessagesServer
) -> ProviderAdapter:
    return build_adapter(prof, http_client=server.client(), env=ENV)


def session(
    prof: Profile, server: ChatServer | ResponsesServer | MessagesServer, **kwargs: Any
) -> Session:
    kwargs.setdefault("sleep", lambda seconds: None)
    return Session(adapter(prof, server), **kwargs)


def run_once(
    adapt: ProviderAdapter, messages: Sequence[NeutralMessage], state: RuntimeState | None = None
) -> Any:
    """One adapter attempt from `state` (the initial state by default)."""
    start = state if state is not None else adapt.initial_state()
    return adapt.run(ModelTurnRequest(start, tuple(messages)))


def user(text: str) -> NeutralMessage:
    return {"role": "user", "content": text}


def system(text: str) -> NeutralMessage:
    return {"role": "system", "content": text}


def assistant(text: str, **reasoning: str) -> NeutralMessage:
    return {"role": "assistant", "content": text, **reasoning}


def any_text(response: ModelResponse) -> str:
    """A parser that accepts every answer."""
    return response.text


def action(response: ModelResponse) -> str:
    """A parser that accepts only answers starting with `ACTION`."""
    if not response.text.startswith("ACTION"):
        raise InvalidAnswer("not an action")
    return response.text


def sent(server: ChatServer, index: int = -1) -> list[NeutralMessage]:
    return server.requests[index]["messages"]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def estimate(messages: Sequence[NeutralMessage]) -> int:
    """The documented request estimate: `ceil(chars / 3.5) + 4` tokens per message."""
    return sum(math.ceil(len(m["content"]) / 3.5) + 4 for m in messages)
