"""The async store's backlog (store/backlog.py): calls beyond the pool's connections wait in the
store and run merged, each getting its own results, in call order, without the pool's timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg
import pytest
from langgraph.store.base import InvalidNamespaceError

from langgraph_pg_saver import AsyncPostgresStore, ConnectionTimeoutError, InvalidInputError
from tests.helpers import bag_of_words

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def small_store(db_dsn: str) -> AsyncIterator[AsyncPostgresStore]:
    # one connection, and a pool timeout far shorter than the burst takes
    async with AsyncPostgresStore.from_conn_string(
        db_dsn, pool_config={"min_size": 1, "max_size": 1}, timeout=1.0
    ) as store:
        await store.setup()
        yield store


class _RowLock:
    """Another session holding the row lock of one item: a put of it waits until released."""

    def __init__(self, dsn: str, ns: tuple[str, ...], key: str) -> None:
        self.conn = psycopg.connect(dsn)
        self.conn.execute(
            "SELECT 1 FROM pgsaver_store WHERE prefix = %s AND key = %s FOR UPDATE",
            (".".join(ns), key),
        )

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()


async def _occupied(store: AsyncPostgresStore, dsn: str) -> tuple[asyncio.Task[None], _RowLock]:
    """The store's one connection busy with a put waiting on a row lock."""
    await store.aput(("slow",), "k", {"n": 0})
    lock = _RowLock(dsn, ("slow",), "k")
    task = asyncio.create_task(store.aput(("slow",), "k", {"n": 1}))
    for _ in range(200):
        if store._backlog.busy:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # the put is on the server, waiting for the lock
    return task, lock


async def test_a_burst_far_beyond_the_pool_completes_with_every_result(
    small_store: AsyncPostgresStore,
) -> None:
    store = small_store
    n = 3000
    calls: list[Any] = []
    for i in range(n):
        ns = ("users", str(i % 7))
        calls.append(store.aput(ns, f"k{i}", {"i": i, "kind": "odd" if i % 2 else "even"}))
        calls.append(store.aget(ns, f"k{i}"))
    calls.append(store.asearch(("users",), limit=5))
    calls.append(store.alist_namespaces(prefix=("users",)))
    results = await asyncio.gather(*calls)
    for i in range(n):
        got = results[2 * i + 1]
        # a get issued with the put of its key: concurrent, so it sees the item or not, never
        # anything else
        assert got is None or got.value == {"i": i, "kind": "odd" if i % 2 else "even"}
    for i in range(0, n, 97):
        item = await store.aget(("users", str(i % 7)), f"k{i}")
        assert item is not None
        assert item.value["i"] == i
    assert len(await store.asearch(("users",), limit=n + 1)) == n
    assert store._backlog.busy == 0
    assert store._backlog.waiting == 0


async def test_queued_calls_run_in_call_order_and_a_cancelled_one_not_at_all(
    small_store: AsyncPostgresStore, db_dsn: str
) -> None:
    store = small_store
    slow, lock = await _occupied(store, db_dsn)
    try:
        first = asyncio.create_task(store.aput(("q",), "same", {"v": 1}))
        second = asyncio.create_task(store.aput(("q",), "same", {"v": 2}))
        dropped = asyncio.create_task(store.aput(("q",), "dropped", {"v": 3}))
        read = asyncio.create_task(store.aget(("q",), "same"))
        await asyncio.sleep(0.1)
        assert store._backlog.waiting == 4
        dropped.cancel()
    finally:
        lock.release()
    await slow
    await asyncio.gather(first, second)
    assert (await read) is None  # queued with the puts: reads first, as in one batch
    with pytest.raises(asyncio.CancelledError):
        await dropped
    item = await store.aget(("q",), "same")
    assert item is not None
    assert item.value == {"v": 2}
    assert await store.aget(("q",), "dropped") is None


async def test_bad_input_in_the_backlog_fails_that_call_alone(
    small_store: AsyncPostgresStore, db_dsn: str
) -> None:
    store = small_store
    slow, lock = await _occupied(store, db_dsn)
    try:
        good = asyncio.create_task(store.aput(("b",), "good", {"v": 1}))
        bad_ns = asyncio.create_task(store.aput(("b", ""), "x", {"v": 1}))
        bad_value = asyncio.create_task(store.aput(("b",), "nan", {"v": float("nan")}))
        also_good = asyncio.create_task(store.aput(("b",), "also", {"v": 2}))
        await asyncio.sleep(0.1)
    finally:
        lock.release()
    await slow
    await asyncio.gather(good, also_good)
    with pytest.raises(InvalidNamespaceError):
        await bad_ns
    with pytest.raises(InvalidInputError):
        await bad_value
    assert {i.key for i in await store.asearch(("b",))} == {"good", "also"}


def _embed(texts: Sequence[str]) -> list[list[float]]:
    for text in texts:
        if "boom" in text:
            raise RuntimeError(f"the embedding service refused {text!r}")
    return bag_of_words(texts, 8)


async def test_a_merged_batch_that_fails_gives_each_call_its_own_outcome(
    vector_dsn: str,
) -> None:
    async with AsyncPostgresStore.from_conn_string(
        vector_dsn,
        pool_config={"min_size": 1, "max_size": 1},
        index={"dims": 8, "embed": _embed, "fields": ["text"]},
    ) as store:
        await store.setup()
        slow, lock = await _occupied(store, vector_dsn)
        try:
            calls = [
                asyncio.create_task(store.aput(("e",), f"k{i}", {"text": f"fine words {i}"}))
                for i in range(5)
            ]
            failing = asyncio.create_task(store.aput(("e",), "bad", {"text": "boom here"}))
            calls += [
                asyncio.create_task(store.aput(("e",), f"j{i}", {"text": f"more words {i}"}))
                for i in range(5)
            ]
            await asyncio.sleep(0.1)
            assert store._backlog.waiting == 11
        finally:
            lock.release()
        await slow
        await asyncio.gather(*calls)
        with pytest.raises(RuntimeError, match="boom here"):
            await failing
        found = await store.asearch(("e",), query="words", limit=20)
        assert sorted(i.key for i in found) == sorted(
            [f"k{i}" for i in range(5)] + [f"j{i}" for i in range(5)]
        )
        assert all(i.score is not None for i in found)
        assert await store.aget(("e",), "bad") is None


async def test_a_pool_that_gives_no_connection_fails_the_merged_calls_at_once(
    db_dsn: str,
) -> None:
    """Both connections held elsewhere (a saver on the same pool, say): the calls in flight and
    the merged batch of the queued ones each wait the pool's timeout once; the queued calls are not
    run again one by one, each waiting it again."""
    async with AsyncPostgresStore.from_conn_string(
        db_dsn, pool_config={"min_size": 2, "max_size": 2}, timeout=0.5
    ) as store:
        await store.setup()
        pool = store._driver.pool
        assert pool is not None
        held = [await pool.getconn(), await pool.getconn()]
        try:
            before = pool.get_stats().get("requests_num", 0)
            results = await asyncio.gather(
                *(store.aget(("p",), f"k{i}") for i in range(12)), return_exceptions=True
            )
            requests = pool.get_stats().get("requests_num", 0) - before
        finally:
            for conn in held:
                await pool.putconn(conn)
        assert all(isinstance(r, ConnectionTimeoutError) for r in results), results
        # two calls in flight, then one merged batch of the other ten (each asks the pool once,
        # and again after the driver's wait for a lost connection at most)
        assert requests <= 2 * 3, requests
        assert await store.aget(("p",), "k0") is None
