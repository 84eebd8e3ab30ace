"""`xai.responses.v1`: xAI's Responses API through the `openai` SDK, replayed exactly, with
native compaction as a separate call.

The replay is the Responses one (`store: false`, encrypted reasoning included). OpenAI's
`reasoning.context` and inline `context_management` are refused. When the session asks for a
compaction, the accepted items alone go to `POST /responses/compact` (the buffered inputs and the
new frame are held aside); the answer must hold exactly one compaction item with encrypted
content, and its whole output replaces the accepted prefix, followed by the held inputs. The
compaction is part of the attempt: it commits only with an accepted action, and a retry compacts
the unchanged accepted history again.
"""

from __future__ import annotations

from satchel.providers.kit.errors import reply_error
from satchel.providers.kit.state import History
from satchel.providers.responses.adapter import ResponsesAdapter
from satchel.providers.responses.settings import XAIResponsesSettings
from satchel.providers.responses.state import Item, replayable
from satchel.providers.responses.wire import call_compact
from satchel.turns import (
    AdapterDescriptor,
    InvalidResponseError,
    NativeCompaction,
    RuntimeState,
)


class XAIResponsesAdapter(ResponsesAdapter):
    """Continuous conversation over xAI Responses, with native compaction."""

    descriptor = AdapterDescriptor(
        adapter_id="xai.responses.v1",
        provider="xai",
        api_surface="responses",
        implementation_path="src/satchel/providers/responses/xai_responses.py",
        version="1.0.0",
        strategies=("continuous_conversation",),
        review_status="unreviewed",
        compaction=("none", "native"),
    )
    request_settings = XAIResponsesSettings

    def compacted(self, state: RuntimeState) -> tuple[History, NativeCompaction | None]:
        prefix: list[Item] = state.payload["items"]
        if not prefix:  # nothing accepted yet: nothing to compact
            return History(prefix, ()), None
        reply = call_compact(self.client, self.model, prefix)
        if reply.usage is None:
            raise reply_error(InvalidResponseError, "the compaction reported no usage", reply)
        compactions = [item for item in reply.items if item.get("type") == "compaction"]
        if (
            len(compactions) != 1
            or not isinstance(compactions[0].get("encrypted_content"), str)
            or not compactions[0]["encrypted_content"]
        ):
            raise reply_error(
                InvalidResponseError,
                "the compaction must answer exactly one compaction item with encrypted content "
                f"(got {len(compactions)})",
                reply,
            )
        items = replayable(reply.items)
        record = {
            "items_before": len(prefix),
            "items_after": len(items),
            "turns_compacted": len(state.accepted_turns),
        }
        return History(items, ()), NativeCompaction(reply.usage, record)
