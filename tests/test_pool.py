"""The pools from_conn_string builds hand out the most recently returned connection first."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import psycopg
from helpers import checkpoint, config, run_threads
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver
from langgraph_pg_saver.db.pool import AsyncLifoConnectionPool, LifoConnectionPool


def test_sync_pool_reuses_the_connection_returned_last(db_dsn: str) -> None:
    with LifoConnectionPool(db_dsn, min_size=3, max_size=3, open=True) as pool:
        pool.wait()
        a, b, c = pool.getconn(), pool.getconn(), pool.getconn()
        pids = [x.info.backend_pid for x in (a, b, c)]
        for x in (a, b, c):  # returned in this order: c is the most recent
            pool.putconn(x)
        seen = []
        for _ in range(5):
            with pool.connection() as conn:
                seen.append(conn.info.backend_pid)
        assert seen == [pids[2]] * 5
        # two at once: the two most recently returned, newest first; the oldest stays idle
        x, y = pool.getconn(), pool.getconn()
        assert [x.info.backend_pid, y.info.backend_pid] == [pids[2], pids[1]]
        pool.putconn(x)
        pool.putconn(y)
        assert pool.get_stats()["pool_size"] == 3


def test_plain_pool_rotates_which_is_why_we_subclass(db_dsn: str) -> None:
    # the behaviour LifoConnectionPool changes; if psycopg_pool ever hands out the newest
    # connection itself, this fails and the subclass can go
    with ConnectionPool(db_dsn, min_size=3, max_size=3, open=True) as pool:
        pool.wait()
        seen = set()
        for _ in range(6):
            with pool.connection() as conn:
                seen.add(conn.info.backend_pid)
        assert len(seen) == 3


async def test_async_pool_reuses_the_connection_returned_last(db_dsn: str) -> None:
    async with AsyncLifoConnectionPool(db_dsn, min_size=3, max_size=3, open=False) as pool:
        await pool.wait()
        conns = [await pool.getconn() for _ in range(3)]
        newest = conns[-1].info.backend_pid
        for conn in conns:
            await pool.putconn(conn)
        seen = []
        for _ in range(5):
            async with pool.connection() as conn:
                seen.append(conn.info.backend_pid)
        assert seen == [newest] * 5


async def test_async_pool_still_serves_concurrent_callers(db_dsn: str) -> None:
    async with AsyncLifoConnectionPool(db_dsn, min_size=1, max_size=4, open=False) as pool:

        async def one() -> int:
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_sleep(0.05)")
                return conn.info.backend_pid

        pids = await asyncio.gather(*(one() for _ in range(8)))
        assert len(pids) == 8
        assert 1 <= len(set(pids)) <= 4


def test_sync_pool_serves_threads(db_dsn: str) -> None:
    errors: list[BaseException] = []
    with LifoConnectionPool(db_dsn, min_size=1, max_size=3, open=True) as pool:

        def work() -> None:
            try:
                for _ in range(20):
                    with pool.connection() as conn:
                        assert conn.execute("SELECT 1").fetchone() == (1,)
            except BaseException as e:  # reported to the test thread
                errors.append(e)

        run_threads([work] * 6)
        assert pool.get_stats()["pool_max"] == 3
    assert errors == []


def test_from_conn_string_builds_lifo_pools(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        assert isinstance(saver._pool, LifoConnectionPool)
        assert isinstance(saver._pool, ConnectionPool)


async def test_async_from_conn_string_builds_lifo_pools(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn) as saver:
        assert isinstance(saver._pool, AsyncLifoConnectionPool)
        assert isinstance(saver._pool, AsyncConnectionPool)


# ---------------------------------------------------------------- the kept write cursor

KEPT = "_lgps_kept_cursor"


def _params_bytes(cur: Any) -> int:
    """The bytes of the last parameters a cursor holds (psycopg keeps them on its _query)."""
    return sum(len(p) for p in (cur._query.params or []) if p is not None)


def test_small_statements_reuse_one_cursor_per_connection_but_keep_nothing_large(
    db_dsn: str,
) -> None:
    with PostgresSaver.from_conn_string(db_dsn, min_size=1, max_size=1) as saver:
        stored = saver.put(config("t"), checkpoint({"a": "x"}), {}, {"a": 1})
        with saver._pool.connection() as conn:  # type: ignore[union-attr]
            kept = getattr(conn, KEPT)
        saver.put_writes(stored, [("a", "y")], "task")
        stored = saver.put(stored, checkpoint({"a": "z"}, {"a": 2}), {}, {"a": 2})
        with saver._pool.connection() as conn:  # type: ignore[union-attr]
            assert getattr(conn, KEPT) is kept
        small = _params_bytes(kept)
        assert 0 < small < 10_000
        # a large value runs on a cursor of its own: the kept one does not hold on to it (random
        # text: compression would shrink a repeated letter to a few bytes)
        big = secrets.token_urlsafe(300 * 1024)
        stored = saver.put(stored, checkpoint({"a": big}, {"a": 3}), {}, {"a": 3})
        saver.put_writes(stored, [("a", big)], "task-2")
        with saver._pool.connection() as conn:  # type: ignore[union-attr]
            assert getattr(conn, KEPT) is kept
        assert _params_bytes(kept) == small
        # get_tuple uses it too, but a large checkpoint it read is not kept: the cursor is closed
        # and the next call makes a new one
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["a"] == big
        assert [w[2] for w in tup.pending_writes or []] == [big]
        assert kept.closed
        saver.put_writes(stored, [("b", "small")], "task-3")
        with saver._pool.connection() as conn:  # type: ignore[union-attr]
            again = getattr(conn, KEPT)
        assert again is not kept
        assert not again.closed
        # a small checkpoint read stays on the kept cursor
        small_config = saver.put(stored, checkpoint({"a": "s"}, {"a": 4}), {}, {"a": 4})
        assert saver.get_tuple(small_config) is not None
        assert not again.closed


async def test_async_puts_reuse_one_cursor_per_connection(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn, min_size=1, max_size=1) as saver:
        stored = await saver.aput(config("t"), checkpoint({"a": "x"}), {}, {"a": 1})
        async with saver._pool.connection() as conn:  # type: ignore[union-attr]
            kept = getattr(conn, KEPT)
        await saver.aput_writes(stored, [("a", "y")], "task")
        await saver.aput(stored, checkpoint({"a": "z"}, {"a": 2}), {}, {"a": 2})
        async with saver._pool.connection() as conn:  # type: ignore[union-attr]
            assert getattr(conn, KEPT) is kept
        tup = await saver.aget_tuple(config("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["a"] == "z"


class _NoNewAttributes(psycopg.Connection[Any]):
    """A connection class that refuses attributes it does not know (as one with __slots__ would)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == KEPT:
            raise AttributeError(name)
        super().__setattr__(name, value)


def test_a_connection_that_takes_no_attributes_gets_a_new_cursor_each_time(db_dsn: str) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(
        db_dsn,
        min_size=1,
        max_size=1,
        connection_class=_NoNewAttributes,
        kwargs={"autocommit": True},
        open=True,
    )
    with pool, PostgresSaver(pool) as saver:
        stored = saver.put(config("t"), checkpoint({"a": "x"}), {}, {"a": 1})
        saver.put_writes(stored, [("a", "y")], "task")
        tup = saver.get_tuple(config("t"))
        assert tup is not None
        assert tup.pending_writes == [("task", "a", "y")]
        with pool.connection() as conn:
            assert not hasattr(conn, KEPT)
