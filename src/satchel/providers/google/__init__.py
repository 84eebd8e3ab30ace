"""The Gemini Interactions family, over the official `google-genai` SDK."""
