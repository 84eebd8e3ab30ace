"""satchel.sift stands alone: it imports no other part of satchel and no agent framework."""

import subprocess
import sys

PROBE = (
    "import sys, satchel.sift\n"
    "watched = ('satchel.', 'langchain', 'pydantic_ai', 'openai', 'anthropic', 'httpx')\n"
    "print(sorted(m for m in sys.modules if m.startswith(watched)"
    " and not m.startswith('satchel.sift')))"
)


def test_the_core_imports_nothing_else() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
