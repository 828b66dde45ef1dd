"""The store's writes on the wire: a batch that needs no embedding is one statement (one round
trip), a changed text two; what is embedded (only new or changed texts), the retry when another
writer changes an item meanwhile, and the TTL sweep's batches and one-at-a-time rule."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest
from helpers import Embedder as BagOfWords
from helpers import traced
from langgraph.store.base import PutOp
from pooler import Bouncer

import langgraph_pg_saver.store.store as sync_store
import langgraph_pg_saver.store.store_async as async_store
from langgraph_pg_saver import AsyncPostgresStore, PostgresStore
from langgraph_pg_saver.db import policy
from langgraph_pg_saver.store.rules import text_hash

#: queries.sql _lock_class: the first key of the advisory locks, the sweep lock's too
LOCK_CLASS = 1818718323
DIMS = 8


class Embedder(BagOfWords):
    """A bag of hashed words, recording the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(DIMS)


@pytest.fixture(autouse=True)
def _no_statistics_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables here are tiny: no statistics question within a count (test_roundtrips.py)."""
    monkeypatch.setattr(policy, "STATS_RECHECK", 3600.0)


def _vectors(dsn: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT key, field, text_hash FROM pgsaver_store_vectors ORDER BY key, field"
        ).fetchall()
    return [(str(k), str(f), str(h)) for k, f, h in rows]


def _wait_for_lock_wait(dsn: str, timeout: float = 10.0) -> None:
    """Until some session waits for a lock (the writer or sweeper under test)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.02)
    raise AssertionError("no session waited for a lock")


@pytest.fixture
def indexed(vector_dsn: str) -> Iterator[tuple[PostgresStore, Embedder, psycopg.Connection[Any]]]:
    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["title", "body"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as setup:  # type: ignore[arg-type]
        setup.setup()
    with psycopg.connect(vector_dsn) as conn:
        store = PostgresStore(conn, index=index)  # type: ignore[arg-type]
        store.get(("warm",), "up")  # the connection's first use asks one more question, once
        yield store, embed, conn


def test_writes_that_need_no_embedding_take_one_round_trip(
    indexed: tuple[PostgresStore, Embedder, psycopg.Connection[Any]], vector_dsn: str
) -> None:
    store, embed, conn = indexed
    counts: dict[str, int] = {}
    with traced(conn.pgconn) as t:
        store.put(("d",), "a", {"title": "pizza", "body": "cheese"})
    counts["new item"] = t.round_trips
    assert sorted(embed.texts) == ["cheese", "pizza"]
    embed.texts.clear()
    with traced(conn.pgconn) as t:
        store.put(("d",), "a", {"title": "pizza", "body": "cheese", "n": 2})
    counts["unchanged text"] = t.round_trips
    assert embed.texts == []
    with traced(conn.pgconn) as t:
        store.put(("d",), "a", {"title": "pizza", "body": "mozzarella"})
    counts["one text changed"] = t.round_trips
    assert embed.texts == ["mozzarella"]
    embed.texts.clear()
    store.put(("d",), "b", {"title": "dog", "body": "rex"})
    store.put(("d",), "c", {"title": "cat"})
    embed.texts.clear()
    with traced(conn.pgconn) as t:
        store.put(("d",), "b", {"title": "dog", "body": "rex"}, index=False)
    counts["index=False"] = t.round_trips
    with traced(conn.pgconn) as t:
        store.put(("d",), "n", {"other": 1})
    counts["no indexed text"] = t.round_trips
    with traced(conn.pgconn) as t:
        store.batch(
            [
                PutOp(("d",), "c", None),
                PutOp(("d",), "a", {"title": "pizza", "body": "mozzarella", "n": 3}),
                PutOp(("d",), "m", {"title": "cat"}, index=False),
            ]
        )
    counts["put, delete and index=False in a batch"] = t.round_trips
    with traced(conn.pgconn) as t:
        store.delete(("d",), "n")
    counts["delete"] = t.round_trips
    assert embed.texts == []
    print(counts)
    assert counts == {
        "new item": 2,
        "unchanged text": 1,
        "one text changed": 2,
        "index=False": 1,
        "no indexed text": 1,
        "put, delete and index=False in a batch": 1,
        "delete": 1,
    }
    # index=False after indexed puts takes the item's vectors away; the delete's go too
    assert _vectors(vector_dsn) == [
        ("a", "body", text_hash("mozzarella")),
        ("a", "title", text_hash("pizza")),
    ]
    item = store.get(("d",), "a")
    assert item is not None
    assert item.value == {"title": "pizza", "body": "mozzarella", "n": 3}
    assert store.get(("d",), "b") is not None
    assert store.get(("d",), "c") is None
    assert store.search(("d",), query="mozzarella", limit=1)[0].key == "a"


def test_a_batch_without_an_index_is_one_round_trip(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        store = PostgresStore(conn)
        store.put(("p",), "gone", {"v": 0})
        with traced(conn.pgconn) as t:
            store.batch([PutOp(("p",), "gone", None), PutOp(("p",), "new", {"v": 1})])
        assert t.round_trips == 1
        assert store.get(("p",), "gone") is None
        item = store.get(("p",), "new")
        assert item is not None
        assert item.value == {"v": 1}


async def test_async_writes_take_the_same_round_trips(vector_dsn: str) -> None:
    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["title"]}
    async with AsyncPostgresStore.from_conn_string(vector_dsn, index=index) as setup:  # type: ignore[arg-type]
        await setup.setup()
    async with await psycopg.AsyncConnection.connect(vector_dsn) as conn:
        store = AsyncPostgresStore(conn, index=index)  # type: ignore[arg-type]
        await store.aget(("warm",), "up")
        with traced(conn.pgconn) as new:
            await store.aput(("a",), "k", {"title": "pizza"})
        with traced(conn.pgconn) as same:
            await store.aput(("a",), "k", {"title": "pizza", "n": 1})
        with traced(conn.pgconn) as changed:
            await store.aput(("a",), "k", {"title": "pasta"})
        with traced(conn.pgconn) as unindexed:
            await store.aput(("a",), "k", {"title": "pasta"}, index=False)
        assert [new.round_trips, same.round_trips, changed.round_trips] == [2, 1, 2]
        assert unindexed.round_trips == 1
        assert embed.texts == ["pizza", "pasta"]
        assert _vectors(vector_dsn) == []


@pytest.mark.parametrize("tries", [None, 0])
def test_an_item_changed_between_the_statements_snapshot_and_its_lock(
    vector_dsn: str, monkeypatch: pytest.MonkeyPatch, tries: int | None
) -> None:
    """Another writer's transaction changes the item's text, holding its lock while this put's
    statement starts, then commits: the statement's snapshot has the old text (the same as this
    put's), so it must notice the change and try again, embedding the text once more.
    ``tries=0``: the transaction that locks the items first (the fallback) does the same."""
    if tries is not None:
        monkeypatch.setattr(sync_store, "WRITE_TRIES", tries)
    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["title"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("r",), "k", {"title": "pizza"})
        with psycopg.connect(vector_dsn) as other_conn:
            other = PostgresStore(other_conn, index=index)  # type: ignore[arg-type]
            errors: list[BaseException] = []

            def put() -> None:
                try:
                    store.put(("r",), "k", {"title": "pizza", "n": 2})
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)

            with other_conn.transaction():
                other.put(("r",), "k", {"title": "dog"})
                writer = threading.Thread(target=put)
                writer.start()
                _wait_for_lock_wait(vector_dsn)
            writer.join(30)
            assert not errors
        item = store.get(("r",), "k")
        assert item is not None
        assert item.value == {"title": "pizza", "n": 2}
        assert _vectors(vector_dsn) == [("k", "title", text_hash("pizza"))]
        found = store.search(("r",), query="pizza", limit=1)
        assert found[0].score == pytest.approx(1.0)


async def test_async_a_text_changed_between_the_two_statements(vector_dsn: str) -> None:
    """Another writer changes a field this put takes as unchanged while this put embeds its
    changed field: the second statement finds it and that field is embedded too."""
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["title", "body"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as other:  # type: ignore[arg-type]
        other.setup()
        other.put(("r",), "k", {"title": "pizza", "body": "one"})

        class Racing(Embedder):
            def __call__(self, texts: Sequence[str]) -> list[list[float]]:
                if texts == ["two"]:
                    other.put(("r",), "k", {"title": "dog", "body": "one"})
                return super().__call__(texts)

        racing = Racing()
        async with AsyncPostgresStore.from_conn_string(
            vector_dsn,
            index={**index, "embed": racing},  # type: ignore[arg-type]
        ) as store:
            await store.aput(("r",), "k", {"title": "pizza", "body": "two"})
            assert racing.texts == ["two", "pizza"]
            item = await store.aget(("r",), "k")
            assert item is not None
            assert item.value == {"title": "pizza", "body": "two"}
        assert _vectors(vector_dsn) == [
            ("k", "body", text_hash("two")),
            ("k", "title", text_hash("pizza")),
        ]


def test_a_new_key_another_writer_inserts_meanwhile(vector_dsn: str) -> None:
    """Two writers put the same new key at once, one with index=False: whichever value stays,
    its vectors are its own (here the other's, committed while this put waited: this put is
    taken as the earlier one)."""
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["title"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        with psycopg.connect(vector_dsn) as other_conn:
            other = PostgresStore(other_conn, index=index)  # type: ignore[arg-type]
            with other_conn.transaction():
                other.put(("n",), "k", {"title": "dog"})
                writer = threading.Thread(
                    target=lambda: store.put(("n",), "k", {"title": "cat"}, index=False)
                )
                writer.start()
                _wait_for_lock_wait(vector_dsn)
            writer.join(30)
        item = store.get(("n",), "k")
        assert item is not None
        stored = _vectors(vector_dsn)
        if item.value == {"title": "dog"}:
            assert stored == [("k", "title", text_hash("dog"))]
        else:
            assert item.value == {"title": "cat"}
            assert stored == []


def test_a_wrong_embedding_count_writes_nothing(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": lambda texts: [], "fields": ["title"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        with pytest.raises(Exception, match="returned 0 embeddings for 1 texts"):
            store.batch([PutOp(("w",), "a", {"v": 1}), PutOp(("w",), "b", {"title": "x"})])
        assert store.get(("w",), "a") is None


# ---------------------------------------------------------------------------- the TTL sweep


def _expire(store: Any, n: int, ns: tuple[str, ...] = ("s",)) -> None:
    store.batch([PutOp(ns, f"k{i}", {"i": i}, ttl=0.0005) for i in range(n)])
    time.sleep(0.1)


def test_a_sweep_larger_than_a_batch(db_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_store, "SWEEP_BATCH", 10)
    with psycopg.connect(db_dsn) as conn:
        store = PostgresStore(conn)
        store.put(("s",), "kept", {"v": 1}, ttl=60)
        _expire(store, 35)
        with traced(conn.pgconn) as t:
            assert store.sweep_ttl() == 35
        assert t.round_trips == 4  # 10, 10, 10, 5: a transaction each
        assert store.sweep_ttl() == 0
        with psycopg.connect(db_dsn) as check:
            assert check.execute("SELECT key FROM pgsaver_store").fetchall() == [("kept",)]


@pytest.mark.parametrize("name", ["store_sweep", "store_sweep_skip_locked"])
def test_the_sweep_deletes_by_row_address_under_stale_statistics(db_dsn: str, name: str) -> None:
    """Statistics taken before the items expired (the expires_at index finds one row): the sweep's
    delete (its fast path's and its fallback's) still reads its rows by their addresses (a TID
    scan), not by an index scan of the expired rows each compared with every address (quadratic:
    4x the sweep's time at 10,000)."""
    with PostgresStore.from_conn_string(db_dsn) as store:
        store.setup()
        store.batch([PutOp(("s",), f"k{i}", {"i": i}, ttl=60) for i in range(3_000)])
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute("ALTER TABLE pgsaver_store SET (autovacuum_enabled = false)")
            admin.execute("ANALYZE pgsaver_store")  # nothing expired yet
            admin.execute("UPDATE pgsaver_store SET expires_at = now() - interval '1 minute'")
            statement = store._q[name].decode()
            params = {"limit": 10_000, "schema": "public", "after": None, "lock_timeout": "50ms"}
            plan = "\n".join(str(r[0]) for r in admin.execute("EXPLAIN " + statement, params))
        delete = plan[plan.index("Delete on") :]
        assert "Tid Scan on pgsaver_store" in delete, plan
        assert store.sweep_ttl() == 3_000


def test_two_sweepers_take_turns(db_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """While another sweep holds the sweep lock (a session holding it in its transaction), a sweep
    does nothing; once it is free, the sweep deletes everything expired."""
    monkeypatch.setattr(sync_store, "SWEEP_BATCH", 10)
    with (
        PostgresStore.from_conn_string(db_dsn) as store,
        psycopg.connect(db_dsn) as holder,
    ):
        _expire(store, 25)
        with holder.transaction():
            row = holder.execute(
                "SELECT pg_try_advisory_xact_lock(%s, hashtext('store-sweep:' || 'public'))",
                (LOCK_CLASS,),
            ).fetchone()
            assert row == (True,)
            assert store.sweep_ttl() == 0
        assert store.sweep_ttl() == 25
        assert store.sweep_ttl() == 0


def test_a_sweep_skips_a_row_another_transaction_holds(db_dsn: str) -> None:
    """An expired row locked by another transaction is left for the next sweep: the sweep does
    not wait behind the writer (nor hold the rest of its batch's rows meanwhile)."""
    with (
        PostgresStore.from_conn_string(db_dsn) as store,
        psycopg.connect(db_dsn) as holder,
    ):
        _expire(store, 5)
        with holder.transaction():
            holder.execute("SET LOCAL lock_timeout = '20s'")
            holder.execute("SELECT 1 FROM pgsaver_store WHERE key = 'k3' FOR UPDATE")
            done: list[int] = []
            sweeper = threading.Thread(target=lambda: done.append(store.sweep_ttl()))
            sweeper.start()
            sweeper.join(20)
            assert done == [4]  # it returned while the row was still held
        assert store.sweep_ttl() == 1


def test_concurrent_sweeps_delete_each_item_once(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_store, "SWEEP_BATCH", 7)
    with (
        PostgresStore.from_conn_string(db_dsn) as a,
        PostgresStore.from_conn_string(db_dsn) as b,
    ):
        _expire(a, 100)
        counts: list[int] = []
        barrier = threading.Barrier(2)

        def sweep(store: PostgresStore) -> None:
            barrier.wait()
            counts.append(store.sweep_ttl())

        threads = [threading.Thread(target=sweep, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(counts) == 2
        assert sum(counts) == 100
        assert a.sweep_ttl() == 0


def test_a_sweep_leaves_an_item_being_revived(db_dsn: str) -> None:
    """An expired item that another writer is putting again (a new TTL, not committed yet) when
    the sweep runs is not deleted."""
    with (
        PostgresStore.from_conn_string(db_dsn) as store,
        psycopg.connect(db_dsn) as other_conn,
    ):
        _expire(store, 3)
        other = PostgresStore(other_conn)
        with other_conn.transaction():
            other.put(("s",), "k1", {"i": "again"}, ttl=60)
            assert store.sweep_ttl() == 2
        item = store.get(("s",), "k1")
        assert item is not None
        assert item.value == {"i": "again"}
        assert store.sweep_ttl() == 0


FAST = "set_config('lock_timeout'"  # in store_sweep only
FALLBACK = "FOR UPDATE OF e SKIP LOCKED"  # in store_sweep_skip_locked only


def _statements(trace: Any) -> list[str]:
    """Which sweep statement each statement a trace parsed was, in order: "fast", "fallback"."""
    text = "\n".join(trace.messages)
    parses = [part for part in text.split("\tParse\t")[1:]]
    return ["fast" if FAST in p else "fallback" if FALLBACK in p else p[:40] for p in parses]


def test_a_sweep_takes_no_row_locks_when_nothing_is_held(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path: one statement per batch, which deletes without locking its rows first (no
    row-lock WAL record: each row is written once), and leaves lock_timeout as it was."""
    monkeypatch.setattr(sync_store, "SWEEP_BATCH", 10)
    with psycopg.connect(db_dsn) as conn:
        store = PostgresStore(conn)
        _expire(store, 25)
        conn.autocommit = True
        conn.execute("SET lock_timeout = '7s'")
        with traced(conn.pgconn) as t:
            assert store.sweep_ttl() == 25
        assert t.round_trips == 3  # 10, 10, 5: one statement each
        assert _statements(t) == ["fast"] * 3
        assert conn.execute("SHOW lock_timeout").fetchone() == ("7s",)
        # and its plan locks no row before deleting it (the fallback's does)
        params = {"limit": 10, "schema": "public", "after": None, "lock_timeout": "50ms"}
        for name, locks in (("store_sweep", False), ("store_sweep_skip_locked", True)):
            plan = conn.execute("EXPLAIN " + store._q[name].decode(), params).fetchall()
            assert any("LockRows" in str(r[0]) for r in plan) is locks, plan


def test_a_sweep_waits_briefly_for_a_held_row_then_skips_it(db_dsn: str) -> None:
    """A row another transaction holds longer than the fast path's lock_timeout: the batch falls
    back to skipping it (one more statement, no error, no retry), deletes the others, and leaves
    lock_timeout as it was on the connection."""
    with (
        psycopg.connect(db_dsn) as conn,
        psycopg.connect(db_dsn) as holder,
    ):
        store = PostgresStore(conn)
        _expire(store, 5)
        conn.autocommit = True
        with holder.transaction():
            holder.execute("SELECT 1 FROM pgsaver_store WHERE key = 'k3' FOR UPDATE")
            t0 = time.monotonic()
            with traced(conn.pgconn) as t:
                assert store.sweep_ttl() == 4
            assert time.monotonic() - t0 < 5
            assert _statements(t) == ["fast", "fallback"]
            assert conn.execute("SHOW lock_timeout").fetchone() == ("0",)
            assert conn.execute("SELECT key FROM pgsaver_store").fetchall() == [("k3",)]
        assert store.sweep_ttl() == 1
        assert conn.execute("SELECT count(*) FROM pgsaver_store").fetchone() == (0,)


def test_the_fast_path_leaves_an_item_revived_while_it_waits(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer puts an expired item again (a new TTL) and commits while the fast path waits for
    its row: Postgres hands the delete the item as it is then, whose expiry is checked again, so it
    stays, and the batch is not rolled back (no fallback)."""
    monkeypatch.setattr(sync_store, "SWEEP_LOCK_TIMEOUT", "20s")
    with (
        PostgresStore.from_conn_string(db_dsn) as store,
        psycopg.connect(db_dsn) as other_conn,
    ):
        _expire(store, 3)
        other = PostgresStore(other_conn)
        done: list[int] = []
        with other_conn.transaction():
            other.put(("s",), "k1", {"i": "again"}, ttl=60)
            sweeper = threading.Thread(target=lambda: done.append(store.sweep_ttl()))
            sweeper.start()
            _wait_for_lock_wait(db_dsn)  # the sweep waits for k1's row
        sweeper.join(20)
        assert done == [2]
        item = store.get(("s",), "k1")
        assert item is not None
        assert item.value == {"i": "again"}
        assert store.sweep_ttl() == 0


def test_a_sweep_in_the_callers_transaction_skips_held_rows_at_once(db_dsn: str) -> None:
    """Inside a transaction of the caller's the sweep sends only the statement that skips held
    rows: a lock_timeout error would abort the caller's transaction, and the setting would last
    until its end."""
    with (
        psycopg.connect(db_dsn) as conn,
        psycopg.connect(db_dsn) as holder,
    ):
        store = PostgresStore(conn)
        _expire(store, 3)
        with holder.transaction():
            holder.execute("SELECT 1 FROM pgsaver_store WHERE key = 'k0' FOR UPDATE")
            with conn.transaction():
                conn.execute("SELECT 1")
                with traced(conn.pgconn) as t:
                    assert store.sweep_ttl() == 2
                assert _statements(t) == ["fallback"]
                assert conn.execute("SHOW lock_timeout").fetchone() == ("0",)


def test_the_sweeps_lock_timeout_ends_with_its_statement_behind_a_pooler(
    bouncer: Bouncer, db_dsn: str
) -> None:
    """Behind PgBouncer in transaction mode (two server sessions shared by every client), after a
    sweep that took the fast path and one that fell back, neither server session keeps the
    sweep's lock_timeout."""
    dsn = bouncer.dsn(db_dsn)
    with (
        PostgresStore.from_conn_string(dsn) as store,
        psycopg.connect(db_dsn) as holder,
    ):
        _expire(store, 5)
        assert store.sweep_ttl() == 5
        _expire(store, 5)
        with holder.transaction():
            holder.execute("SELECT 1 FROM pgsaver_store WHERE key = 'k2' FOR UPDATE")
            assert store.sweep_ttl() == 4
        assert store.sweep_ttl() == 1
        with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
            # each in a transaction: together they hold both server sessions
            seen = {c.execute("SELECT pg_backend_pid()").fetchone() for c in (a, b)}
            assert len(seen) == 2
            for c in (a, b):
                assert c.execute("SHOW lock_timeout").fetchone() == ("0",)


async def test_async_sweep_in_batches(db_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_store, "SWEEP_BATCH", 4)
    async with AsyncPostgresStore.from_conn_string(db_dsn) as store:
        await store.abatch([PutOp(("s",), f"k{i}", {"i": i}, ttl=0.0005) for i in range(9)])
        await asyncio.sleep(0.1)
        assert await store.sweep_ttl() == 9
        assert await store.sweep_ttl() == 0


async def test_async_sweep_skips_a_held_row_after_its_lock_timeout(db_dsn: str) -> None:
    async with (
        AsyncPostgresStore.from_conn_string(db_dsn) as store,
        await psycopg.AsyncConnection.connect(db_dsn) as holder,
    ):
        await store.abatch([PutOp(("s",), f"k{i}", {"i": i}, ttl=0.0005) for i in range(5)])
        await asyncio.sleep(0.1)
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM pgsaver_store WHERE key = 'k1' FOR UPDATE")
            assert await asyncio.wait_for(store.sweep_ttl(), 10) == 4
        assert await store.sweep_ttl() == 1
