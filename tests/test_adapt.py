"""The binary array dumpers of put/put_writes: what Postgres receives equals what was sent."""

from __future__ import annotations

import psycopg
import pytest
from helpers import checkpoint, config
from psycopg.adapt import AdaptersMap, PyFormat
from psycopg.types.array import ListBinaryDumper

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver._adapt import ByteaArray, Int4Array, TextArray, register

TEXTS = ["", "a", "é ü", "𝄞 emoji 🙂", "x" * 5000, "quote ' and \" and \\ and {,}"]
BLOBS: list[bytes | None] = [b"", b"\x00\xff\x00", None, bytes(range(256)) * 20]
INTS = [0, 1, -1, -4, 2**31 - 1, -(2**31)]


def _round_trip(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[object, ...] | None:
    with conn.cursor(binary=True) as cur:
        return cur.execute(
            "SELECT %b::text[], %b::bytea[], %b::integer[], %b::text[], %b::bytea[], %b::integer[],"
            " array_length(%b::text[], 1), cardinality(%b::integer[])",
            (
                TextArray(TEXTS),
                ByteaArray(BLOBS),
                Int4Array(INTS),
                TextArray(),
                ByteaArray(),
                Int4Array(),
                TextArray(TEXTS),
                Int4Array(INTS),
            ),
        ).fetchone()


def test_markers_use_the_fast_dumpers() -> None:
    for cls in (TextArray, ByteaArray, Int4Array):
        dumper = psycopg.adapters.get_dumper(cls, PyFormat.BINARY)
        assert dumper.__module__ == "langgraph_pg_saver._adapt", (cls, dumper)


def test_arrays_reach_postgres_unchanged(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        row = _round_trip(conn)
    assert row == (TEXTS, BLOBS, INTS, [], [], [], len(TEXTS), len(INTS))


def test_text_follows_the_client_encoding(db_dsn: str) -> None:
    # bytes sent in binary text are read in the client encoding: UTF-8 bytes under LATIN1 would
    # arrive as mojibake
    latin = ["é à ç", "plain", "ÿ"]
    with psycopg.connect(db_dsn) as conn:
        conn.execute("SET client_encoding TO 'LATIN1'")
        with conn.cursor(binary=True) as cur:
            row = cur.execute(
                "SELECT %b::text[], convert_to(array_to_string(%b::text[], '|'), 'UTF8')",
                (TextArray(latin), TextArray(latin)),
            ).fetchone()
    assert row is not None
    assert row[0] == latin
    assert bytes(row[1]).decode("utf-8") == "|".join(latin)


def test_int4_out_of_range_is_refused_before_sending(db_dsn: str) -> None:
    with (
        psycopg.connect(db_dsn) as conn,
        pytest.raises(psycopg.DataError, match=r"out of int4 range: \[2147483648\]"),
    ):
        conn.execute("SELECT %b::integer[]", (Int4Array([2**31]),))


def test_same_bytes_as_psycopgs_own_list_dumper() -> None:
    # a connection whose adapters were copied before our import falls back to psycopg's list
    # dumper (the markers are lists); both must put the same array on the wire
    ours = AdaptersMap(psycopg.postgres.adapters)
    register(ours)
    # (empty lists differ: psycopg sends them as the text literal {}; both are checked above)
    for marker in (TextArray(TEXTS), ByteaArray(BLOBS)):
        fast = ours.get_dumper(type(marker), PyFormat.BINARY)(type(marker)).dump(marker)
        generic = ListBinaryDumper(list).upgrade(list(marker), PyFormat.BINARY)
        assert bytes(fast) == bytes(generic.dump(list(marker))), type(marker)


def test_put_and_writes_round_trip_through_the_dumpers(saver: PostgresSaver) -> None:
    cp = checkpoint({"a": "é" * 10, "b": b"\x00bytes", "c": None})
    stored = saver.put(config("t"), cp, {"source": "input", "step": -1}, cp["channel_versions"])
    saver.put_writes(stored, [("a", "w1"), ("__error__", "boom"), ("b", None)], "task", "p")
    got = saver.get_tuple(stored)
    assert got is not None
    assert got.checkpoint["channel_values"] == {"a": "é" * 10, "b": b"\x00bytes", "c": None}
    assert sorted(got.pending_writes) == sorted(
        [("task", "a", "w1"), ("task", "__error__", "boom"), ("task", "b", None)]
    )
