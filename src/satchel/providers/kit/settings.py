"""The base of every adapter's request-settings model: the profile's `request` section, checked
by pydantic once, when a profile is loaded or an adapter built, and refused naming the field.

A model's validators raise `ValueError` with the whole refusal (`request.<field>: <why>`); the
first refusal becomes a `ConfigurationError`. Fields are validated in their declared order, after
the checks every section passes (a mapping of settings the SDK's method takes, with a model, none
of the adapter-owned ones). What is sent is the section itself (`sent`), never a dump of the model,
so the settings reach the SDK exactly as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from satchel.turns import ConfigurationError


def _stream_flag(stream: Any) -> Any:
    if not isinstance(stream, bool):
        raise ValueError("request.stream: expected true or false")
    return stream


StreamFlag = Annotated[Any, BeforeValidator(_stream_flag)]
"""A `stream` setting: true or false."""


class RequestSettings(BaseModel):
    """A profile's `request` section for one SDK method (`api` of the `sdk` SDK, whose
    parameters are `sdk_keys`); the `owned` settings are refused because the adapter keeps them
    (`why_owned`, formatted with `adapter_id`, says why)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    api: ClassVar[str]
    sdk: ClassVar[str] = "openai"
    sdk_keys: ClassVar[frozenset[str]]
    owned: ClassVar[tuple[str, ...]]
    why_owned: ClassVar[str]

    model: str

    @classmethod
    def check(
        cls, request: object, adapter_id: str, strategy: str, compaction: str = "none"
    ) -> dict[str, Any]:
        """The settings sent on every call of `adapter_id` under `strategy` and `compaction`,
        or `ConfigurationError` naming the field."""
        context = {"adapter_id": adapter_id, "strategy": strategy, "compaction": compaction}
        try:
            settings = cls.model_validate(request, context=context)
        except ValidationError as exc:
            message = str(exc.errors(include_url=False)[0]["msg"])
            raise ConfigurationError(message.removeprefix("Value error, ")) from None
        assert isinstance(request, Mapping)
        return settings.sent(dict(request))

    def sent(self, request: dict[str, Any]) -> dict[str, Any]:
        """What every call sends of the checked section `request` (a fresh dict of it)."""
        return request

    @classmethod
    def refused_first(cls, request: Mapping[str, Any], adapter_id: str) -> None:
        """Refusals that come before the common checks (an adapter's own wording of them)."""

    @model_validator(mode="before")
    @classmethod
    def _sdk_settings(cls, data: object, info: ValidationInfo) -> object:
        adapter_id = str((info.context or {}).get("adapter_id"))
        if not isinstance(data, Mapping):
            raise ValueError(f"request: expected a mapping of {cls.api} settings")
        cls.refused_first(data, adapter_id)
        model = data.get("model")
        if not isinstance(model, str) or not model:
            raise ValueError("request.model: a model name is required")
        extra = data.get("extra_body", {})
        if not isinstance(extra, Mapping):
            raise ValueError("request.extra_body: expected a mapping of extra JSON fields")
        why = cls.why_owned.format(adapter_id=adapter_id)
        for key in cls.owned:
            for where, settings in (("request", data), ("request.extra_body", extra)):
                if key in settings:
                    raise ValueError(f"{where}.{key}: not allowed; {why}")
        unknown = sorted(set(data) - cls.sdk_keys)
        if unknown:
            raise ValueError(
                f"request.{unknown[0]}: not a {cls.api} setting the {cls.sdk} SDK sends "
                "(use extra_body for server-specific fields)"
            )
        return dict(data)


def strategy_of(info: ValidationInfo) -> str:
    """The strategy the settings are checked for."""
    return str((info.context or {}).get("strategy"))


def compaction_of(info: ValidationInfo) -> str:
    """The compaction strategy the settings are checked for."""
    return str((info.context or {}).get("compaction", "none"))
