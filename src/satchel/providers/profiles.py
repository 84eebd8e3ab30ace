"""Model profiles: YAML entries validated by pydantic, refused at load time naming the field."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from satchel.providers.kit.spec import INLINE_COMPACTION
from satchel.providers.registry import REGISTRY, SPECS
from satchel.turns import ConfigurationError, Pricing, ProviderAdapter, RetryPolicy

_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
_PROFILE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
EXAMPLES = Path(__file__).parent / "profiles"
# How frames are written for the model: rows as lists of numbers, or rows of hexadecimal digits.
FrameFormat = Literal["grid", "compact"]
FRAME_FORMATS: tuple[FrameFormat, ...] = ("grid", "compact")


class ProfileError(ConfigurationError):
    """A profile file or entry is invalid; the message names the file, entry and field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentSection(_Section):
    """The agent's limits, named as the public ARC-AGI-3 benchmarking harness names them."""

    MAX_CONTEXT_LENGTH: int = Field(gt=0)
    MAX_RETRIES: int = Field(default=3, ge=0, le=19)  # retries after the first attempt
    MAX_ACTIONS_BASELINE_MULTIPLIER: float = Field(default=5.0, gt=0)
    MAX_ANIMATION_FRAMES: int = Field(default=7, ge=1, le=64)
    FRAME_FORMAT: FrameFormat = "grid"
    include_carry_forward_instruction: bool | None = None  # automatic; checked when given

    @field_validator("FRAME_FORMAT", mode="before")
    @classmethod
    def _known_frame_format(cls, value: object) -> object:
        if value not in FRAME_FORMATS:
            raise ValueError(f"expected {' or '.join(FRAME_FORMATS)}, got {value!r}")
        return value


class CompactionSection(_Section):
    strategy: Literal["none", "harness_summary", "native"] = "none"
    trigger_tokens: int | None = Field(default=None, gt=0)
    summary_max_output_tokens: int | None = Field(default=None, gt=0)
    summary_input_headroom_tokens: int = Field(default=8_000, ge=0)
    max_summary_attempts: int = Field(default=3, ge=1, le=10)


class TrimSection(_Section):
    limit_tokens: int | None = Field(default=None, gt=0)
    target_fraction: float = Field(default=0.7, gt=0, le=1)


Strategy = Literal["manual_rolling", "previous_response_id", "continuous_conversation"]
# The public harness's `runtime.sdk` / `runtime.api` pairs, and the adapter each names.
SDK_APIS: dict[tuple[str, str], str] = {
    ("openai-python", "chat_completions"): "openai.chat_completions.v1",
    ("openai-python", "responses"): "openai.responses.v1",
    ("anthropic-python", "messages"): "anthropic.messages.v1",
    ("google-genai", "interactions"): "google.interactions.v1",
}
OUTPUT_LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")
# The older name of a strategy in public profiles.
STATE_ALIASES = {"encrypted_replay": "continuous_conversation"}


class RuntimeSection(_Section):
    """Which adapter and state strategy: `adapter_id`, or the public harness's `sdk` and `api`
    (`state` is the strategy)."""

    adapter_id: str | None = None
    sdk: str | None = None
    api: str | None = None
    state: Strategy
    compaction: CompactionSection = CompactionSection()
    reasoning_replay: tuple[Literal["reasoning_content", "reasoning"], ...] | None = None
    trim: TrimSection = TrimSection()

    @model_validator(mode="before")
    @classmethod
    def _older_state_names(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("state") in STATE_ALIASES:
            return {**data, "state": STATE_ALIASES[data["state"]]}
        return data

    @property
    def strategy(self) -> str:
        return self.state

    @property
    def adapter(self) -> str:
        """The adapter id, named or implied by `sdk` and `api` (checked at load time)."""
        if self.adapter_id is not None:
            return self.adapter_id
        return SDK_APIS[(self.sdk or "", self.api or "")]


class ClientSection(_Section):
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=600.0, gt=0)
    max_retries: int = Field(default=0, ge=0, le=5)


class PricingSection(_Section):
    """Prices per million tokens; an empty section (`{}`) means none configured."""

    input: float | None = Field(default=None, ge=0)
    output: float | None = Field(default=None, ge=0)


class Profile(_Section):
    """One model profile: which adapter, which strategy, which request settings."""

    id: str
    agent: AgentSection
    runtime: RuntimeSection
    client: ClientSection = ClientSection()
    request: dict[str, Any]
    pricing: PricingSection | None = None

    @model_validator(mode="after")
    def _combinations(self) -> Profile:
        _check(self)
        return self

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.agent.MAX_RETRIES + 1)

    def prices(self) -> Pricing | None:
        pricing = self.pricing
        if pricing is None or pricing.input is None or pricing.output is None:
            return None
        return Pricing(pricing.input, pricing.output)

    def output_limit(self) -> int | None:
        """The request's output limit; a present but non-positive value is refused."""
        config = self.request.get("generation_config")
        places: list[tuple[Mapping[str, Any], str, str]] = [
            (self.request, key, f"request.{key}") for key in OUTPUT_LIMIT_KEYS
        ]
        if isinstance(config, Mapping):  # Interactions: inside the generation config
            key = "max_output_tokens"
            places.append((config, key, f"request.generation_config.{key}"))
        for settings, key, where in places:
            if key not in settings:
                continue
            value = settings[key]
            if type(value) is not int or value <= 0:
                raise _FieldError(where, f"expected a positive integer, got {value!r}")
            return value
        return None


class _FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")


def _check(profile: Profile) -> None:
    if not _PROFILE_ID.fullmatch(profile.id):
        raise _FieldError("id", "letters, digits, '.', '_' and '-' only")
    runtime = profile.runtime
    adapter_id = _adapter_id(runtime)
    descriptor = REGISTRY.descriptor(adapter_id)
    if runtime.strategy not in descriptor.strategies:
        raise _FieldError(
            "runtime.state",
            f"{adapter_id} supports {', '.join(descriptor.strategies)}, not {runtime.strategy}",
        )
    carry = profile.agent.include_carry_forward_instruction
    if carry is not None and carry != (runtime.strategy == "manual_rolling"):
        raise _FieldError(
            "agent.include_carry_forward_instruction",
            "the carry-forward instruction is given exactly to manual_rolling profiles "
            f"(automatic); {runtime.strategy} cannot have it {'on' if carry else 'off'}",
        )
    pricing = profile.pricing
    if pricing is not None and (pricing.input is None) != (pricing.output is None):
        raise _FieldError("pricing", "give both input and output prices, or neither")
    compaction = runtime.compaction
    if compaction.strategy != "none" and runtime.strategy != "continuous_conversation":
        raise _FieldError(
            "runtime.compaction.strategy",
            f"only continuous_conversation compacts; under {runtime.strategy} the conversation "
            "is not the adapter's to rebuild",
        )
    if compaction.strategy not in descriptor.compaction:
        strategies = [name for name in descriptor.compaction if name != INLINE_COMPACTION]
        inline = (
            "; its inline compaction is asked for with request.context_management"
            if INLINE_COMPACTION in descriptor.compaction
            else ""
        )
        raise _FieldError(
            "runtime.compaction.strategy",
            f"{adapter_id} supports {', '.join(strategies)}, not {compaction.strategy}{inline}",
        )
    try:
        REGISTRY.get(adapter_id).validate_request(
            profile.request, runtime.strategy, compaction.strategy
        )
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None
    if compaction.strategy != "none" and "context_management" in profile.request:
        raise _FieldError(
            "request.context_management",
            f"inline compaction and runtime.compaction.strategy: {compaction.strategy} cannot "
            "both compact one conversation",
        )
    if compaction.strategy == "harness_summary":
        _check_summary_budget(profile)
    elif compaction.strategy == "native":
        _check_native_budget(profile)
    elif compaction.trigger_tokens is not None:
        raise _FieldError(
            "runtime.compaction.trigger_tokens", "only meaningful with a compaction strategy"
        )
    if runtime.reasoning_replay is not None and runtime.strategy != "continuous_conversation":
        raise _FieldError(
            "runtime.reasoning_replay", "only continuous_conversation replays reasoning"
        )
    replay = runtime.reasoning_replay
    spec = SPECS.get(adapter_id)
    if replay is None and spec is not None and spec.needs_reasoning_replay:
        raise _FieldError(
            "runtime.reasoning_replay",
            f"{adapter_id} needs it named: reasoning_content, reasoning or both, as the model "
            "server's chat template reads the reasoning back",
        )
    if replay is not None and (not replay or len(set(replay)) != len(replay)):
        raise _FieldError(
            "runtime.reasoning_replay", "name reasoning_content, reasoning or both, once each"
        )
    if runtime.strategy != "manual_rolling" and runtime.trim != TrimSection():
        raise _FieldError("runtime.trim", "only manual_rolling trims its window")
    key_env = profile.client.api_key_env
    if key_env is not None and not _ENV_NAME.fullmatch(key_env):
        raise _FieldError(
            "client.api_key_env",
            "expected the NAME of an environment variable (A-Z, 0-9, _), never the key itself",
        )


def _adapter_id(runtime: RuntimeSection) -> str:
    """The registered adapter the runtime section names, or a refusal naming the field."""
    known = ", ".join(d.adapter_id for d in REGISTRY)
    if runtime.adapter_id is None:
        if runtime.sdk is None or runtime.api is None:
            raise _FieldError("runtime.adapter_id", "name an adapter id, or runtime.sdk and api")
        implied = SDK_APIS.get((runtime.sdk, runtime.api))
        if implied is None:
            pairs = ", ".join(f"{sdk}/{api}" for sdk, api in SDK_APIS)
            raise _FieldError(
                "runtime.api", f"unknown sdk/api {runtime.sdk}/{runtime.api} (known: {pairs})"
            )
        if implied not in REGISTRY:
            raise _FieldError(
                "runtime.api",
                f"{runtime.sdk}/{runtime.api} needs the adapter {implied}, which this "
                f"installation does not have (known: {known})",
            )
        return implied
    if runtime.adapter_id not in REGISTRY:
        raise _FieldError(
            "runtime.adapter_id", f"unknown adapter id {runtime.adapter_id!r} (known: {known})"
        )
    surface = REGISTRY.descriptor(runtime.adapter_id).api_surface
    if runtime.api is not None and runtime.api.replace("_", ".") != surface:
        raise _FieldError(
            "runtime.api", f"{runtime.adapter_id} speaks {surface}, not {runtime.api}"
        )
    return runtime.adapter_id


def _check_summary_budget(profile: Profile) -> None:
    compaction = profile.runtime.compaction
    if compaction.trigger_tokens is None:
        raise _FieldError("runtime.compaction.trigger_tokens", "required with harness_summary")
    output = profile.output_limit()
    if output is None:
        raise _FieldError(
            "request.max_tokens",
            "harness_summary needs the request's output limit (max_tokens or "
            "max_completion_tokens) to reserve room",
        )
    needed = compaction.trigger_tokens + output + compaction.summary_input_headroom_tokens
    if needed >= profile.agent.MAX_CONTEXT_LENGTH:
        raise _FieldError(
            "runtime.compaction.trigger_tokens",
            f"trigger_tokens ({compaction.trigger_tokens}) + output limit ({output}) + "
            f"summary_input_headroom_tokens ({compaction.summary_input_headroom_tokens}) = "
            f"{needed} must stay below agent.MAX_CONTEXT_LENGTH "
            f"({profile.agent.MAX_CONTEXT_LENGTH})",
        )


def _check_native_budget(profile: Profile) -> None:
    trigger = profile.runtime.compaction.trigger_tokens
    if trigger is None:
        raise _FieldError("runtime.compaction.trigger_tokens", "required with native compaction")
    output = profile.output_limit() or 0
    if trigger + output >= profile.agent.MAX_CONTEXT_LENGTH:
        raise _FieldError(
            "runtime.compaction.trigger_tokens",
            f"trigger_tokens ({trigger}) + output limit ({output}) = {trigger + output} must "
            f"stay below agent.MAX_CONTEXT_LENGTH ({profile.agent.MAX_CONTEXT_LENGTH})",
        )


def parse_profiles(data: object, source: str = "<profiles>") -> dict[str, Profile]:
    """Validate a list of profile entries; raise `ProfileError` naming the entry and field."""
    if not isinstance(data, list):
        raise ProfileError(f"{source}: expected a YAML list of profile entries")
    profiles: dict[str, Profile] = {}
    for index, entry in enumerate(data):
        name = entry.get("id") if isinstance(entry, Mapping) else None
        where = (
            f"{source}: profile {name!r}" if isinstance(name, str) else f"{source}: entry {index}"
        )
        try:
            profile = Profile.model_validate(entry)
        except ValidationError as exc:
            raise ProfileError(f"{where}: {_describe(exc)}") from None
        if profile.id in profiles:
            raise ProfileError(f"{where}: id: duplicate profile id {profile.id!r}")
        profiles[profile.id] = profile
    return profiles


def load_profiles(path: str | Path) -> dict[str, Profile]:
    """Load and validate a YAML profile file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(f"{path}:{line} not valid YAML") from None
    return parse_profiles(data, str(path))


def example_profiles() -> dict[str, Profile]:
    """The example profiles shipped with satchel."""
    profiles: dict[str, Profile] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        profiles.update(load_profiles(path))
    return profiles


def build_adapter(
    profile: Profile,
    *,
    http_client: Any = None,
    env: Mapping[str, str] | None = None,
) -> ProviderAdapter:
    """Create the profile's adapter with its SDK's client; the key comes from the environment.

    `http_client` (an `httpx.Client`) replaces the SDK's transport, as tests do.
    """
    env = os.environ if env is None else env
    key_env = profile.client.api_key_env
    api_key = "unused"
    if key_env is not None:
        api_key = env.get(key_env, "")
        if not api_key:
            raise ConfigurationError(
                f"client.api_key_env: environment variable {key_env} is not set "
                f"(profile {profile.id!r})"
            )
    return REGISTRY.create(
        profile.runtime.adapter, profile=profile, http_client=http_client, api_key=api_key
    )


def _describe(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    field = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    return f"{field}: {message}" if field else message
