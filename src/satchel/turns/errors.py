"""The error taxonomy of a model turn: what went wrong, and whether a retry may help."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from satchel.turns.diagnostics import Diagnostics
    from satchel.turns.usage import Usage


class SatchelTurnError(Exception):
    """Base of every error the turn contract raises."""


class ConfigurationError(SatchelTurnError):
    """A profile, state or setting is invalid; retrying cannot help."""


class StateError(ConfigurationError):
    """A `RuntimeState` failed validation; the message names the field."""


class AttemptError(SatchelTurnError):
    """One model attempt failed. Carries the usage it spent and allowlisted diagnostics."""

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        usage: Usage | None = None,
        diagnostics: Diagnostics | None = None,
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.diagnostics = diagnostics


class TransientError(AttemptError):
    """A connection, timeout, rate-limit or server error: retry with backoff."""


class ContextOverflowError(AttemptError):
    """The request exceeded the model's context: compact once, never repeat as is.

    `prompt_tokens` and `context_tokens`: the request's size and the model's context as the
    server counted them, when its answer states them.
    """

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        usage: Usage | None = None,
        diagnostics: Diagnostics | None = None,
        prompt_tokens: int | None = None,
        context_tokens: int | None = None,
    ) -> None:
        super().__init__(message, usage=usage, diagnostics=diagnostics)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


class RefusalError(AttemptError):
    """The model refused, or a content filter stopped it."""


class TruncatedError(AttemptError):
    """The answer was cut off (output limit, pause) before it completed."""


class InterruptedStreamError(AttemptError):
    """A streamed answer ended before its completion and usage arrived."""


class InvalidResponseError(AttemptError):
    """The provider answered with something the adapter cannot accept (empty, tool call, ...)."""


class InvalidAnswer(SatchelTurnError):
    """Raised by a caller's parser when the model's answer is not a valid action."""


class FatalAttemptError(AttemptError):
    """A provider error no retry can fix (bad credentials, bad request)."""

    retryable = False


class TurnFailed(SatchelTurnError):
    """A turn was abandoned: retries ran out or a failure was final.

    The accepted state is unchanged; `usage` is what the abandoned attempts spent (already in the
    run total) and `last_error` the final attempt's error. The message ends with the last
    error's, which keeps the provider's words for the person running the turn; `reason` is the
    same account without them, for records.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        usage: Usage,
        last_error: BaseException | None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.usage = usage
        self.last_error = last_error
        self.reason = message if reason is None else reason


class CompactionFailed(AttemptError):
    """Compaction could not produce a valid shorter state; the accepted state is unchanged.
    `failures`: each failed summary attempt's number, kind and allowlisted diagnostics."""

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        usage: Usage | None = None,
        diagnostics: Diagnostics | None = None,
        failures: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__(message, usage=usage, diagnostics=diagnostics)
        self.failures = tuple(failures)
