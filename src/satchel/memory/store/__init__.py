"""Durable state of the memory deployment: PostgreSQL, its migrations, the embedded server."""
