"""The Responses family: OpenAI and xAI Responses with exact replay, over the official `openai`
SDK."""
