"""The three ways the benchmark connects both savers; each is reported as a table of its own.

- ``same-pool``: both savers on the user pool the official docs recommend,
  ``ConnectionPool(dsn, max_size=20, kwargs={"autocommit": True, "prepare_threshold": 0,
  "row_factory": dict_row})`` (async: an ``AsyncConnectionPool`` of 10 with the same kwargs), one
  pool instance of that configuration per saver, passed to ``PostgresSaver(pool)`` and the official
  ``PostgresSaver(pool)``.
- ``defaults``: each saver as ``from_conn_string(dsn)`` makes it, with no options: ours owns a pool,
  the official saver one connection. For the concurrent async workload the official saver needs a
  pool (its ``from_conn_string`` gives one connection, which its lock serializes), so it gets an
  ``AsyncConnectionPool`` of 10 with the docs' kwargs; ours is ``AsyncPostgresSaver.from_conn_string``.
- ``pooler``: as ``same-pool`` with ``prepare_threshold=None`` on both savers' pools and on the
  floors' connections: what users of either must run behind a transaction-mode pooler without
  prepared statements (nothing goes through a pooler here; only the statements are unprepared).
- ``fresh-stats``: as ``same-pool``, with both savers' tables in a schema of their own
  (``FRESH_SCHEMA``), made empty by ``setup()`` and analyzed while empty, with autovacuum off on
  them: the statistics of a fresh deployment analyzed right after setup, kept for the whole run
  (a user's autovacuum would analyze again after some thousands of rows). Only the workloads
  that need no fixtures run there (put, put-strings, put-guarded, encrypted, graph): their tables
  grow from empty with the rounds, as a new deployment's do, and after each round by 20 copies of
  that round's threads (``Bench.grow``), so that later rounds run on tables tens of times larger
  than those the sessions planned on.

Only the public API of ``langgraph_pg_saver`` is used: the constructors on a pool or a connection,
``from_conn_string``, the ``schema`` option, ``setup`` and the saver methods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as OfficialAsyncSaver
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver

IMPLS = ("ours", "official")
FRESH_SCHEMA = "bench_fresh"  # both savers' tables for the fresh-stats configuration
ASYNC_POOL_SIZE = 10  # the async workload's pools (min = max)
SYNC_POOL_MAX = 20  # the docs' example; min_size stays psycopg_pool's default (4)


def pool_kwargs(prepare_threshold: int | None) -> dict[str, Any]:
    """The connection kwargs of the official docs' pool example."""
    return {"autocommit": True, "prepare_threshold": prepare_threshold, "row_factory": dict_row}


def _search_path(schema: str | None) -> dict[str, Any]:
    """Where the official saver's tables live: it follows the connection's search_path."""
    return {"options": f"-c search_path={schema}"} if schema else {}


def _ours_schema(schema: str | None) -> dict[str, Any]:
    return {"schema": schema} if schema else {}


@dataclass(frozen=True)
class Config:
    name: str
    title: str
    description: str
    # None: the savers' and floors' statements are never prepared (pooler mode); 0: always
    prepare_threshold: int | None
    shared_pool: bool  # same-pool and pooler: both savers on pools of the docs' configuration
    # fresh-stats: the savers' tables in FRESH_SCHEMA, analyzed while empty (see the docstring)
    fresh: bool = False

    @property
    def schema(self) -> str | None:
        """Where this configuration's savers keep their tables (None: the public schema)."""
        return FRESH_SCHEMA if self.fresh else None

    @property
    def floor_prepare(self) -> int | None:
        return self.prepare_threshold

    # ------------------------------------------------------------------ sync

    def sync_savers(
        self, dsn: str, stack: ExitStack, schema: str | None = None
    ) -> dict[str, BaseCheckpointSaver[Any]]:
        """Both sync savers, open until ``stack`` closes; with ``schema``, their tables live there."""
        if self.shared_pool:
            return {impl: self._pooled_saver(impl, dsn, stack, schema) for impl in IMPLS}
        ours = stack.enter_context(PostgresSaver.from_conn_string(dsn, **_ours_schema(schema)))
        official_dsn = make_conninfo(dsn, **_search_path(schema))
        official = stack.enter_context(OfficialSaver.from_conn_string(official_dsn))
        return {"ours": ours, "official": official}

    def _pooled_saver(
        self, impl: str, dsn: str, stack: ExitStack, schema: str | None
    ) -> BaseCheckpointSaver[Any]:
        kwargs = pool_kwargs(self.prepare_threshold)
        if impl == "official":
            kwargs.update(_search_path(schema))
        pool: ConnectionPool[Any] = ConnectionPool(
            dsn, max_size=SYNC_POOL_MAX, kwargs=kwargs, open=False
        )
        pool.open(wait=True)
        stack.callback(pool.close)
        if impl == "ours":
            return PostgresSaver(pool, **_ours_schema(schema))
        return OfficialSaver(pool)

    # ------------------------------------------------------------------ async

    @asynccontextmanager
    async def async_saver(self, impl: str, dsn: str) -> AsyncIterator[Any]:
        """One async saver for the concurrent workload (see the module's docstring)."""
        if impl == "ours" and not self.shared_pool:
            async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
                yield saver
            return
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=ASYNC_POOL_SIZE,
            max_size=ASYNC_POOL_SIZE,
            kwargs=pool_kwargs(self.prepare_threshold),
            open=False,
        )
        await pool.open(wait=True)
        try:
            yield AsyncPostgresSaver(pool) if impl == "ours" else OfficialAsyncSaver(pool)
        finally:
            await pool.close()


CONFIGS: dict[str, Config] = {
    c.name: c
    for c in (
        Config(
            "same-pool",
            "same pool",
            "Both savers on a user pool as the official docs recommend: psycopg_pool.ConnectionPool("
            "dsn, max_size=20, kwargs={autocommit: True, prepare_threshold: 0, row_factory: "
            "dict_row}) (min_size 4), one pool instance of that configuration per saver; the async "
            "workload: an AsyncConnectionPool of 10 with the same kwargs per saver. Floors prepared.",
            prepare_threshold=0,
            shared_pool=True,
        ),
        Config(
            "defaults",
            "defaults",
            "Each saver through its own from_conn_string(dsn), no options: ours owns a pool "
            "(its default size and prepare_threshold), the official saver one connection "
            "(prepare_threshold 0). The async workload: ours AsyncPostgresSaver.from_conn_string("
            "dsn); the official saver an AsyncConnectionPool of 10 with the docs' kwargs (its "
            "from_conn_string gives one connection). Floors prepared.",
            prepare_threshold=0,
            shared_pool=False,
        ),
        Config(
            "pooler",
            "pooler mode",
            "As same pool, with prepare_threshold=None on both savers' pools and on the floors' "
            "connections: no statement is prepared, as behind a transaction-mode pooler without "
            "prepared statements (no pooler is in the path).",
            prepare_threshold=None,
            shared_pool=True,
        ),
        Config(
            "fresh-stats",
            "fresh statistics",
            "As same pool, with both savers' tables in a schema of their own, created empty by "
            "setup() and analyzed while empty (autovacuum off on them), as a fresh deployment "
            "analyzed right after setup is; the tables grow from empty with the rounds, and after "
            "each round by 20 copies of its threads. Only the workloads that need no fixtures. "
            "Floors prepared.",
            prepare_threshold=0,
            shared_pool=True,
            fresh=True,
        ),
    )
}


def parse_configs(value: str) -> list[Config]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown or not names:
        raise ValueError(f"unknown configuration(s) {unknown}; choose from {', '.join(CONFIGS)}")
    return [CONFIGS[n] for n in dict.fromkeys(names)]
