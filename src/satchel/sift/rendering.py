"""How a step is shown to the model: its receipt text and the artifacts its outputs go to, its
receipt message, and its results bounded, each remembered against the message it renders."""

from collections.abc import Sequence

from satchel.sift.artifacts import Artifact
from satchel.sift.bounded import bounded_result
from satchel.sift.messages import (
    ChatMessage,
    call_arguments,
    call_name,
    content_text,
    image_parts,
    tool_calls,
)
from satchel.sift.receipts import CallRecord, argument_hint, looks_like_error, receipt_text
from satchel.sift.settings import SiftSettings
from satchel.sift.sizing import Sizer
from satchel.sift.state import SiftState
from satchel.sift.transcript import Unit


class StepRenderer:
    """Renders steps as receipts and results as bounded, remembering what it rendered."""

    def __init__(self, settings: SiftSettings, sizer: Sizer) -> None:
        self.settings = settings
        self.size = sizer
        self._receipts: dict[str, ChatMessage] = {}
        self._drafts: dict[str, tuple[ChatMessage, str, tuple[Artifact, ...]]] = {}
        self._bounded: dict[str, tuple[ChatMessage, int, ChatMessage]] = {}

    def step_size(self, messages: Sequence[ChatMessage], unit: Unit, state: SiftState) -> int:
        """The tokens of a step as shown: its assistant message and its results, bounded or not."""
        size = self.size(messages[unit.start])
        for index in range(unit.start + 1, unit.end):
            size += self.size(self.shown(messages[index], state))
        return size

    def draft(
        self, messages: Sequence[ChatMessage], unit: Unit, prefix: str
    ) -> tuple[str, tuple[Artifact, ...]]:
        """The receipt text of a step and the artifacts its outputs go to."""
        assert unit.step is not None
        assistant = messages[unit.start]
        cached = self._drafts.get(unit.step.id)
        if cached is not None and cached[0] is assistant:
            return cached[1], cached[2]
        results = {
            str(messages[index].get("tool_call_id")): messages[index]
            for index in range(unit.start + 1, unit.end)
        }
        records: list[CallRecord] = []
        artifacts: list[Artifact] = []
        for call in tool_calls(assistant):
            call_id = str(call.get("id"))
            tool = call_name(call)
            arguments = call_arguments(call)
            result = results.get(call_id, {})
            text = content_text(result.get("content"))
            images = len(image_parts(result.get("content")))
            stored = bool(text) and tool not in self.settings.retrieval_tools
            artifact_id = prefix + call_id if stored else None
            if artifact_id is not None:
                artifacts.append(Artifact(artifact_id, tool, argument_hint(arguments), text))
            error = looks_like_error(result, text)
            records.append(CallRecord(call_id, tool, arguments, text, images, error, artifact_id))
        receipt = receipt_text(
            content_text(assistant.get("content")), records, self.settings.summary_chars
        )
        self._drafts[unit.step.id] = (assistant, receipt, tuple(artifacts))
        return receipt, tuple(artifacts)

    def receipt(self, step_id: str, text: str) -> ChatMessage:
        """The assistant message that stands in for an evicted step."""
        cached = self._receipts.get(step_id)
        if cached is not None and cached["content"] == text:
            return cached
        receipt: ChatMessage = {"role": "assistant", "content": text}
        self._receipts[step_id] = receipt
        return receipt

    def shown(self, message: ChatMessage, state: SiftState) -> ChatMessage:
        """A result as this pass shows it: bounded when its call id is bounded."""
        if message.get("tool_call_id") in state.bounded:
            return self.bounded_message(message, state)
        return message

    def bounded_message(self, message: ChatMessage, state: SiftState) -> ChatMessage:
        """A result cut to its call's limit, pointing at the artifact of its full output."""
        call_id = str(message.get("tool_call_id"))
        limit = state.limits.get(call_id, self.settings.bounded_chars)
        cached = self._bounded.get(call_id)
        if cached is not None and cached[0] is message and cached[1] == limit:
            return cached[2]
        bounded = bounded_result(message, limit, state.artifact_prefix + call_id)
        self._bounded[call_id] = (message, limit, bounded)
        return bounded
