"""Numeric libraries in the service run one thread each: set before numpy is first imported.

Questions are embedded on the request path while PostgreSQL, the worker and other requests want
the same cores; a library's own threads then wait for cores they cannot get, and a question takes
longer with more of them. The local model's ONNX Runtime session is given one thread in its own
options (`passages/embedder.py`).
"""

from __future__ import annotations

import os

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread_each() -> None:
    """Ask the numeric libraries for one thread each, unless the environment already says."""
    for name in VARIABLES:
        os.environ.setdefault(name, "1")
