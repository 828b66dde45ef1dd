"""The server a benchmark runs on: ``LANGGRAPH_PG_BENCH_DSN``, or a throwaway cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg


@contextmanager
def bench_database(name: str, settings: str = "") -> Iterator[str]:
    """A DSN: ``LANGGRAPH_PG_BENCH_DSN`` as it is, or database ``name`` of a cluster started from
    the local server binaries with default settings (fsync on) plus ``settings``, stopped after."""
    dsn = os.environ.get("LANGGRAPH_PG_BENCH_DSN")
    if dsn:
        yield dsn
        return
    from tests.pgserver import from_local_binaries  # stdlib and psycopg only

    server = from_local_binaries(settings=settings) if settings else from_local_binaries()
    if server is None:
        sys.exit("no Postgres server binaries found; set LANGGRAPH_PG_BENCH_DSN")
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        yield server.dsn_for(name)
    finally:
        server.stop()
