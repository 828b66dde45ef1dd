"""Binary dumpers for the arrays that ``put`` and ``put_writes`` send on every call.

psycopg dumps a plain ``list`` by inspecting its elements to choose an element dumper, then dumping
each element through the generic machinery: about 40 µs of Python per hot statement here, more than
building the parameters themselves. The lists the savers send have a known element type, so they are
wrapped in the marker classes below, whose dumpers write PostgreSQL's binary array format in one
pass (about 15 µs per statement; the numbers are in docs/performance.md). Calls with one to
``_core.VALUES_MAX_ROWS`` rows send scalars instead, which psycopg dumps in C; the arrays carry the
rest (a put of no channel value or of more than that many, more writes, or writes to a special
channel).

The dumpers are registered on psycopg's global adapters map when this module is imported, and only
for these private classes: no other type's adaptation changes. A connection whose adapters were
copied before the import does not see them; it then dumps the markers as the ``list`` subclasses they
are, through psycopg's own list dumper: the same bytes on the wire, only slower.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_INT4 = struct.Struct("!i")
_HEADER = struct.Struct("!iiiii")  # ndim, has_null, element oid, length, lower bound
_EMPTY = struct.Struct("!iii")  # ndim 0, has_null 0, element oid
_NULL = b"\xff\xff\xff\xff"

TEXT_OID, BYTEA_OID, INT4_OID = 25, 17, 23
TEXT_ARRAY_OID, BYTEA_ARRAY_OID, INT4_ARRAY_OID = 1009, 1001, 1007


class TextArray(list[str]):
    """A ``text[]`` parameter (elements are ``str``)."""


class ByteaArray(list[bytes | None]):
    """A ``bytea[]`` parameter (elements are ``bytes`` or None)."""


class Int4Array(list[int]):
    """An ``integer[]`` parameter (elements are ints within int4)."""


class NullBytea(bytes):
    """A NULL ``bytea`` parameter: the value of a channel version that stores none.

    psycopg sends ``None`` with no type, so a statement that sends a value in one call and None in
    the next has two parameter signatures, and each mix is prepared apart: with eight scalar values
    per statement, up to 256 prepared statements, well past psycopg's cache of 100. This one is
    typed ``bytea`` whatever it carries. Without its dumper (a connection whose adapters predate
    this module) it goes as the empty ``bytea`` it is, which the saver reads the same way.
    """


NULL_BYTEA = NullBytea()


def pack_array(items: list[Any], element_oid: int, encode: Callable[[Any], bytes]) -> bytes:
    """A one-dimensional array in PostgreSQL's binary format (``array_recv``)."""
    if not items:
        return _EMPTY.pack(0, 0, element_oid)
    parts = [b""]
    has_null = 0
    for item in items:
        if item is None:
            parts.append(_NULL)
            has_null = 1
        else:
            data = encode(item)
            parts.append(_INT4.pack(len(data)))
            parts.append(data)
    parts[0] = _HEADER.pack(1, has_null, element_oid, len(items), 1)
    return b"".join(parts)


class _TextArrayDumper(Dumper):
    format = Format.BINARY
    oid = TEXT_ARRAY_OID

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        conn = self.connection
        # text travels in the client encoding, as psycopg's own str dumper sends it
        self._encoding = conn.info.encoding if conn is not None else "utf-8"

    def dump(self, obj: Any) -> bytes:
        encoding = self._encoding
        return pack_array(obj, TEXT_OID, lambda s: s.encode(encoding))


class _ByteaArrayDumper(Dumper):
    format = Format.BINARY
    oid = BYTEA_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        return pack_array(obj, BYTEA_OID, bytes)


class _Int4ArrayDumper(Dumper):
    format = Format.BINARY
    oid = INT4_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        try:
            return pack_array(obj, INT4_OID, _INT4.pack)
        except struct.error:
            bad = [i for i in obj if not -(2**31) <= i < 2**31]
            raise psycopg.DataError(f"integer[] parameter out of int4 range: {bad[:3]}") from None


class _NullByteaDumper(Dumper):
    format = Format.BINARY
    oid = BYTEA_OID

    def dump(self, obj: Any) -> None:
        return None  # NULL (psycopg >= 3.2), with the bytea type of this dumper


def register(adapters: psycopg.adapt.AdaptersMap) -> None:
    """Register the marker dumpers on ``adapters`` (done for psycopg's global map at import)."""
    adapters.register_dumper(TextArray, _TextArrayDumper)
    adapters.register_dumper(ByteaArray, _ByteaArrayDumper)
    adapters.register_dumper(Int4Array, _Int4ArrayDumper)
    adapters.register_dumper(NullBytea, _NullByteaDumper)


register(psycopg.adapters)
