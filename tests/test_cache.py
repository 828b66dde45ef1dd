"""PostgresCache and AsyncPostgresCache (langgraph_pg_saver/cache.py) on a real Postgres: LangGraph's
node cache on real graphs (a cached node is not run again within its TTL, also from another
process; it is after expiry or clear), the semantics of InMemoryCache where they overlap, expiry,
the sweep one worker at a time, encryption, and bad input."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cache_worker import graph
from langgraph.cache.memory import InMemoryCache
from langgraph.graph import START, StateGraph
from langgraph.types import CachePolicy
from typing_extensions import TypedDict

from langgraph_pg_saver import (
    AsyncPostgresCache,
    DecryptionError,
    InvalidInputError,
    KeyringSerializer,
    PostgresCache,
    PostgresSaver,
)
from langgraph_pg_saver.db.sql import raw_queries

#: the worker, imported as a module (LangGraph names a cached node by its function's module and
#: name: run as __main__ it would be another node)
WORKER = [
    sys.executable,
    "-c",
    f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    "import cache_worker; cache_worker.main()",
]


@pytest.fixture
def cache(db_dsn: str) -> Any:
    with PostgresCache.from_conn_string(db_dsn) as c:
        c.setup()
        yield c


def runs(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [x for (x,) in conn.execute("SELECT x FROM cache_runs ORDER BY id")]


@pytest.fixture
def counted(db_dsn: str) -> str:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS cache_runs (id serial PRIMARY KEY, x int)")
        conn.execute("TRUNCATE cache_runs")
    return db_dsn


def test_the_same_calls_as_in_memory(cache: PostgresCache[Any]) -> None:
    """Each call gives what InMemoryCache gives: missing keys left out, values of any type the
    serde keeps, an overwrite, a TTL of 0 already expired, clear of exactly the namespaces
    named (not those below them), clear of everything; namespaces holding ':' or any text."""
    memory: InMemoryCache[Any] = InMemoryCache()
    a, ab, odd, empty = ("a",), ("a", "b"), ("x:y", "é\u2028\\", "", "\ud800"), ()
    steps: list[tuple[str, Any]] = [
        ("get", [(a, "k"), (ab, "k")]),
        (
            "set",
            {
                (a, "k"): ({"v": [1, 2.5, None, "s"]}, None),
                (ab, "k"): ((1, 2), 60),
                (odd, "k:1"): (b"\x00bytes", None),
                (empty, ""): ("empty", 60),
                (a, "gone"): ("at once", 0),
            },
        ),
        ("get", [(a, "k"), (ab, "k"), (odd, "k:1"), (empty, ""), (a, "gone"), (a, "nope")]),
        ("set", {(a, "k"): ("replaced", 30)}),
        ("get", [(a, "k"), (ab, "k")]),
        ("clear", ()),
        ("clear", []),
        ("get", [(a, "k"), (ab, "k")]),
        ("clear", [a]),
        ("get", [(a, "k"), (ab, "k"), (odd, "k:1"), (empty, "")]),
        ("clear", None),
        ("get", [(ab, "k"), (odd, "k:1"), (empty, "")]),
    ]
    for name, arg in steps:
        want = getattr(memory, name)(arg)
        got = getattr(cache, name)(arg)
        assert got == want, (name, arg)


def test_a_cached_node_runs_once_within_its_ttl_across_processes(counted: str) -> None:
    """A graph compiled with the cache and a node with a CachePolicy: the node runs for the
    first invoke of an input, not for the next in this process nor in another process (the
    entry is in Postgres), again for another input, and again after clear()."""
    dsn = counted
    with PostgresCache.from_conn_string(dsn) as cache:
        cache.setup()
        app = graph(dsn, cache, 300)
        assert app.invoke({"x": 1, "y": 0}) == {"x": 1, "y": 10}
        assert app.invoke({"x": 1, "y": 0}) == {"x": 1, "y": 10}
        assert runs(dsn) == [1]
        other = subprocess.run(
            [*WORKER, dsn, "1", "300"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert json.loads(other.stdout) == {"x": 1, "y": 10}
        assert runs(dsn) == [1]  # the other process found the entry
        subprocess.run([*WORKER, dsn, "2", "300"], check=True, capture_output=True)
        assert runs(dsn) == [1, 2]
        assert app.invoke({"x": 2, "y": 0}) == {"x": 2, "y": 20}
        assert runs(dsn) == [1, 2]  # this process finds the other's entry
        cache.clear()
        app.invoke({"x": 1, "y": 0})
        assert runs(dsn) == [1, 2, 1]


def test_a_cached_node_runs_again_after_its_ttl(counted: str) -> None:
    dsn = counted
    with PostgresCache.from_conn_string(dsn) as cache:
        cache.setup()
        app = graph(dsn, cache, 1)
        app.invoke({"x": 3, "y": 0})
        app.invoke({"x": 3, "y": 0})
        assert runs(dsn) == [3]
        time.sleep(1.3)
        app.invoke({"x": 3, "y": 0})
        assert runs(dsn) == [3, 3]


def test_async_cache_on_a_graph_and_from_threads(counted: str) -> None:
    """AsyncPostgresCache: ainvoke runs the node once per input; the sync methods work from
    another thread (run on the cache's loop) and refuse the loop's own thread."""
    dsn = counted

    class State(TypedDict):
        x: int
        y: int

    async def slow(state: State) -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute("INSERT INTO cache_runs (x) VALUES (%s)", (state["x"],))
        return {"y": state["x"] + 1}

    async def main() -> None:
        async with AsyncPostgresCache.from_conn_string(dsn) as cache:
            await cache.setup()
            g = StateGraph(State)
            g.add_node("slow", slow, cache_policy=CachePolicy(ttl=None))
            g.add_edge(START, "slow")
            app = g.compile(cache=cache)
            assert await app.ainvoke({"x": 5, "y": 0}) == {"x": 5, "y": 6}
            assert await app.ainvoke({"x": 5, "y": 0}) == {"x": 5, "y": 6}
            assert runs(dsn) == [5]
            got: dict[str, Any] = {}

            def from_thread() -> None:
                cache.set({(("t",), "k"): ("v", None)})
                got.update(cache.get([(("t",), "k")]))

            worker = threading.Thread(target=from_thread)
            worker.start()
            await asyncio.get_running_loop().run_in_executor(None, worker.join)
            assert got == {(("t",), "k"): "v"}
            with pytest.raises(asyncio.InvalidStateError):
                cache.get([(("t",), "k")])
            await cache.aclear([("t",)])
            assert await cache.aget([(("t",), "k")]) == {}

    asyncio.run(main())


def test_the_sync_cache_async_methods(cache: PostgresCache[Any]) -> None:
    async def main() -> None:
        await cache.aset({(("n",), "k"): ([1, 2], 60)})
        assert await cache.aget([(("n",), "k")]) == {(("n",), "k"): [1, 2]}
        await cache.aclear()
        assert await cache.aget([(("n",), "k")]) == {}

    asyncio.run(main())


def test_expired_entries_are_never_returned_and_swept_one_worker_at_a_time(
    cache: PostgresCache[Any], db_dsn: str
) -> None:
    cache.set({(("e",), str(i)): (i, 1) for i in range(50)})
    cache.set({(("e",), "keep"): ("kept", None)})
    time.sleep(1.2)
    assert cache.get([(("e",), str(i)) for i in range(50)]) == {}
    lock_class = raw_queries()["_lock_class"].strip().splitlines()[-1]
    # another worker's sweep holds the sweep lock: this one deletes nothing
    with psycopg.connect(db_dsn) as other:
        other.execute(
            f"SELECT pg_advisory_xact_lock({lock_class}, hashtext('cache-sweep:' || 'public'))"
        )
        assert cache.sweep() == 0
    assert cache.sweep() == 50
    with psycopg.connect(db_dsn) as conn:
        left = conn.execute("SELECT key FROM pgsaver_cache").fetchall()
    assert left == [("keep",)]
    assert cache.get([(("e",), "keep")]) == {(("e",), "keep"): "kept"}


def test_encrypted_entries_are_bound_to_their_key(db_dsn: str) -> None:
    serde = KeyringSerializer({"k1": b"c" * 32})
    with PostgresCache.from_conn_string(db_dsn, serde=serde) as cache:
        cache.setup()
        cache.set({(("s",), "a"): ("secret text " * 20, None), (("s",), "b"): ("other", None)})
        assert cache.get([(("s",), "a")]) == {(("s",), "a"): "secret text " * 20}
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            blobs = [bytes(b) for (b,) in conn.execute("SELECT blob FROM pgsaver_cache")]
            assert not any(b"secret" in b for b in blobs)
            conn.execute(
                "UPDATE pgsaver_cache SET blob = (SELECT blob FROM pgsaver_cache WHERE key = 'b')"
                " WHERE key = 'a'"
            )
        with pytest.raises(DecryptionError):
            cache.get([(("s",), "a")])


def test_bad_input_is_refused_and_nothing_written(cache: PostgresCache[Any], db_dsn: str) -> None:
    for bad in (
        {("ns-as-str", "k"): (1, None)},
        {((1, 2), "k"): (1, None)},
        {(("ns",), 5): (1, None)},
        {(("ns",), "k"): (1, "soon")},
        {(("ns",), "k"): (1, float("inf"))},
        {(("ok",), "k"): (1, None), (("ns",), "k"): (lambda: 0, None)},
    ):
        with pytest.raises(InvalidInputError):
            cache.set(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="sequence of namespaces"):
        cache.clear(("a", "b"))  # type: ignore[arg-type]
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgsaver_cache").fetchone() == (0,)


def test_the_savers_setup_makes_the_table_and_the_cache_shares_its_pool(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        cache: PostgresCache[Any] = PostgresCache(saver.conn)
        cache.set({(("p",), "k"): ("v", None)})
        assert cache.get([(("p",), "k")]) == {(("p",), "k"): "v"}


def test_entries_a_strict_keyring_cannot_open_are_misses(db_dsn: str) -> None:
    """After a key rotation that dropped the old key, or after turning encryption on, an entry
    sealed with a key no longer held, or stored in clear, is a miss (the node runs, and its set
    replaces the entry), not an error that fails every run until the cache is cleared; an entry
    changed in the table is still an error."""
    k1, k2 = {"k1": b"1" * 32}, {"k2": b"2" * 32}
    with PostgresCache.from_conn_string(db_dsn) as plain:
        plain.setup()
        plain.set({(("c",), "clear"): ("in clear", None)})
    with PostgresCache.from_conn_string(db_dsn, serde=KeyringSerializer(k1)) as old:
        old.set({(("c",), "old key"): ("sealed with k1", None)})
    with PostgresCache.from_conn_string(db_dsn, serde=KeyringSerializer(k2)) as new:
        asked = [(("c",), "clear"), (("c",), "old key")]
        assert new.get(asked) == {}
        new.set({(("c",), "old key"): ("sealed with k2", None)})
        assert new.get(asked) == {(("c",), "old key"): "sealed with k2"}
