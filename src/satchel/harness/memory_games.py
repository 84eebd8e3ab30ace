"""Memory across games (`satchel run --memory URL`): each config is one data subject of the
deployment; when a game starts, recall's answer for the game's opening becomes the first
request's memory message, and when it ends, the lesson the model wrote is observed under the
subject. The deployment is reached only through the integrations' shared policy
(`SyncAgentMemory`): a recall that fails plays the game without memory, a store that fails is
recorded and reported; neither ends a game. The token is never written anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from satchel.harness.environments import GameInfo
from satchel.harness.lessons import ask_lesson
from satchel.harness.play import GameResult
from satchel.integrations import MemoryStoreFailed, SyncAgentMemory, observed_messages
from satchel.memory.client import MemoryClient
from satchel.turns import NeutralMessage, Session
from satchel.turns.records import fit_text

TOKEN_ENV = "SATCHEL_MEMORY_TOKEN"
SUBJECT_PREFIX = "satchel-harness:"
UNLEARNED_EXITS = frozenset({"INTERRUPTED"})  # replayed by --resume: its lesson comes then
# A lesson is the model's words: recall reads both sides of a stored turn, not only the user's.
RECALL_CONTROLS = {"source_roles": ["user", "assistant"]}


@dataclass(frozen=True, slots=True)
class MemoryTarget:
    """The deployment `--memory` names, and its token (kept out of every repr)."""

    url: str
    token: str = field(repr=False)

    def client(self) -> MemoryClient:
        return MemoryClient(self.url, self.token)


def subject_of(profile_id: str) -> str:
    """The data subject a config's lessons are stored under: `satchel-harness:<profile id>`."""
    return SUBJECT_PREFIX + profile_id


def recall_question(info: GameInfo) -> str:
    """What a game asks memory before its first frame: lessons about this game (its id, title
    and tags), and lessons about every game."""
    about = ", ".join([info.title, *info.tags]) if info.title else ", ".join(info.tags)
    named = f"{info.game_id} ({about})" if about else info.game_id
    return f"What lessons were learned playing the game {named}, and which hold for every game?"


def lesson_messages(result: GameResult, lesson: str) -> list[dict[str, Any]]:
    """The turn a lesson is stored as: how the game ended, then the model's lesson."""
    ended = (
        f"The game {result.game_id} ended {result.exit_reason} with {result.levels_completed} "
        f"of {result.win_levels} levels in {result.actions} actions. What did you learn?"
    )
    return observed_messages(ended, fit_text(lesson))


class GameMemory:
    """One game's memory: its config's recall before the first frame, its lesson after the end.

    `record` is what `run_meta.json` shows under `memory`; `problems` are one-line reports for
    the run's summary; `lost` is true when a lesson was written but not stored.
    """

    def __init__(self, client: MemoryClient, profile_id: str, run_id: str) -> None:
        self.failures: list[tuple[str, Exception]] = []
        self.policy = SyncAgentMemory(
            client,
            data_subject_id=subject_of(profile_id),
            run_id=run_id,
            recall_controls=RECALL_CONTROLS,
            on_error=lambda operation, error: self.failures.append((operation, error)),
        )
        self.record: dict[str, Any] = {"subject": self.policy.data_subject_id}
        self.problems: list[str] = []
        self.lost = False

    def opening(self, info: GameInfo) -> list[NeutralMessage]:
        """The memory message for `info`'s game, as the messages to send before its first
        frame (none when recall found nothing or failed)."""
        question = recall_question(info)
        message = self.policy.recall_message(question)
        error = next((_line(e) for operation, e in self.failures if operation == "recall"), None)
        self.record["recall"] = {"question": question, "message": message, "error": error}
        if error is not None:
            self.problems.append(f"{info.game_id}: recall failed, played without memory: {error}")
        return [] if message is None else [{"role": "user", "content": message}]

    def closing(self, session: Session, result: GameResult) -> None:
        """Ask for the game's lesson and store it, unless the game ended `INTERRUPTED` or no
        turn of it was accepted (the model saw nothing to learn from)."""
        if result.exit_reason in UNLEARNED_EXITS or not session.steps:
            why = "interrupted" if session.steps else "no accepted turn"
            self.record["lesson"], self.record["stored"] = {"skipped": why}, None
            return
        lesson = ask_lesson(session)
        self.record["lesson"] = {
            "text": None if lesson.text is None else fit_text(lesson.text),
            "attempts": lesson.attempts,
            "usage": lesson.usage.to_dict(),
        }
        if lesson.text is None:
            self.record["stored"] = None
            self.problems.append(f"{result.game_id}: the model wrote no lesson (see lesson.json)")
            return
        messages = lesson_messages(result, lesson.text)
        stored: dict[str, Any] = {"idempotency_key": self.policy.key(messages)}
        try:
            stored |= {"receipt": self.policy.observe_messages(messages), "error": None}
        except MemoryStoreFailed as failed:
            stored |= {"receipt": None, "error": _line(failed.cause)}
            self.problems.append(
                f"{result.game_id}: the lesson was not stored in memory: {stored['error']}"
            )
            self.lost = True
        self.record["stored"] = stored


def _line(error: Exception) -> str:
    return " ".join(str(error).split())
