"""Model profiles: the examples load, and every invalid combination is refused naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from provider_kit import (
    CLAUDE,
    DEEPSEEK,
    DELETE,
    ENV,
    EXAMPLES_FILE,
    GEMINI,
    GLM,
    HANDLE,
    OPEN,
    QWEN,
    RESPONSES,
    ROLLING,
    XAI,
    entry,
    load,
    run_once,
    user,
)

from chatwire import Answer, ChatServer
from satchel.providers import (
    OpenAIChatAdapter,
    OpenSourceChatAdapter,
    ProfileError,
    build_adapter,
    example_profiles,
    load_profiles,
    parse_profiles,
)
from satchel.turns import ConfigurationError

SECRET = "sk-proj-CANARYKEY0123456789abcdef"


def test_the_example_profiles_load() -> None:
    profiles = example_profiles()
    assert sorted(profiles) == sorted(
        [ROLLING, OPEN, GLM, QWEN, DEEPSEEK, GEMINI, RESPONSES, HANDLE, XAI, CLAUDE]
    )
    assert load_profiles(EXAMPLES_FILE) == profiles

    rolling = profiles[ROLLING]
    assert rolling.runtime.adapter_id == "openai.chat_completions.v1"
    assert rolling.runtime.strategy == "manual_rolling"
    assert rolling.runtime.trim.limit_tokens == 120000
    assert rolling.client.api_key_env == "OPENAI_API_KEY"
    assert rolling.request["model"] == "gpt-5-mini"

    open_weight = profiles[OPEN]
    assert open_weight.runtime.adapter_id == "open_source.chat_completions.v1"
    assert open_weight.runtime.strategy == "continuous_conversation"
    assert open_weight.runtime.reasoning_replay == ("reasoning_content",)
    assert open_weight.runtime.compaction.strategy == "harness_summary"
    assert open_weight.output_limit() == 32768

    for name, aliases in (
        (GLM, ("reasoning_content",)),
        (QWEN, ("reasoning_content", "reasoning")),
    ):
        seed = profiles[name]
        assert seed.runtime.adapter_id == "open_source.chat_completions.v1"
        assert seed.runtime.reasoning_replay == aliases
        assert seed.runtime.compaction.strategy == "harness_summary"
        assert seed.request["stream"] is True

    claude = profiles[CLAUDE]
    assert claude.runtime.adapter == "anthropic.messages.v1"
    assert claude.runtime.compaction.strategy == "native"
    assert claude.runtime.compaction.trigger_tokens == 175_000
    assert claude.agent.MAX_CONTEXT_LENGTH == 1_000_000
    assert claude.request["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert claude.request["cache_control"] == {"type": "ephemeral"}
    assert "compact-2026-09-04" in claude.request["betas"]
    assert claude.client.api_key_env == "ANTHROPIC_API_KEY"
    assert (claude.pricing.input, claude.pricing.output) == (5.0, 25.0)  # type: ignore[union-attr]


def test_the_example_profiles_build_their_adapters() -> None:
    profiles = example_profiles()
    rolling = build_adapter(profiles[ROLLING], http_client=ChatServer().client(), env=ENV)
    assert isinstance(rolling, OpenAIChatAdapter)
    assert rolling.limit_tokens == 120000
    assert rolling.target_tokens == 84000
    assert rolling.settings()["stream_options"] == {"include_usage": True}

    open_weight = build_adapter(profiles[OPEN], http_client=ChatServer().client(), env=ENV)
    assert isinstance(open_weight, OpenSourceChatAdapter)
    assert open_weight.handling.reasoning_fields == ("reasoning_content",)
    assert open_weight.model == "Qwen/Qwen3-32B"
    assert SECRET not in str(open_weight.settings())


REFUSED = [
    (ROLLING, {"runtime.adapter_id": "acme.chat.v9"}, "runtime.adapter_id"),
    (ROLLING, {"request.extra_body": {"messages": []}}, "request.extra_body.messages"),
    (OPEN, {"request.extra_body": {"tools": []}}, "request.extra_body.tools"),
    (ROLLING, {"runtime.adapter_id": "anthropic.messages.v1"}, "runtime.state"),
    (ROLLING, {"runtime.state": "continuous_conversation"}, "runtime.state"),
    (ROLLING, {"runtime.state": "previous_response_id"}, "runtime.state"),
    (ROLLING, {"runtime.state": "bogus"}, "runtime.state"),
    (OPEN, {"runtime.state": "manual_rolling"}, "runtime.state"),
    (ROLLING, {"runtime.compaction.strategy": "harness_summary"}, "runtime.compaction.strategy"),
    (OPEN, {"runtime.compaction.strategy": "native"}, "runtime.compaction.strategy"),
    (OPEN, {"runtime.compaction.trigger_tokens": DELETE}, "runtime.compaction.trigger_tokens"),
    (OPEN, {"runtime.compaction.trigger_tokens": 213376}, "runtime.compaction.trigger_tokens"),
    (OPEN, {"runtime.compaction.trigger_tokens": 300000}, "runtime.compaction.trigger_tokens"),
    (
        OPEN,
        {"runtime.compaction.summary_input_headroom_tokens": 54377},
        "runtime.compaction.trigger_tokens",
    ),
    (OPEN, {"agent.MAX_CONTEXT_LENGTH": 223768}, "runtime.compaction.trigger_tokens"),
    (OPEN, {"request.max_tokens": DELETE}, "request.max_tokens"),
    (ROLLING, {"runtime.compaction.trigger_tokens": 1000}, "runtime.compaction.trigger_tokens"),
    (ROLLING, {"runtime.reasoning_replay": ["reasoning_content"]}, "runtime.reasoning_replay"),
    (OPEN, {"runtime.reasoning_replay": ["reasoning_text"]}, "runtime.reasoning_replay"),
    (OPEN, {"runtime.reasoning_replay": []}, "runtime.reasoning_replay"),
    (OPEN, {"runtime.reasoning_replay": DELETE}, "runtime.reasoning_replay"),
    (
        GEMINI,
        {"request.generation_config.max_output_tokens": 0},
        "request.generation_config.max_output_tokens",
    ),
    (GEMINI, {"request.previous_interaction_id": "int_1"}, "request.previous_interaction_id"),
    (GEMINI, {"request.background": True}, "request.background"),
    (GEMINI, {"request.store": True}, "request.store"),
    (GLM, {"runtime.reasoning_replay": DELETE}, "runtime.reasoning_replay"),
    (OPEN, {"runtime.reasoning_replay": ["reasoning", "reasoning"]}, "runtime.reasoning_replay"),
    (OPEN, {"runtime.reasoning_replay": "reasoning"}, "runtime.reasoning_replay"),
    (OPEN, {"runtime.trim.limit_tokens": 1000}, "runtime.trim"),
    (OPEN, {"runtime.trim.target_fraction": 0.5}, "runtime.trim"),
    (ROLLING, {"runtime.trim.target_fraction": 0}, "runtime.trim.target_fraction"),
    (ROLLING, {"runtime.trim.limit_tokens": -5}, "runtime.trim.limit_tokens"),
    (ROLLING, {"request.messages": [{"role": "user", "content": "hi"}]}, "request.messages"),
    (OPEN, {"request.messages": []}, "request.messages"),
    (ROLLING, {"request.tools": [{"type": "function"}]}, "request.tools"),
    (OPEN, {"request.tools": []}, "request.tools"),
    (OPEN, {"request.tool_choice": "auto"}, "request.tool_choice"),
    (ROLLING, {"request.n": 2}, "request.n"),
    (OPEN, {"request.n": 3}, "request.n"),
    (
        ROLLING,
        {"request.stream_options": {"include_usage": False}},
        "request.stream_options.include_usage",
    ),
    (
        OPEN,
        {"request.stream_options": {"include_usage": False}},
        "request.stream_options.include_usage",
    ),
    (
        ROLLING,
        {"request.stream": DELETE, "request.stream_options": {"include_usage": True}},
        "request.stream_options",
    ),
    (
        OPEN,
        {"request.stream": False, "request.stream_options": {"include_usage": True}},
        "request.stream_options",
    ),
    (ROLLING, {"request.model": DELETE}, "request.model"),
    (ROLLING, {"id": "bad id!"}, "id"),
    (ROLLING, {"extra": 1}, "extra: unknown field"),
    (ROLLING, {"agent.CONTEXT": 1}, "agent.CONTEXT: unknown field"),
    (ROLLING, {"runtime.store": False}, "runtime.store: unknown field"),
    (OPEN, {"runtime.compaction.every": 3}, "runtime.compaction.every: unknown field"),
    (ROLLING, {"runtime.trim.keep": 2}, "runtime.trim.keep: unknown field"),
    (ROLLING, {"client.organization": "org"}, "client.organization: unknown field"),
    (OPEN, {"pricing.cached_per_million": 0.1}, "pricing.cached_per_million: unknown field"),
    (ROLLING, {"agent": DELETE}, "agent"),
    (ROLLING, {"agent.analysis_mode": True}, "agent.analysis_mode: unknown field"),
    (ROLLING, {"agent.MAX_RETRIES": -1}, "agent.MAX_RETRIES"),
    (ROLLING, {"agent.MAX_ATTEMPTS": 3}, "agent.MAX_ATTEMPTS: unknown field"),
    (
        ROLLING,
        {"agent.include_carry_forward_instruction": False},
        "agent.include_carry_forward_instruction",
    ),
    (
        OPEN,
        {"agent.include_carry_forward_instruction": True},
        "agent.include_carry_forward_instruction",
    ),
    (ROLLING, {"runtime.adapter_id": DELETE}, "runtime.adapter_id"),
    (
        ROLLING,
        {
            "runtime.adapter_id": DELETE,
            "runtime.sdk": "google-genai",
            "runtime.api": "interactions",
        },
        "runtime.state: google.interactions.v1 supports continuous_conversation",
    ),
    (
        ROLLING,
        {"runtime.adapter_id": DELETE, "runtime.sdk": "acme", "runtime.api": "chat"},
        "runtime.api: unknown sdk/api acme/chat",
    ),
    (ROLLING, {"runtime.api": "messages"}, "runtime.api"),
    (ROLLING, {"pricing.output": DELETE}, "pricing"),
]


def _shown(value: Any) -> str:
    """A test id's value: the same in every process (an `object()` repr names its address)."""
    return "deleted" if value is DELETE else repr(value)


@pytest.mark.parametrize(
    ("profile_id", "settings", "field"),
    REFUSED,
    ids=[
        f"{'rolling' if pid == ROLLING else 'open'}-{','.join(s)}={_shown(next(iter(s.values())))}"
        for pid, s, _ in REFUSED
    ],
)
def test_an_invalid_profile_is_refused_naming_the_field(
    profile_id: str, settings: dict[str, Any], field: str
) -> None:
    data = entry(profile_id, settings)
    with pytest.raises(ProfileError) as caught:
        load(data)
    message = str(caught.value)
    assert field in message
    assert repr(data["id"]) in message


def test_a_request_setting_the_sdk_does_not_know_is_refused_at_load_time() -> None:
    """A misspelled setting must not load and then fail every call with a TypeError."""
    with pytest.raises(ProfileError) as caught:
        load(entry(ROLLING, {"request.temprature": 0.5}))
    assert "request.temprature" in str(caught.value)


def test_request_settings_the_sdk_knows_are_accepted() -> None:
    settings = {
        "request.temperature": 0.2,
        "request.top_p": 0.9,
        "request.seed": 7,
        "request.reasoning_effort": "low",
        "request.extra_body": {"top_k": 20},
    }
    prof = load(entry(OPEN, settings))
    assert prof.request["extra_body"] == {"top_k": 20}


@pytest.mark.parametrize(
    ("limit", "trigger"),
    [(0, 175000), (-100000, 300000), (True, 175000)],
    ids=["zero", "negative", "bool"],
)
def test_the_output_limit_reserving_summary_room_must_be_a_positive_integer(
    limit: object, trigger: int
) -> None:
    """A non-positive output limit reserves no room (and lets trigger_tokens pass the context)."""
    data = entry(OPEN, {"request.max_tokens": limit, "runtime.compaction.trigger_tokens": trigger})
    with pytest.raises(ProfileError) as caught:
        load(data)
    assert "request.max_tokens" in str(caught.value)


@pytest.mark.parametrize("trigger", [213375, 100])
def test_the_summary_budget_below_the_context_length_is_accepted(trigger: int) -> None:
    prof = load(entry(OPEN, {"runtime.compaction.trigger_tokens": trigger}))
    assert prof.runtime.compaction.trigger_tokens == trigger


@pytest.mark.parametrize("value", [SECRET, "openai_api_key", "OPENAI-KEY", "1KEY", ""])
def test_api_key_env_must_name_a_variable_and_is_never_echoed(value: str) -> None:
    with pytest.raises(ProfileError) as caught:
        load(entry(ROLLING, {"client.api_key_env": value}))
    assert "client.api_key_env" in str(caught.value)
    if value:
        assert value not in str(caught.value)


def test_a_key_written_into_the_profile_is_refused_without_echoing_it() -> None:
    with pytest.raises(ProfileError) as caught:
        load(entry(ROLLING, {"client.api_key": SECRET}))
    assert "client.api_key: unknown field" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(ProfileError, match=r"id: duplicate profile id 'gpt-5-mini-chat-rolling'"):
        parse_profiles([entry(ROLLING), entry(OPEN), entry(ROLLING)])


@pytest.mark.parametrize("data", [{"id": "x"}, "profiles", None, 3])
def test_a_file_that_is_not_a_list_is_refused(tmp_path: Path, data: object) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ProfileError, match="expected a YAML list") as caught:
        load_profiles(path)
    assert str(path) in str(caught.value)


def test_an_entry_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ProfileError, match="entry 1"):
        parse_profiles([entry(ROLLING), "not a profile"])


def test_invalid_yaml_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(
        f"- id: one\n  agent: {{MAX_CONTEXT_LENGTH: 1000}}\n  runtime: [unclosed\n  client: {{}}\n"
        f"  note: {SECRET}\n",
        encoding="utf-8",
    )
    with pytest.raises(ProfileError) as caught:
        load_profiles(path)
    message = str(caught.value)
    assert str(path) in message
    assert "line 4" in message
    assert SECRET not in message


def test_an_invalid_entry_in_a_file_names_the_file_and_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(
        yaml.safe_dump([entry(ROLLING), entry(OPEN, {"request.n": 2})]), encoding="utf-8"
    )
    with pytest.raises(ProfileError) as caught:
        load_profiles(path)
    assert str(path) in str(caught.value)
    assert repr(OPEN) in str(caught.value)
    assert "request.n" in str(caught.value)


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read"):
        load_profiles(tmp_path / "absent.yaml")


@pytest.mark.parametrize("env", [{}, {"OPENAI_API_KEY": ""}], ids=["unset", "empty"])
def test_build_adapter_refuses_an_unset_key_variable(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_adapter(example_profiles()[ROLLING], http_client=ChatServer().client(), env=env)
    assert "client.api_key_env" in str(caught.value)
    assert "OPENAI_API_KEY" in str(caught.value)


def test_the_key_is_read_from_the_named_variable_and_sent_as_a_bearer_token() -> None:
    server = ChatServer(Answer("ACTION1"))
    prof = example_profiles()[OPEN]
    adapt = build_adapter(prof, http_client=server.client(), env={"OPEN_WEIGHT_API_KEY": SECRET})
    run_once(adapt, [user("frame 1")])
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(adapt.settings())


PUBLIC = """
- id: "gpt-5-4-chat"
  agent:
    MAX_ACTIONS_BASELINE_MULTIPLIER: 5.0
    MAX_CONTEXT_LENGTH: 175_000
  runtime:
    sdk: "openai-python"
    api: "chat_completions"
    state: "manual_rolling"
  client:
    base_url: "https://api.openai.com/v1"
    api_key_env: "OPENAI_API_KEY"
  request:
    model: "gpt-5.4-2026-03-05"
    max_completion_tokens: 128_000
    reasoning_effort: "high"
  pricing:
    input: 2.50
    output: 15.00
- id: "router-unpriced"
  agent:
    MAX_CONTEXT_LENGTH: 175_000
  runtime:
    sdk: "openai-python"
    api: "chat_completions"
    state: "manual_rolling"
  client:
    api_key_env: "ROUTER_API_KEY"
  request:
    model: "some/model"
  pricing: {}
"""


def test_profiles_of_the_public_harness_load_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "model_configs.yaml"
    path.write_text(PUBLIC, encoding="utf-8")
    profiles = load_profiles(path)
    chat = profiles["gpt-5-4-chat"]
    assert chat.runtime.adapter == "openai.chat_completions.v1"
    assert chat.runtime.strategy == "manual_rolling"
    assert chat.agent.MAX_ACTIONS_BASELINE_MULTIPLIER == 5.0
    assert chat.agent.MAX_ANIMATION_FRAMES == 7  # the public harness's default
    assert chat.retry_policy().max_attempts == 4  # MAX_RETRIES 3: four attempts
    prices = chat.prices()
    assert prices is not None and (prices.input_per_million, prices.output_per_million) == (
        2.5,
        15.0,
    )
    assert profiles["router-unpriced"].prices() is None


def test_the_older_name_of_continuous_conversation_is_understood() -> None:
    profile = load(entry(OPEN, {"runtime.state": "encrypted_replay"}))
    assert profile.runtime.strategy == "continuous_conversation"


def test_a_compaction_the_adapter_has_not_names_the_strategies_and_its_inline_compaction() -> None:
    """The Responses adapter lists `inline` among its compactions, but `inline` is asked for in
    the request: the refusal names only the strategies a profile can set, and where inline goes."""
    with pytest.raises(ProfileError) as caught:
        load(entry(RESPONSES, {"runtime.compaction.strategy": "native"}))
    message = str(caught.value)
    assert "supports none, harness_summary, not native" in message
    assert "request.context_management" in message


def test_frames_are_grids_unless_the_profile_asks_for_compact_rows() -> None:
    assert load(entry(OPEN)).agent.FRAME_FORMAT == "grid"
    assert load(entry(OPEN, {"agent.FRAME_FORMAT": "grid"})).agent.FRAME_FORMAT == "grid"
    assert load(entry(ROLLING, {"agent.FRAME_FORMAT": "compact"})).agent.FRAME_FORMAT == "compact"


@pytest.mark.parametrize("value", ["hex", "Compact", "", 1, None, ["grid"]])
def test_a_frame_format_not_known_is_refused_naming_the_key_the_value_and_the_choices(
    value: Any,
) -> None:
    with pytest.raises(ProfileError) as caught:
        load(entry(OPEN, {"agent.FRAME_FORMAT": value}))
    message = str(caught.value)
    assert f"agent.FRAME_FORMAT: expected grid or compact, got {value!r}" in message
    assert repr(OPEN) in message and "\n" not in message
