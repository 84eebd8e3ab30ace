"""The sift's settings and their defaults; every size is in tokens (the counter or the estimate)."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from satchel.sift.tools import ARTIFACT_TOOL_NAMES


@dataclass(frozen=True)
class SiftSettings:
    """How a sift sizes, evicts, bounds and cuts."""

    budget: int
    """Tokens for the whole request: the system prompt, the tool definitions, the per-call note and
    the messages. The first three are taken off it; eviction batches keep the messages to the
    rest."""
    window: int | None = None
    """The model's context window in tokens; None turns the overflow net off."""
    output_reserve: int = 0
    """Tokens of the window kept free for the answer; the rest is the usable window."""
    bounded_chars: int = 8000
    """A bounded result shows at most this many characters."""
    summary_chars: int = 160
    """A receipt line's summary of a result is at most this long."""
    target_fraction: float = 0.5
    min_batch_fraction: float = 0.25
    slack_fraction: float = 0.10
    min_message_budget_fraction: float = 0.25
    inline_reads_fraction: float = 0.1
    """The newest reads (`read_targets`) stay inline, newest first, while together they fit this
    share of the message budget."""
    awaited_fraction: float = 0.5
    """The active step as a whole is held to this share of the message budget once sifting is
    engaged: its longest results not already sent whole are cut to one common length."""
    overflow_fraction: float = 0.8
    """The net cuts when the whole request passes this share of the usable window."""
    overflow_target_fraction: float = 0.7
    """A cut brings the whole request down to this share of the usable window."""
    max_messages: int | None = None
    """The net also cuts when the request holds more messages than this."""
    read_targets: Mapping[str, str] = field(default_factory=dict)
    """Read tools and the argument naming what they read (`{"read_file": "path"}`): the newest
    read of each target may stay inline (see `inline_reads_fraction`)."""
    retrieval_tools: frozenset[str] = ARTIFACT_TOOL_NAMES
    """Tools whose results are never bounded or stored as artifacts."""
    kept_tools: frozenset[str] = frozenset()
    """Tools whose steps are never evicted: a step with a call to one of them stays as it was
    sent (only the overflow net can leave it out)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "read_targets", MappingProxyType(dict(self.read_targets)))
        object.__setattr__(self, "retrieval_tools", frozenset(self.retrieval_tools))
        object.__setattr__(self, "kept_tools", frozenset(self.kept_tools))
        if self.budget < 0:
            raise ValueError(f"budget must be at least 0, not {self.budget}")
        for name in (
            "target_fraction",
            "min_batch_fraction",
            "slack_fraction",
            "min_message_budget_fraction",
            "inline_reads_fraction",
            "awaited_fraction",
            "overflow_fraction",
            "overflow_target_fraction",
        ):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1, not {value}")
        if self.overflow_target_fraction > self.overflow_fraction:
            raise ValueError(
                f"overflow_target_fraction ({self.overflow_target_fraction}) must not exceed "
                f"overflow_fraction ({self.overflow_fraction})"
            )
        if self.bounded_chars < 400 or self.summary_chars < 20:
            raise ValueError("bounded_chars must be at least 400 and summary_chars at least 20")
        if self.window is not None and self.window <= self.output_reserve:
            raise ValueError(
                f"window ({self.window}) must be larger than output_reserve ({self.output_reserve})"
            )
        if self.window is not None and self.budget > self.window - self.output_reserve:
            raise ValueError(
                f"budget ({self.budget}) must fit the usable window: at most window "
                f"({self.window}) less output_reserve ({self.output_reserve}), "
                f"{self.window - self.output_reserve}"
            )
        if self.max_messages is not None and self.max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, not {self.max_messages}")

    @property
    def usable_window(self) -> int | None:
        """The window less the output reserve, or None without a window."""
        return None if self.window is None else self.window - self.output_reserve


def settings_refusal(given: object) -> str:
    """What to say to a sift built with something other than `SiftSettings`."""
    message = (
        f"ContextSift takes a SiftSettings, not a {type(given).__name__}: "
        "ContextSift(SiftSettings(budget=32_000, window=128_000))"
    )
    if isinstance(given, Mapping):
        message += "; from a mapping of settings, SiftSettings(**settings)"
    return message
