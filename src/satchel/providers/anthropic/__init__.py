"""The Anthropic Messages family, over the official `anthropic` SDK."""
