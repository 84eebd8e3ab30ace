"""PydanticAI message parts for memory: the untrusted memory prompt, reading the mark back, and the
text of a person's prompt.

PydanticAI merges consecutive requests before a model sees them, and a `ModelRequest`'s own
`metadata` does not survive that merge. The mark therefore lives on the memory prompt's one
`TextContent`, whose `metadata` stays with the part and is never sent to the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic_ai.messages import ModelRequestPart, TextContent, UserContent, UserPromptPart

from satchel.memory.message import UNTRUSTED_KEY


def memory_prompt(text: str) -> UserPromptPart:
    """A memory message as a user prompt part marked `taisce.untrusted: True`."""
    return UserPromptPart([TextContent(text, metadata={UNTRUSTED_KEY: True})])


def is_untrusted(part: ModelRequestPart) -> bool:
    """Whether a request part is a user prompt carrying the `taisce.untrusted` mark."""
    if not isinstance(part, UserPromptPart) or isinstance(part.content, str):
        return False
    return any(
        isinstance(item, TextContent)
        and isinstance(item.metadata, Mapping)
        and item.metadata.get(UNTRUSTED_KEY) is True
        for item in part.content
    )


def prompt_text(content: str | Sequence[UserContent] | None) -> str:
    """The text of a prompt: a string as is, the text items of a sequence joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = [
        item if isinstance(item, str) else item.content
        for item in content
        if isinstance(item, str | TextContent)
    ]
    return "\n".join(texts)
