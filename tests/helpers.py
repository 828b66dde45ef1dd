"""Small helpers shared by the database tests."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

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
