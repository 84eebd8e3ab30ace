"""satchel.sift: cache-stable context for tool-using agents.

A `ContextSift` decides what an agent sends on each call: completed tool steps are evicted in
batches and replaced in place by receipts, long results are bounded, full outputs go to an
artifact store the model can read back, and an overflow net holds the request under the window.
Between two batches each request is the previous one plus new content, byte for byte. It works on
plain OpenAI-style message lists and needs no other part of satchel.
"""

from satchel.sift.artifacts import Artifact, ArtifactInfo, ArtifactStore
from satchel.sift.canonical import canonical_arguments, tool_input
from satchel.sift.events import TrimEvent, TrimReason
from satchel.sift.hysteresis import plan_batch
from satchel.sift.manager import ContextSift
from satchel.sift.messages import ChatMessage, TokenCounter, estimate_tokens
from satchel.sift.result import SiftResult
from satchel.sift.settings import SiftSettings
from satchel.sift.state import SiftState
from satchel.sift.tools import ARTIFACT_TOOL_NAMES, ArtifactTools, artifact_tool_definitions
from satchel.sift.wire_anthropic import anthropic_request, anthropic_tools
from satchel.sift.wire_gemini import gemini_contents, gemini_request, gemini_tools
from satchel.sift.wire_openai import openai_chat_request, openai_messages, openai_tools
from satchel.sift.wire_responses import responses_input, responses_request, responses_tools

__all__ = [
    "ARTIFACT_TOOL_NAMES",
    "Artifact",
    "ArtifactInfo",
    "ArtifactStore",
    "ArtifactTools",
    "ChatMessage",
    "ContextSift",
    "SiftResult",
    "SiftSettings",
    "SiftState",
    "TokenCounter",
    "TrimEvent",
    "TrimReason",
    "anthropic_request",
    "anthropic_tools",
    "artifact_tool_definitions",
    "canonical_arguments",
    "estimate_tokens",
    "gemini_contents",
    "gemini_request",
    "gemini_tools",
    "openai_chat_request",
    "openai_messages",
    "openai_tools",
    "plan_batch",
    "responses_input",
    "responses_request",
    "responses_tools",
    "tool_input",
]
