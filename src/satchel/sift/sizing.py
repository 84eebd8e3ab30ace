"""Token sizes of messages, by a plugged-in counter or the estimate, remembered per message object.

The stored history is append-only: a message is never changed after it was added, so its size is
computed once.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

from satchel.sift.messages import (
    ChatMessage,
    TokenCounter,
    count_tokens,
    estimate_tokens,
    text_tokens,
)


class Sizer:
    """Sizes messages and tool definitions in tokens."""

    def __init__(self, counter: TokenCounter | None) -> None:
        self.counter = counter
        self._sizes: dict[int, tuple[ChatMessage, int]] = {}
        self._tools: tuple[str, int] = ("[]", 0)

    def __call__(self, message: ChatMessage) -> int:
        key = id(message)
        hit = self._sizes.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        if self.counter is None:
            size = estimate_tokens(message)
        else:
            size = count_tokens(message, self.counter)
        self._sizes[key] = (message, size)
        return size

    def tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Tokens of the tool definitions sent with every request."""
        if not tools:
            return 0
        text = json.dumps(tools, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        if text != self._tools[0]:
            self._tools = (text, text_tokens(text, self.counter))
        return self._tools[1]

    def forget_beyond(self, count: int) -> None:
        """Drop remembered sizes once they pass `count` entries, so memory follows the history."""
        if len(self._sizes) > count:
            self._sizes.clear()
