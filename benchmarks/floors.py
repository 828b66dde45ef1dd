"""Floors: what no Postgres saver on psycopg can beat, measured in the same rounds as the savers.

The floors have tables of their own (``bench_floor*``), written by the bench with the same payloads
as the savers' fixtures, so they do not depend on either saver's schema (the bench can then measure
an older checkout of ours against the same floors). They follow the configuration's
``prepare_threshold``: prepared (0) in ``same-pool`` and ``defaults``, unprepared in ``pooler``.
"""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

NOTE = (
    "Floors: put and put_writes: the call's values (and checkpoint and metadata) serialized with"
    " LangGraph's serializer and made durable in one INSERT of one row each; get_tuple: the rows a"
    " saver must read (the checkpoint row, one primary-key lookup per channel value, its pending"
    " writes) in one statement, deserialized; list(thread): its 20 checkpoint rows, their distinct"
    " values and writes, in one statement, each value deserialized once per checkpoint that holds"
    " it (once in all for strings and numbers); list(None, filter): one round trip; graphs:"
    " LangGraph over InMemorySaver plus one durable one-row INSERT of what InMemorySaver"
    " serialized, per put and per put_writes, over the same driver; get_state: LangGraph with"
    " InMemorySaver. Single operations and the sync graph alternate with the savers call by call;"
    " the async floor runs as a block in rotation with them. best = official / floor (throughput:"
    " floor / official): the largest speedup any saver could show here."
)

SERDE = JsonPlusSerializer()

_TABLES = (
    # the write floors' sink: one row per value, kept whole in its row
    "CREATE TABLE IF NOT EXISTS bench_floor (k bigint PRIMARY KEY, v bytea)",
    "ALTER TABLE bench_floor ALTER v SET STORAGE MAIN",
    # the read floors' tables: the least a saver that keeps each channel value once per version
    # must store, keyed for one primary-key lookup per row read
    """CREATE TABLE IF NOT EXISTS bench_floor_checkpoints (
        thread_id text COLLATE "C" NOT NULL,
        checkpoint_ns text COLLATE "C" NOT NULL,
        checkpoint_id text COLLATE "C" NOT NULL,
        type text NOT NULL,
        checkpoint bytea NOT NULL,
        channel_versions jsonb NOT NULL,
        metadata jsonb NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id))""",
    """CREATE TABLE IF NOT EXISTS bench_floor_blobs (
        thread_id text COLLATE "C" NOT NULL,
        checkpoint_ns text COLLATE "C" NOT NULL,
        channel text COLLATE "C" NOT NULL,
        version text COLLATE "C" NOT NULL,
        type text NOT NULL,
        blob bytea,
        PRIMARY KEY (thread_id, checkpoint_ns, channel, version))""",
    """CREATE TABLE IF NOT EXISTS bench_floor_writes (
        thread_id text COLLATE "C" NOT NULL,
        checkpoint_ns text COLLATE "C" NOT NULL,
        checkpoint_id text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        idx integer NOT NULL,
        channel text COLLATE "C" NOT NULL,
        type text NOT NULL,
        blob bytea,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx))""",
    "ALTER TABLE bench_floor_blobs ALTER blob SET STORAGE MAIN",
    "ALTER TABLE bench_floor_writes ALTER blob SET STORAGE MAIN",
)
# lz4 (de)compresses several times faster than pglz; servers built without it keep pglz
_LZ4 = tuple(
    f"ALTER TABLE {t} ALTER {c} SET COMPRESSION lz4"
    for t, c in (
        ("bench_floor", "v"),
        ("bench_floor_blobs", "blob"),
        ("bench_floor_writes", "blob"),
    )
)


def make_tables(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in _TABLES:
            conn.execute(statement)
        for statement in _LZ4:
            with contextlib.suppress(psycopg.errors.FeatureNotSupported):
                conn.execute(statement)


def floor_key() -> int:
    return uuid.uuid4().int >> 65


def next_version(current: Any) -> str:
    """InMemorySaver's version format."""
    if current is None:
        v = 0
    elif isinstance(current, int):
        v = current
    else:
        v = int(str(current).split(".")[0])
    return f"{v + 1:032}.{random.random():016}"


def _body(checkpoint: Any) -> tuple[str, bytes]:
    """The checkpoint without its channel values (they go as values of their own)."""
    return SERDE.dumps_typed({k: v for k, v in checkpoint.items() if k != "channel_values"})


def _config(config: Any, checkpoint: Any) -> Any:
    c = config["configurable"]
    return {
        "configurable": {
            "thread_id": c["thread_id"],
            "checkpoint_ns": c.get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint["id"],
        }
    }


# ---------------------------------------------------------------------------- write floors


class InsertFloor:
    """The put and put_writes floors, driven by a payloads.Chain like the savers: serialize what
    the call must make durable and INSERT it, one row per value, in one statement."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def get_next_version(self, current: Any, channel: Any) -> str:
        return next_version(current)

    def _insert(self, parts: list[bytes]) -> None:
        rows = ", ".join(["(%s, %s)"] * len(parts))
        args: list[Any] = []
        for part in parts:
            args += [floor_key(), part]
        self.conn.execute(f"INSERT INTO bench_floor VALUES {rows}", args)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        values = checkpoint["channel_values"]
        parts = [SERDE.dumps_typed(values[ch])[1] for ch in new_versions]
        parts.append(_body(checkpoint)[1] + json.dumps(metadata).encode())
        self._insert(parts)
        return _config(config, checkpoint)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self._insert([SERDE.dumps_typed(v)[1] for _, v in writes])


class TableFloor:
    """Writes a payloads.Chain's checkpoints into the read floors' tables (fixtures only)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def get_next_version(self, current: Any, channel: Any) -> str:
        return next_version(current)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = _config(config, checkpoint)
        c = out["configurable"]
        key = (c["thread_id"], c["checkpoint_ns"])
        type_, body = _body(checkpoint)
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO bench_floor_checkpoints VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    *key,
                    c["checkpoint_id"],
                    type_,
                    body,
                    Jsonb(checkpoint["channel_versions"]),
                    Jsonb(metadata),
                ),
            )
            for ch, version in new_versions.items():
                t, data = SERDE.dumps_typed(checkpoint["channel_values"][ch])
                self.conn.execute(
                    "INSERT INTO bench_floor_blobs VALUES (%s, %s, %s, %s, %s, %s)",
                    (*key, ch, version, t, data),
                )
        return out

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        c = config["configurable"]
        with self.conn.transaction():
            for idx, (ch, value) in enumerate(writes):
                t, data = SERDE.dumps_typed(value)
                self.conn.execute(
                    "INSERT INTO bench_floor_writes VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        c["thread_id"],
                        c["checkpoint_ns"],
                        c["checkpoint_id"],
                        task_id,
                        WRITES_IDX_MAP.get(ch, idx),
                        ch,
                        t,
                        data,
                    ),
                )


# ---------------------------------------------------------------------------- read floors


def _writes_of(alias: str) -> str:
    """The read floors' last part: the pending writes of the checkpoints in CTE ``alias``."""
    return f"""UNION ALL
SELECT 2, NULL, NULL, NULL, w.type, w.blob
FROM {alias} CROSS JOIN LATERAL (
    SELECT w.type, w.blob FROM bench_floor_writes AS w
    WHERE w.thread_id = {alias}.thread_id AND w.checkpoint_ns = {alias}.checkpoint_ns
      AND w.checkpoint_id = {alias}.checkpoint_id
    OFFSET 0
) AS w
"""


# rows: (kind, channel, version, channel_versions, type, bytes); kind 0 a checkpoint, 1 a value,
# 2 a write
ROWS_SQL = """
WITH c AS (
    SELECT * FROM bench_floor_checkpoints
    WHERE thread_id = %(t)s AND checkpoint_ns = '' {and_id}
    ORDER BY checkpoint_id DESC LIMIT 1
)
SELECT 0, NULL, NULL, c.channel_versions, c.type, c.checkpoint FROM c
UNION ALL
SELECT 1, e.key, e.value, NULL, b.type, b.blob
FROM c CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS e
CROSS JOIN LATERAL (
    SELECT b.type, b.blob FROM bench_floor_blobs AS b
    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
      AND b.channel = e.key AND b.version = e.value
    OFFSET 0  -- by primary key, whatever the statistics say (a hash join would read every blob)
) AS b
""" + _writes_of("c")

LIST_SQL = """
WITH k AS (
    SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, channel_versions
    FROM bench_floor_checkpoints
    WHERE thread_id = %(t)s AND checkpoint_ns = ''
    -- a hidden limit: with a plain LIMIT 20 the generic plan expected a dozen rows per thread and
    -- read and sorted the whole 1,000-checkpoint thread
    ORDER BY checkpoint_id DESC LIMIT (SELECT 20::bigint)
), v AS (
    SELECT DISTINCT e.key, e.value FROM k CROSS JOIN LATERAL jsonb_each_text(k.channel_versions) AS e
)
SELECT 0, NULL, NULL, k.channel_versions, k.type, k.checkpoint FROM k
UNION ALL
SELECT 1, v.key, v.value, NULL, b.type, b.blob
FROM v CROSS JOIN LATERAL (
    SELECT b.type, b.blob FROM bench_floor_blobs AS b
    WHERE b.thread_id = %(t)s AND b.checkpoint_ns = '' AND b.channel = v.key AND b.version = v.value
    OFFSET 0
) AS b
""" + _writes_of("k")

_SHAREABLE = frozenset({str, int, float, bool, bytes, type(None)})
_UNSET = object()


def decode(rows: list[Any]) -> int:
    """What any saver must do with the rows it read: deserialize each checkpoint body, each write,
    and each channel value once per checkpoint that holds it, so that no two checkpoints share a
    mutable object (a value that decodes to a string or number is decoded once), and hold every
    decoded object until the call returns, as a read that returns them must (dropping each one as
    soon as it was decoded let the allocator hand the same warm memory to the next: about a sixth
    of list(thread)'s floor). Returns how many objects it holds."""
    loads = SERDE.loads_typed
    values: dict[tuple[str, str], list[Any]] = {
        (row[1], row[2]): [row[4], row[5], _UNSET] for row in rows if row[0] == 1
    }
    kept: list[Any] = []
    for row in rows:
        if row[0] == 0:
            kept.append(loads((row[4], row[5])))
            for key in (row[3] or {}).items():
                found = values.get(key)
                if found is None or found[0] == "empty":
                    continue
                value = found[2]
                if value is _UNSET:
                    value = loads((found[0], found[1] or b""))
                    if type(value) in _SHAREABLE:
                        found[2] = value
                kept.append(value)
        elif row[0] == 2:
            kept.append(loads((row[4], row[5] or b"")))
    return len(kept)


def read_floor(
    conn: psycopg.Connection[Any], thread: str, listing: bool
) -> Callable[[str | None], int]:
    """get_tuple's floor (latest, or by id) or, with ``listing``, list(thread, limit=20)'s, on a
    thread of the floor tables."""
    latest = ROWS_SQL.format(and_id="")
    by_id = ROWS_SQL.format(and_id="AND checkpoint_id = %(id)s")

    def rows(checkpoint_id: str | None) -> int:
        query = LIST_SQL if listing else (latest if checkpoint_id is None else by_id)
        with conn.cursor(binary=True) as cur:
            return decode(cur.execute(query, {"t": thread, "id": checkpoint_id}).fetchall())

    return rows


# ---------------------------------------------------------------------------- graph floors


FLOOR_INSERT = "INSERT INTO bench_floor VALUES (%s, %s)"


class _PayloadFloor(InMemorySaver):
    """InMemorySaver that can tell the bytes a put or put_writes must make durable: what it
    serialized for the call (the new channel values, the checkpoint and its metadata, or the
    writes)."""

    def put_payload(self, stored: Any, new_versions: Any) -> bytes:
        c = stored["configurable"]
        thread, ns = c["thread_id"], c["checkpoint_ns"]
        parts = [self.blobs[(thread, ns, k, v)][1] for k, v in new_versions.items()]
        body, meta, _ = self.storage[thread][ns][c["checkpoint_id"]]
        return b"".join((*parts, body[1], meta[1]))

    def writes_payload(self, config: Any, writes: Any, task_id: str) -> bytes:
        c = config["configurable"]
        stored = self.writes[(c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"])]
        return b"".join(
            stored[(task_id, WRITES_IDX_MAP.get(ch, idx))][2][1]
            for idx, (ch, _) in enumerate(writes)
        )


class DriverFloor(_PayloadFloor):
    """InMemorySaver that also pays the least any Postgres saver pays over psycopg: one durable
    single-row INSERT per put and per put_writes, carrying the bytes the call must make durable
    (see _PayloadFloor), and one round trip per get_tuple."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        super().__init__()
        self.conn = conn

    def get_tuple(self, config: Any) -> Any:
        self.conn.execute("SELECT 1").fetchone()
        return super().get_tuple(config)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        self.conn.execute(FLOOR_INSERT, (floor_key(), self.put_payload(stored, new_versions)))
        return stored

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        self.conn.execute(FLOOR_INSERT, (floor_key(), self.writes_payload(config, writes, task_id)))


class AsyncDriverFloor(_PayloadFloor):
    """DriverFloor for the async workload, over a pool of its own."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        super().__init__()
        self.pool = pool

    async def _statement(self, query: str, params: Any = None) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(query, params)

    async def aget_tuple(self, config: Any) -> Any:
        await self._statement("SELECT 1")
        return self.get_tuple(config)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = self.put(config, checkpoint, metadata, new_versions)
        await self._statement(FLOOR_INSERT, (floor_key(), self.put_payload(stored, new_versions)))
        return stored

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)
        payload = self.writes_payload(config, writes, task_id)
        await self._statement(FLOOR_INSERT, (floor_key(), payload))
