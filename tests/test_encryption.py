"""EncryptedSerializer: values round-trip and no channel value or write is stored in plaintext."""

from __future__ import annotations

import psycopg
from graphs import two_nodes
from helpers import checkpoint, config
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_pg_saver import PostgresSaver

KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "top-secret-value-4242"


def raw_bytes(dsn: str) -> bytes:
    """Every stored bytea and the text form of every row, concatenated."""
    with psycopg.connect(dsn) as conn:
        chunks: list[bytes] = []
        for table in ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes"):
            for (row,) in conn.execute(
                f"SELECT t::text FROM {table} AS t"
            ).fetchall():  # fixed names
                chunks.append(str(row).encode())
        for (blob,) in conn.execute(
            "SELECT blob FROM pgsaver_blobs UNION ALL SELECT blob FROM pgsaver_writes"
        ):
            if blob is not None:
                chunks.append(bytes(blob))
        for (body,) in conn.execute("SELECT checkpoint FROM pgsaver_checkpoints"):
            chunks.append(bytes(body))
    return b"\n".join(chunks)


def test_encrypted_values_round_trip_and_are_not_stored_in_plaintext(db_dsn: str) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        cp = checkpoint({"msg": SECRET, "nested": {"deep": [SECRET]}})
        stored = saver.put(config("t"), cp, {"step": 1}, cp["channel_versions"])
        saver.put_writes(stored, [("msg", SECRET + "-write")], "task")
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"msg": SECRET, "nested": {"deep": [SECRET]}}
        assert tup.pending_writes == [("task", "msg", SECRET + "-write")]

        graph = two_nodes().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "g"}}
        graph.invoke({"foo": SECRET, "bar": [SECRET]}, cfg)
        assert graph.get_state(cfg).values == {"foo": "b", "bar": [SECRET, "a", "b"]}

    stored_bytes = raw_bytes(db_dsn)
    assert SECRET.encode() not in stored_bytes
    with psycopg.connect(db_dsn) as conn:
        types = {
            r[0]
            for r in conn.execute(
                "SELECT type FROM pgsaver_blobs UNION SELECT type FROM pgsaver_writes"
            )
        }
    assert types <= {"msgpack+aes", "null+aes", "empty"}, types

    # without the key the data is unreadable rather than silently wrong
    with PostgresSaver.from_conn_string(db_dsn) as plain:
        try:
            tup = plain.get_tuple(config("t"))
        except Exception:
            tup = None
        assert tup is None or tup.checkpoint["channel_values"].get("msg") != SECRET
