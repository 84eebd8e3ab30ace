"""The HTTP surface of the memory deployment (taisce v1 paths, bodies and error codes)."""
