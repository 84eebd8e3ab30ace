"""Where the memory examples find their deployment: SATCHEL_MEMORY_URL and SATCHEL_TOKEN."""

import os
import sys

SERVE_URL = "http://127.0.0.1:8080"
"""Where `satchel serve` listens by default."""

SET_UP = (
    "start the deployment first (.venv/bin/satchel serve &, then wait for "
    "curl -sf localhost:8080/ready), then "
    "export SATCHEL_TOKEN=$(.venv/bin/satchel tokens create --project demo)"
)


def deployment() -> tuple[str, str]:
    """The deployment's URL (`satchel serve`'s by default) and token; without a token, say how
    to get one and exit 2."""
    token = os.environ.get("SATCHEL_TOKEN", "")
    if not token:
        print(f"SATCHEL_TOKEN is not set: {SET_UP}", file=sys.stderr)
        sys.exit(2)
    return os.environ.get("SATCHEL_MEMORY_URL") or SERVE_URL, token
