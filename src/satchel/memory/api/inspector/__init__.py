"""The memory inspector: a static page at `/inspect` that reads a project through the API."""
