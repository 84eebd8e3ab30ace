"""Agent middleware that gives a LangChain v1 agent (`create_agent`) one subject's memory.

- Recall: before every model call of a run, the person's message is recalled for and, when the
  recall found something, one untrusted user message is placed just before it, in the model
  request only. The graph state never holds it; later model calls of the same run reuse it.
- Compaction: when the trigger is due as a run starts, the state's history is replaced by the
  deployment's context for the subject (one untrusted user message) and the person's message.
- Observation: after a run that finished, the person's message and the final reply are stored
  under the turn key, with the thread id as the run id.

The untrusted mark lives in the message's `additional_kwargs` under `taisce.untrusted`: LangChain's
place for data a message carries besides its content (its own summarization marks its summary
there). Provider adapters copy only the keys they know from it, so the mark never reaches a
request body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware.summarization import ContextMessages, ContextTokens
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from satchel.integrations.core import AgentMemory, ErrorHook, SyncAgentMemory
from satchel.memory.client import AsyncMemoryClient, MemoryClient
from satchel.memory.message import UNTRUSTED_KEY, is_memory_text

CompactTrigger = ContextMessages | ContextTokens
"""When compaction is due, in the vocabulary of LangChain's summarization trigger:
`("messages", n)` or `("tokens", n)` (approximate count), reached by the state as a run starts."""

ModelResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


def memory_message(text: str) -> HumanMessage:
    """The one user message that carries memory, marked untrusted in its own metadata."""
    return HumanMessage(content=text, additional_kwargs={UNTRUSTED_KEY: True})


def is_untrusted(message: BaseMessage) -> bool:
    """Whether a message carries the untrusted mark this middleware sets."""
    return message.additional_kwargs.get(UNTRUSTED_KEY) is True


def _written_by_framework(message: BaseMessage) -> bool:
    """Memory, or a message LangChain wrote itself (such as a summary marked `lc_source`)."""
    return (
        is_untrusted(message)
        or "lc_source" in message.additional_kwargs
        or is_memory_text(message.text)
    )


def person_index(messages: Sequence[BaseMessage]) -> int | None:
    """Where the person's current message is: the last user message nobody else wrote."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and not _written_by_framework(message):
            return index
    return None


def answered_turn(messages: Sequence[BaseMessage]) -> tuple[str, str] | None:
    """The person's message and the final reply, or None when no model answered the person."""
    index = person_index(messages)
    if index is None:
        return None
    replies = [m for m in messages[index + 1 :] if isinstance(m, AIMessage)]
    if not replies:
        return None
    final = replies[-1]
    return messages[index].text, "" if final.tool_calls else final.text


def _configurable() -> Mapping[str, Any]:
    configurable = get_config().get("configurable")
    return configurable if isinstance(configurable, Mapping) else {}


def _thread_id() -> str:
    thread = _configurable().get("thread_id")
    return "" if thread is None else str(thread)


def _with_memory(request: ModelRequest[Any], index: int, text: str | None) -> ModelRequest[Any]:
    if text is None:
        return request
    messages: list[AnyMessage] = list(request.messages)
    messages.insert(index, memory_message(text))
    return request.override(messages=messages)


def _compacted(
    messages: Sequence[AnyMessage], index: int, context: str | None
) -> dict[str, Any] | None:
    """The state update putting the context in place of the history; None keeps the history."""
    if context is None:
        return None
    return {
        "messages": [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            memory_message(context),
            *messages[index:],
        ]
    }


class MemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Memory in before each model call, turns out after each run, compaction by the deployment.

    `client` serves `invoke`/`stream`, `async_client` serves `ainvoke`/`astream`; give the ones
    the application uses. The subject is `data_subject_id`, or else the run config's
    `configurable["data_subject_id"]`. Recall and context failures go to `on_error` and the run
    goes on without memory; a store failure goes to `on_error` and is raised as
    `MemoryStoreFailed`. Compaction is off unless `compact_trigger` is set.
    """

    def __init__(
        self,
        *,
        client: MemoryClient | None = None,
        async_client: AsyncMemoryClient | None = None,
        data_subject_id: str | None = None,
        on_error: ErrorHook | None = None,
        recall_controls: Mapping[str, Any] | None = None,
        context_characters: int | None = None,
        compact_trigger: CompactTrigger | None = None,
    ) -> None:
        if client is None and async_client is None:
            raise ValueError("give a MemoryClient, an AsyncMemoryClient, or both")
        if compact_trigger is not None:
            kind, threshold = compact_trigger
            if kind not in ("messages", "tokens") or threshold < 1:
                raise ValueError(
                    'compact_trigger is ("messages", n) or ("tokens", n) with n >= 1, '
                    f"not {compact_trigger!r}"
                )
        self.client = client
        self.async_client = async_client
        self.data_subject_id = data_subject_id
        self.on_error = on_error
        self.recall_controls = dict(recall_controls or {})
        self.context_characters = context_characters
        self.compact_trigger = compact_trigger
        self._recalled: dict[str, tuple[str, str | None]] = {}

    def _options(self) -> dict[str, Any]:
        subject = self.data_subject_id or _configurable().get("data_subject_id") or ""
        return {
            "data_subject_id": str(subject),
            "run_id": _thread_id(),
            "on_error": self.on_error,
            "recall_controls": self.recall_controls,
            "context_characters": self.context_characters,
        }

    def _memory(self) -> SyncAgentMemory:
        if self.client is None:
            raise RuntimeError("invoke needs a MemoryClient; this middleware has only an async one")
        return SyncAgentMemory(self.client, **self._options())

    def _async_memory(self) -> AgentMemory:
        if self.async_client is None:
            raise RuntimeError("ainvoke needs an AsyncMemoryClient; this middleware has a sync one")
        return AgentMemory(self.async_client, **self._options())

    def _compaction_due(self, messages: Sequence[AnyMessage]) -> int | None:
        """The person's message index when compaction is due and there is history before it."""
        if self.compact_trigger is None:
            return None
        index = person_index(messages)
        if not index:
            return None
        kind, threshold = self.compact_trigger
        size = len(messages) if kind == "messages" else count_tokens_approximately(messages)
        return index if size >= threshold else None

    def _held(self, person: BaseMessage) -> tuple[str, str | None] | None:
        """The recall already made for this person's message in this thread, if any."""
        held = self._recalled.get(_thread_id())
        return held if held is not None and held[0] == (person.id or person.text) else None

    def _hold(self, person: BaseMessage, text: str | None) -> str | None:
        self._recalled[_thread_id()] = (person.id or person.text, text)
        return text

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Replace the history with the deployment's context when compaction is due."""
        messages = state["messages"]
        index = self._compaction_due(messages)
        if index is None:
            return None
        return _compacted(messages, index, self._memory().context_message())

    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Replace the history with the deployment's context when compaction is due."""
        messages = state["messages"]
        index = self._compaction_due(messages)
        if index is None:
            return None
        return _compacted(messages, index, await self._async_memory().context_message())

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResult:
        """Hand the model the recall for the person's message, in this request only."""
        index = person_index(request.messages)
        if index is None:
            return handler(request)
        person = request.messages[index]
        held = self._held(person)
        if held is not None:
            text = held[1]
        else:
            text = self._hold(person, self._memory().recall_message(person.text))
        return handler(_with_memory(request, index, text))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResult:
        """Hand the model the recall for the person's message, in this request only."""
        index = person_index(request.messages)
        if index is None:
            return await handler(request)
        person = request.messages[index]
        held = self._held(person)
        if held is not None:
            text = held[1]
        else:
            recalled = await self._async_memory().recall_message(person.text)
            text = self._hold(person, recalled)
        return await handler(_with_memory(request, index, text))

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Store the person's message and the final reply of the run that just finished."""
        self._recalled.pop(_thread_id(), None)
        turn = answered_turn(state["messages"])
        if turn is not None:
            self._memory().observe(*turn)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Store the person's message and the final reply of the run that just finished."""
        self._recalled.pop(_thread_id(), None)
        turn = answered_turn(state["messages"])
        if turn is not None:
            await self._async_memory().observe(*turn)
        return None
