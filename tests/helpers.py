"""Small helpers shared by the database tests."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint
from psycopg import pq


def checkpoint(
    values: dict[str, Any] | None = None, versions: dict[str, Any] | None = None
) -> Checkpoint:
    cp = generate_checkpoint(channel_values=dict(values or {}))
    cp["channel_versions"] = dict(
        versions if versions is not None else {k: 1 for k in (values or {})}
    )
    return cp


def config(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    c: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


class Trace:
    """Counts the round trips of one libpq connection: each one ends with one ReadyForQuery."""

    def __init__(self, pgconn: Any) -> None:
        self.pgconn = pgconn
        self.round_trips = 0
        self.messages: list[str] = []


@contextmanager
def traced(pgconn: Any) -> Iterator[Trace]:
    trace = Trace(pgconn)
    fd, path = tempfile.mkstemp(prefix="lgps-trace-")
    try:
        pgconn.trace(fd)
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        yield trace
    finally:
        pgconn.untrace()
        os.close(fd)
        with open(path, encoding="utf-8", errors="replace") as f:
            trace.messages = f.read().splitlines()
        os.unlink(path)
    trace.round_trips = sum(
        1 for m in trace.messages if "\tReadyForQuery" in m and m.startswith("B")
    )


def run_threads(targets: Sequence[Callable[[], object]], timeout: float | None = None) -> None:
    """Start one thread per target, then join them all."""
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)


def bag_of_words(
    texts: Sequence[str], dims: int, *, lower: bool = False, bias: bool = False
) -> list[list[float]]:
    """The store tests' deterministic embedding: each word, hashed, counts 1 in one of ``dims``
    dimensions (``lower``: words lowercased, commas split them; ``bias``: 1 more in the last
    dimension, so no text is the zero vector). A text without words is the zero vector."""
    out = []
    for text in texts:
        v = [0.0] * dims
        if bias:
            v[-1] = 1.0
        words = text.lower().replace(",", " ").split() if lower else text.split()
        for word in words:
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % dims] += 1.0
        out.append(v)
    return out


class Embedder:
    """``bag_of_words`` as an embedding function that counts its calls and records its texts."""

    def __init__(self, dims: int, *, lower: bool = False) -> None:
        self.dims = dims
        self.lower = lower
        self.calls = 0
        self.texts: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts.extend(texts)
        return bag_of_words(texts, self.dims, lower=self.lower)


STORE_TABLES = ("pgsaver_store", "pgsaver_store_vectors")


def xact_scans(conn: Any, indexes: Sequence[str] = ()) -> dict[str, tuple[int, int]]:
    """This transaction's (sequential, index) scans of the store's tables, and the scans of the
    ``indexes`` named (0 sequential)."""
    rows = conn.execute(
        "SELECT relname, seq_scan, idx_scan FROM pg_stat_xact_user_tables "
        "WHERE relname = ANY (%s) UNION ALL "
        "SELECT relname, 0, pg_stat_get_xact_numscans(oid) FROM pg_class WHERE relname = ANY (%s)",
        (list(STORE_TABLES), list(indexes)),
    ).fetchall()
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}


def scans_during(
    conn: Any, action: Callable[[], object], indexes: Sequence[str] = ()
) -> dict[str, tuple[int, int]]:
    """The scans ``action`` made (``xact_scans``) on ``conn``, in a transaction rolled back."""
    with conn.transaction(force_rollback=True):
        before = xact_scans(conn, indexes)
        action()
        after = xact_scans(conn, indexes)
    zero = (0, 0)
    return {
        t: (after[t][0] - before.get(t, zero)[0], after[t][1] - before.get(t, zero)[1])
        for t in after
    }


def freeze_empty_statistics(dsn: str) -> None:
    """ANALYZE of the store's tables as they are (empty) with autovacuum off for them, so the
    statistics stay those of empty tables however they grow."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        for table in STORE_TABLES:
            admin.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            admin.execute(f"ANALYZE {table}")


#: every part key the list values of thread %(t)s name (lists stored as their elements)
_NAMED_PARTS = """
    SELECT DISTINCT substr(b.blob, r.i, 16) AS key
    FROM pgsaver_blobs AS b
    CROSS JOIN LATERAL generate_series(
        3 + get_byte(b.blob, 1), octet_length(b.blob) - 15, 16) AS r (i)
    WHERE b.thread_id = %(t)s AND b.type = 'pgsaver.list'
"""


def parts_of(dsn: str, thread: str) -> tuple[int, int, int]:
    """(parts named, named but missing, stored but named by no value) of a thread's lists stored
    as their elements."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            f"WITH named AS MATERIALIZED ({_NAMED_PARTS}) "
            "SELECT (SELECT count(*) FROM named),"
            " (SELECT count(*) FROM named WHERE key NOT IN"
            "   (SELECT e.key FROM pgsaver_elements AS e WHERE e.thread_id = %(t)s)),"
            " (SELECT count(*) FROM pgsaver_elements AS e WHERE e.thread_id = %(t)s"
            "   AND e.key NOT IN (SELECT key FROM named))",
            {"t": thread},
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def assert_parts_whole(dsn: str, thread: str) -> int:
    """Every part a list value of the thread names is stored, and no stored part is named by
    none; returns how many are named."""
    named, missing, orphans = parts_of(dsn, thread)
    assert (missing, orphans) == (0, 0), (
        f"thread {thread!r}: {missing} parts missing, {orphans} left that nothing names"
    )
    return named
