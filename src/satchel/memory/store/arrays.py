"""Array parameters written as PostgreSQL array literals, for `%s::type[]`.

psycopg adapts a list parameter element by element in Python. A passage search sends hundreds
(the pairs of turns its neighbours ask about, the messages it reads); joined once into one
literal, the same array costs far less.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable


def text_array(values: Iterable[str]) -> str:
    """Each text double-quoted, its backslashes and double quotes escaped (so a comma, a brace,
    a space or the word NULL stays text)."""
    quoted = ('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values)
    return "{" + ",".join(quoted) + "}"


def int_array(values: Iterable[int]) -> str:
    return "{" + ",".join(str(int(value)) for value in values) + "}"


def uuid_array(values: Iterable[uuid.UUID]) -> str:
    """In the 32-hex-digit form, which PostgreSQL reads as well and Python writes faster."""
    return "{" + ",".join(value.hex for value in values) + "}"
