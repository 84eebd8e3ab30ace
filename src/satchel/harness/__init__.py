"""The ARC-AGI-3 benchmarking harness: `satchel run`, its games, and the session factory."""

from satchel.harness.factory import build_compactor, build_session

__all__ = ["build_compactor", "build_session"]
