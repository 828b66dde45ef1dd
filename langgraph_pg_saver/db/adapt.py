"""A typed NULL ``bytea`` parameter for ``put``.

psycopg sends ``None`` with no type, so a statement that sends a value in one call and None in the
next has two parameter signatures, and each mix is prepared apart: with eight scalar values per
statement, up to 256 prepared statements, well past psycopg's cache of 100. :data:`NULL_BYTEA` is
typed ``bytea`` whatever it carries.

The dumper is registered on psycopg's global adapters map when this module is imported, and only
for this private class: no other type's adaptation changes. A connection whose adapters were copied
before the import does not see it; the marker then goes as the empty ``bytea`` it is, which the
saver reads the same way as NULL.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

BYTEA_OID = 17


class NullBytea(bytes):
    """A NULL ``bytea`` parameter: the value of a channel version that stores none, or the exact
    metadata of a checkpoint whose JSON lost nothing."""


NULL_BYTEA = NullBytea()


class _NullByteaDumper(Dumper):
    format = Format.BINARY
    oid = BYTEA_OID

    def dump(self, obj: Any) -> None:
        return None  # NULL (psycopg >= 3.2), with the bytea type of this dumper


def register(adapters: psycopg.adapt.AdaptersMap) -> None:
    """Register the marker's dumper on ``adapters`` (done for psycopg's global map at import)."""
    adapters.register_dumper(NullBytea, _NullByteaDumper)


register(psycopg.adapters)
