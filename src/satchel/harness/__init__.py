"""The ARC-AGI-3 benchmarking harness: `satchel run`, its games, and the session factory.

The factory is imported on first use, so that a part that needs no provider SDK (the scripted
model server) starts and exits without loading them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from satchel.harness.factory import build_compactor, build_session

__all__ = ["build_compactor", "build_session"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from satchel.harness import factory

        return getattr(factory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
