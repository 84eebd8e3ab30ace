"""The lesson request: when a game ends, the model is asked in a request of its own for a short
account of what it learned, over the session's accepted turns (through the adapter's
harness-summary capability), with the profile's retry policy. Its usage is billed into the
session's total and it is written to `lesson.json` beside the game's other records."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from satchel.turns import (
    AttemptError,
    ConfigurationError,
    Session,
    SummaryCompactionAdapter,
    TransientError,
    Usage,
)
from satchel.turns.records import fit_text
from satchel.turns.usage import ZERO_USAGE

LESSON_PROMPT = (
    "The game is over. Write a short account of what you learned from it that would help you "
    "play it, or another game, better next time: the rules you worked out, what worked, and "
    "what wasted actions. Answer with the lessons alone, in a few sentences."
)


@dataclass(frozen=True, slots=True)
class Lesson:
    """The model's answer to `LESSON_PROMPT` (None when no attempt gave a complete one), what
    every attempt spent together, and the failed attempts' kinds and allowlisted diagnostics."""

    text: str | None
    usage: Usage
    attempts: int
    failures: tuple[dict[str, Any], ...] = ()

    def record(self, model: str) -> dict[str, Any]:
        """What `lesson.json` keeps (the records writer redacts it)."""
        return {
            "time": datetime.now(UTC).isoformat(),
            "model": model,
            "prompt": LESSON_PROMPT,
            "text": None if self.text is None else fit_text(self.text),
            "attempts": self.attempts,
            "failures": list(self.failures),
            "usage": self.usage.to_dict(),
        }


def check_lessons(session: Session, profile_id: str) -> None:
    """`ConfigurationError` when the profile's adapter cannot be asked for a lesson."""
    adapter = session.adapter
    if not isinstance(adapter, SummaryCompactionAdapter):
        raise ConfigurationError(
            f"--memory: profile {profile_id!r} uses {adapter.descriptor.adapter_id}, which "
            "cannot be asked for a lesson in a request of its own; play it without --memory"
        )


def ask_lesson(session: Session, *, sleep: Callable[[float], None] = time.sleep) -> Lesson:
    """Ask for the lesson of the game `session` played, up to the retry policy's attempts; bill
    every attempt into the session and write `lesson.json` when it keeps records."""
    adapter = session.adapter
    assert isinstance(adapter, SummaryCompactionAdapter), "checked by check_lessons"
    policy = session.policy
    usage = ZERO_USAGE
    failures: list[dict[str, Any]] = []
    text: str | None = None
    attempts = transient = 0
    while attempts < policy.max_attempts and text is None:
        attempts += 1
        try:
            reply = adapter.summarize(session.state, LESSON_PROMPT)
        except AttemptError as exc:
            usage = usage + (exc.usage or ZERO_USAGE)
            diagnostics = exc.diagnostics.to_dict() if exc.diagnostics else None
            failures.append(
                {"attempt": attempts, "kind": type(exc).__name__, "diagnostics": diagnostics}
            )
            if not exc.retryable:
                break
            if isinstance(exc, TransientError):
                transient += 1
                sleep(policy.backoff(transient))
            continue
        usage = usage + reply.usage
        if reply.complete:
            text = reply.text
        else:
            failures.append({"attempt": attempts, "kind": "incomplete_lesson", "diagnostics": None})
    lesson = Lesson(text, usage, attempts, tuple(failures))
    session.bill(usage)
    if session.records is not None:
        session.records.write_lesson(lesson.record(adapter.model))
    return lesson
