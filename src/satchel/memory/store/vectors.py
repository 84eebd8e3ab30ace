"""Vector parameters for `%s::vector`, sent in pgvector's binary form.

The text form formats each float on its own in Python and is parsed again by the server; the
binary form (a 2-byte dimension count, 2 zero bytes, then big-endian float4s) is one numpy
conversion. A question's vector is written on the way from its embedding to the vector
statement, and the worker writes one for every message it embeds (why: decision 0048 in
docs/decisions/).
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format


class Packed(bytes):
    """One vector in pgvector's binary form (see `packed`)."""


class PackedDumper(Dumper):
    """Sends a `Packed` as it is, in binary, its type left to the server: a parameter cast
    `::vector` is read by pgvector's own binary input."""

    format = Format.BINARY
    oid = 0

    def dump(self, obj: Packed) -> bytes:
        return obj


# Registered when the modules that send vectors are imported, before they make connections: a
# connection copies the global adapters when it is made and does not see a dumper added later.
psycopg.adapters.register_dumper(Packed, PackedDumper)


def packed(row: npt.NDArray[np.float32]) -> Packed:
    """`row` in pgvector's binary form."""
    return Packed(struct.pack(">HH", len(row), 0) + row.astype(">f4").tobytes())


def vector_literal(row: npt.NDArray[np.float32]) -> str:
    """pgvector's text form of one vector, exact (nine significant digits name a float4), for
    `COPY` in text format, which takes no binary field."""
    return "[" + ",".join(f"{value:.9g}" for value in row.tolist()) + "]"
