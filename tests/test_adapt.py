"""What put/put_writes send reaches Postgres unchanged: arrays as psycopg dumps plain lists, and the
typed NULL bytea of a channel version without a value."""

from __future__ import annotations

import psycopg
from helpers import checkpoint, config
from psycopg.adapt import PyFormat

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.db.adapt import NULL_BYTEA, NullBytea

TEXTS = ["", "a", "é ü", "𝄞 emoji 🙂", "x" * 5000, "quote ' and \" and \\ and {,}"]
BLOBS: list[bytes | None] = [b"", b"\x00\xff\x00", None, bytes(range(256)) * 20]
INTS = [0, 1, -1, -4, 2**31 - 1, -(2**31)]


def test_arrays_reach_postgres_unchanged(db_dsn: str) -> None:
    empty_texts: list[str] = []
    empty_blobs: list[bytes | None] = []
    with psycopg.connect(db_dsn) as conn, conn.cursor(binary=True) as cur:
        row = cur.execute(
            "SELECT %b::text[], %b::bytea[], %b::integer[], %b::text[], %b::bytea[],"
            " array_length(%b::text[], 1), cardinality(%b::integer[])",
            (TEXTS, BLOBS, INTS, empty_texts, empty_blobs, TEXTS, INTS),
        ).fetchone()
    assert row == (TEXTS, BLOBS, INTS, [], [], len(TEXTS), len(INTS))


def test_text_follows_the_client_encoding(db_dsn: str) -> None:
    # bytes sent in binary text are read in the client encoding: UTF-8 bytes under LATIN1 would
    # arrive as mojibake
    latin = ["é à ç", "plain", "ÿ"]
    with psycopg.connect(db_dsn) as conn:
        conn.execute("SET client_encoding TO 'LATIN1'")
        with conn.cursor(binary=True) as cur:
            row = cur.execute(
                "SELECT %b::text[], convert_to(array_to_string(%b::text[], '|'), 'UTF8')",
                (latin, latin),
            ).fetchone()
    assert row is not None
    assert row[0] == latin
    assert bytes(row[1]).decode("utf-8") == "|".join(latin)


def test_the_null_bytea_is_a_typed_null(db_dsn: str) -> None:
    dumper = psycopg.adapters.get_dumper(NullBytea, PyFormat.BINARY)
    assert dumper.__module__ == "langgraph_pg_saver.db.adapt"
    with psycopg.connect(db_dsn) as conn, conn.cursor(binary=True) as cur:
        row = cur.execute("SELECT %b IS NULL, pg_typeof(%b)::text", (NULL_BYTEA, NULL_BYTEA))
        assert row.fetchone() == (True, "bytea")


def test_put_and_writes_round_trip(saver: PostgresSaver) -> None:
    cp = checkpoint({"a": "é" * 10, "b": b"\x00bytes", "c": None})
    stored = saver.put(config("t"), cp, {"source": "input", "step": -1}, cp["channel_versions"])
    saver.put_writes(stored, [("a", "w1"), ("__error__", "boom"), ("b", None)], "task", "p")
    got = saver.get_tuple(stored)
    assert got is not None
    assert got.checkpoint["channel_values"] == {"a": "é" * 10, "b": b"\x00bytes", "c": None}
    assert sorted(got.pending_writes) == sorted(
        [("task", "a", "w1"), ("task", "__error__", "boom"), ("task", "b", None)]
    )
