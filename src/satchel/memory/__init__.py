"""The memory deployment: a taisce-v1-compatible HTTP service on PostgreSQL.

It imports nothing else of satchel, so it stays deployable on its own.
"""
