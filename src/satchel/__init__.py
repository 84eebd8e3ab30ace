"""satchel: what an LLM agent carries from one model call to the next."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("satchel")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

__all__ = ["__version__"]
