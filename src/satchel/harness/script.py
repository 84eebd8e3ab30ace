"""Model scripts for the scripted server: a script maps a key to a queue of replies, each a
completion (text, reasoning, refusal) or an HTTP error, read from YAML or JSON and validated.

Script files (YAML or JSON)::

    "frame 1":                    # served while "frame 1" occurs in the request's messages
      - {text: "ACTION1", reasoning: "The door is left."}
    "*":                          # everything else, in order
      - {status: 429}             # transient error, Retry-After: 0
      - {text: "ACTION2", finish_reason: length}
      - {status: 400, error_code: context_length_exceeded}
      - "ACTION3"                 # a bare string is a reply with that text

A bare list is the `"*"` queue. `winning_script` gives the shipped replies that win satchel's own
games.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from satchel.compaction import SUMMARY_PROMPT

FALLBACK = "*"
FINISH_REASONS = ("stop", "length", "content_filter")


class ScriptError(ValueError):
    """A script or reply that cannot be served; the message names the file, key, index, field."""


@dataclass(frozen=True, slots=True)
class ReplyUsage:
    """Token counts reported for a reply."""

    prompt_tokens: int
    completion_tokens: int

    def __post_init__(self) -> None:
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ScriptError(f"usage.{name}: expected a non-negative integer, got {value!r}")

    @classmethod
    def from_dict(cls, data: Any) -> ReplyUsage:
        if not isinstance(data, Mapping):
            raise ScriptError(f"usage: expected a mapping, got {type(data).__name__}")
        names = ("prompt_tokens", "completion_tokens")
        for name in data:
            if name not in names:
                raise ScriptError(f"usage.{name}: unknown field")
        for name in names:
            if name not in data:
                raise ScriptError(f"usage.{name}: missing")
        return cls(data["prompt_tokens"], data["completion_tokens"])


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: a completion (text, reasoning, refusal) or an HTTP error (`status`).

    `finish_reason` is `stop`, `length` (truncation) or `content_filter` (refusal). `status`,
    with `error_code`, `error_type` and `error_message`, makes the reply an HTTP error in OpenAI's
    error body (429 and 503 carry `Retry-After: 0`). `delay_s` sleeps before answering.
    `cut_stream` (streamed requests only; ignored otherwise) stops after the first content chunk,
    with no finish reason or usage, and closes the connection. `usage` defaults to a rough count
    from the request and reply lengths.
    """

    text: str = ""
    _: KW_ONLY
    reasoning: str | None = None
    finish_reason: str = "stop"
    refusal: str | None = None
    status: int | None = None
    error_code: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    delay_s: float = 0.0
    cut_stream: bool = False
    usage: ReplyUsage | None = None

    def __post_init__(self) -> None:
        _check_type("text", self.text, str)
        for name in ("reasoning", "refusal", "error_code", "error_type", "error_message"):
            if getattr(self, name) is not None:
                _check_type(name, getattr(self, name), str)
        if self.finish_reason not in FINISH_REASONS:
            raise ScriptError(
                f"finish_reason: expected one of {', '.join(FINISH_REASONS)}, "
                f"got {self.finish_reason!r}"
            )
        if isinstance(self.delay_s, bool) or not isinstance(self.delay_s, int | float):
            raise ScriptError(f"delay_s: expected a number, got {self.delay_s!r}")
        if not math.isfinite(self.delay_s) or self.delay_s < 0:
            raise ScriptError(f"delay_s: expected a non-negative number, got {self.delay_s!r}")
        _check_type("cut_stream", self.cut_stream, bool)
        if self.usage is not None and not isinstance(self.usage, ReplyUsage):
            raise ScriptError("usage: expected a ReplyUsage")
        if self.status is None:
            for name in ("error_code", "error_type", "error_message"):
                if getattr(self, name) is not None:
                    raise ScriptError(f"{name}: only an error reply (with a status) has one")
            return
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise ScriptError(f"status: expected an integer, got {self.status!r}")
        if not 400 <= self.status <= 599:
            raise ScriptError(f"status: expected an HTTP error status (400-599), got {self.status}")
        for name in ("text", "reasoning", "refusal", "usage", "cut_stream"):
            if getattr(self, name):
                raise ScriptError(f"{name}: an error reply (status {self.status}) has none")

    @classmethod
    def from_dict(cls, data: Any) -> Reply:
        """A reply from a JSON/YAML mapping with the field names (a bare string is `text`)."""
        if isinstance(data, str):
            return cls(data)
        if not isinstance(data, Mapping):
            raise ScriptError(f"expected a mapping or a string, got {type(data).__name__}")
        known = {f.name for f in fields(cls) if f.name != "_"}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name not in known:
                raise ScriptError(f"{name}: unknown field")
            values[name] = value
        if values.get("usage") is not None:
            values["usage"] = ReplyUsage.from_dict(values["usage"])
        return cls(**values)


def _check_type(name: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise ScriptError(f"{name}: expected {kind.__name__}, got {type(value).__name__}")


Script = dict[str, tuple[Reply, ...]]
ScriptLike = Mapping[str, Sequence[Any]] | Sequence[Any]


def parse_script(data: Any, *, source: str = "script") -> Script:
    """Validate `{"<key>": [reply, ...]}` (a bare list is `{"*": [...]}`); replies may be
    `Reply` objects, mappings or strings. Errors name `source`, the key, the index and the field.
    """
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        data = {FALLBACK: data}
    if not isinstance(data, Mapping):
        raise ScriptError(
            f"{source}: expected a mapping of key to replies or a list, got {type(data).__name__}"
        )
    script: Script = {}
    for key, replies in data.items():
        if not isinstance(key, str) or not key:
            raise ScriptError(f"{source}: key {key!r}: keys must be non-empty strings")
        if not isinstance(replies, Sequence) or isinstance(replies, str | bytes):
            raise ScriptError(
                f"{source}: key {key!r}: expected a list of replies, got {type(replies).__name__}"
            )
        queue: list[Reply] = []
        for index, raw in enumerate(replies):
            try:
                queue.append(raw if isinstance(raw, Reply) else Reply.from_dict(raw))
            except (ScriptError, TypeError) as exc:
                raise ScriptError(f"{source}: key {key!r}: reply {index}: {exc}") from None
        script[key] = tuple(queue)
    return script


def load_script(path: str | Path) -> Script:
    """Read a YAML or JSON script file (`.json` is read as JSON, anything else as YAML)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read the script ({exc.strerror or exc})") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ScriptError(f"{path}: not valid {_format(path)}: {exc}") from None
    return parse_script(data, source=str(path))


REPLIES_DIR = Path(__file__).with_name("replies")


SUMMARY_KEY = SUMMARY_PROMPT[:40]  # only a harness summary request holds it
SUMMARIES = 64
SUMMARY = "So far: I have followed the winning moves for this game; carry on with the next one."


def winning_script(game_ids: Sequence[str]) -> Script:
    """The shipped replies that win each of satchel's own games, one queue per game, and a
    queue answering harness summary requests (so a compaction does not eat an action's reply)."""
    shipped = sorted(path.stem for path in REPLIES_DIR.glob("*.yaml"))
    script: Script = {SUMMARY_KEY: (Reply(SUMMARY),) * SUMMARIES} if game_ids else {}
    for game_id in game_ids:
        if game_id not in shipped:
            raise ScriptError(f"no winning replies for {game_id!r} (shipped: {', '.join(shipped)})")
        script.update(load_script(REPLIES_DIR / f"{game_id}.yaml"))
    return script


def _format(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "YAML"
