"""The Chat Completions family: OpenAI-compatible rolling windows, open-weight reasoning replay and
DeepSeek thinking mode, over the official `openai` SDK."""
