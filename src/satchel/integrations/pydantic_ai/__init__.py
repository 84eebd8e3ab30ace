"""PydanticAI integration: a capability that injects recall and compacts by the deployment's
context before each model request, and observes each successful run."""

from satchel.integrations.pydantic_ai.memory import PydanticAIMemory, output_text
from satchel.integrations.pydantic_ai.messages import is_untrusted, memory_prompt, prompt_text

__all__ = ["PydanticAIMemory", "is_untrusted", "memory_prompt", "output_text", "prompt_text"]
