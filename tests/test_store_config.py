"""The store takes the config and values the official store (``langgraph.store.postgres``) takes:
``fields`` as one path, every ANN option it reads (and the search options), ``ttl=0``, an int
beyond float range under a range filter, its ``deserializer`` rule, ``store.conn``, and a TTL
sweeper that a store without a TTL config does not start."""

from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
import pytest
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from test_store_vectors import DIMS, Embedder

from langgraph_pg_saver import AsyncPostgresStore, InvalidInputError, PostgresStore
from langgraph_pg_saver.store import rules

# --------------------------------------------------------------------------- 1. fields


def _fields(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return [
            (k, f)
            for k, f in conn.execute("SELECT key, field FROM pgsaver_store_vectors ORDER BY 1, 2")
        ]


def test_fields_given_as_one_path_is_that_path(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": "text"}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("u",), "pizza", {"text": "I like pizza", "other": "dogs dogs dogs"})
        store.put(("u",), "dog", {"text": "my dog Rex", "other": "pizza pizza"})
        best = store.search(("u",), query="pizza", limit=1)
        assert [i.key for i in best] == ["pizza"]
    # only the "text" field was embedded, as with fields=["text"]
    assert _fields(vector_dsn) == [("dog", "text"), ("pizza", "text")]


async def test_fields_given_as_one_path_async(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": "text"}
    async with AsyncPostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        await store.setup()
        await store.aput(("u",), "dog", {"text": "my dog Rex", "other": "pizza pizza"})
        await store.aput(("u",), "pizza", {"text": "I like pizza", "other": "dogs"})
        assert [i.key for i in await store.asearch(("u",), query="dog", limit=1)] == ["dog"]
    assert _fields(vector_dsn) == [("dog", "text"), ("pizza", "text")]


# --------------------------------------------------------------------------- 2. ANN options


def _index_options(dsn: str) -> dict[str, list[str]]:
    with psycopg.connect(dsn) as conn:
        return {
            am: list(opts or [])
            for am, opts in conn.execute(
                "SELECT am.amname, c.reloptions FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam "
                "WHERE i.indrelid = 'pgsaver_store_vectors'::regclass AND am.amname <> 'btree'"
            )
        }


@pytest.mark.parametrize(
    ("ann", "built"),
    [
        ({"kind": "ivfflat", "lists": 4}, {"ivfflat": ["lists=4"]}),
        ({"kind": "ivfflat", "nlist": 3, "probes": 2}, {"ivfflat": ["lists=3"]}),
        (
            {"kind": "hnsw", "m": 8, "ef_construction": 32, "ef_search": 80},
            {"hnsw": ["ef_construction=32", "m=8"]},
        ),
        # what the official store reads from them: int() of the value, 0 for the default
        ({"kind": "hnsw", "m": "12", "ef_construction": 0}, {"hnsw": ["m=12"]}),
        # options of another kind, and names pgvector does not know: ignored, as by the official
        ({"kind": "hnsw", "lists": 4, "ef_constrution": 9}, {"hnsw": []}),
        ({"kind": "flat", "lists": 4}, {}),
    ],
)
def test_ann_options_the_official_store_takes(
    vector_dsn: str, ann: dict[str, Any], built: dict[str, list[str]]
) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"], "ann_index_config": ann}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        for i in range(20):
            store.put(("u",), f"k{i}", {"text": f"word{i} pizza"})
        found = store.search(("u",), query="word3 pizza", limit=20)
        assert sorted(i.key for i in found) == sorted(f"k{i}" for i in range(20))
    assert {am: sorted(opts) for am, opts in _index_options(vector_dsn).items()} == built


async def test_ann_options_async(vector_dsn: str) -> None:
    ann = {"kind": "ivfflat", "lists": 2, "probes": 2}
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"], "ann_index_config": ann}
    async with AsyncPostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        await store.setup()
        assert store.index_spec is not None
        assert dict(store.index_spec.search) == {"probes": 2}
        await store.aput(("u",), "k", {"text": "pizza"})
        assert [i.key for i in await store.asearch(("u",), query="pizza")] == ["k"]
    assert _index_options(vector_dsn) == {"ivfflat": ["lists=2"]}


def test_search_options_are_kept_on_the_index_spec(caplog: pytest.LogCaptureFixture) -> None:
    base = {"dims": DIMS, "embed": Embedder()}
    spec = rules.index_spec(
        {**base, "ann_index_config": {"kind": "hnsw", "ef_search": 100, "probes": "3"}}
    )
    assert dict(spec.search) == {"ef_search": 100, "probes": 3}
    assert spec.ann == {}
    assert spec.iterative_scan == "relaxed_order"  # the default: the nearest, whole
    for scan in ("off", "strict_order", "relaxed_order"):
        given = {"kind": "hnsw", "iterative_scan": scan}
        assert rules.index_spec({**base, "ann_index_config": given}).iterative_scan == scan
    with caplog.at_level("WARNING", logger="langgraph_pg_saver"):
        spec = rules.index_spec({**base, "ann_index_config": {"kind": "ivfflat", "m": 16}})
    assert spec.ann == {}
    assert not spec.search
    assert any("'m' is not an option of kind 'ivfflat'" in r.getMessage() for r in caplog.records)
    for bad, words in (
        ({"kind": "hnsw", "m": "many"}, "m must be an int"),
        ({"kind": "hnsw", "ef_search": 5000}, "ef_search must be at most 1000"),
        ({"kind": "ivfflat", "lists": 4, "nlist": 5}, "lists twice"),
        ({"kind": "lsh"}, "kind"),
        ({"kind": "hnsw", "iterative_scan": "strict"}, "iterative_scan must be one of"),
        ({"kind": "hnsw", "iterative_scan": False}, "iterative_scan must be one of"),
    ):
        with pytest.raises(InvalidInputError, match=words):
            rules.index_spec({**base, "ann_index_config": bad})


# --------------------------------------------------------------------------- 3. ttl=0


def _rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        (n,) = conn.execute("SELECT count(*) FROM pgsaver_store").fetchone() or (0,)
        return int(n)


def test_a_ttl_of_zero_expires_the_item_at_once(db_dsn: str) -> None:
    with PostgresStore.from_conn_string(db_dsn) as store:
        store.put(("t",), "now", {"v": 1}, ttl=0)
        store.put(("t",), "kept", {"v": 2}, ttl=60)
        # as LangGraph's contract has it: expired, returned until a sweep deletes it
        item = store.get(("t",), "now")
        assert item is not None
        assert item.value == {"v": 1}
        assert store.sweep_ttl() == 1
        assert store.get(("t",), "now") is None
        assert store.get(("t",), "kept") is not None
        for bad in (-1, float("inf"), True, "soon"):
            with pytest.raises(InvalidInputError, match="ttl must be a number of minutes"):
                store.put(("t",), "bad", {"v": 3}, ttl=bad)  # type: ignore[arg-type]
        assert store.get(("t",), "bad") is None
    with PostgresStore.from_conn_string(
        db_dsn,
        ttl={"default_ttl": 0, "omit_expired": True},  # type: ignore[typeddict-item]
    ) as store:
        store.put(("t",), "default", {"v": 4})
        assert store.get(("t",), "default") is None  # omitted: it expired as it was put
        assert store.search(("t",)) == [store.get(("t",), "kept")]
    assert _rows(db_dsn) == 2
    with PostgresStore.from_conn_string(db_dsn) as store:
        assert store.sweep_ttl() == 1
    assert _rows(db_dsn) == 1


async def test_a_ttl_of_zero_async(db_dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(
        db_dsn,
        ttl={"default_ttl": 0},  # type: ignore[typeddict-item]
    ) as store:
        await store.aput(("t",), "a", {"v": 1})
        await store.aput(("t",), "b", {"v": 2}, ttl="1.5")  # type: ignore[arg-type]
        assert {i.key for i in await store.asearch(("t",))} == {"a", "b"}
        assert await store.sweep_ttl() == 1
        assert [i.key for i in await store.asearch(("t",))] == ["b"]
    async with AsyncPostgresStore.from_conn_string(
        db_dsn,
        ttl={"default_ttl": -5},  # type: ignore[typeddict-item]
    ) as store:
        with pytest.raises(InvalidInputError, match="ttl must be a number of minutes"):
            await store.aput(("t",), "c", {"v": 3})
        assert await store.aget(("t",), "c") is None


# --------------------------------------------------------------------------- 4. big ints

BIG = 10**400


def _check_big(keys: Any) -> None:
    assert keys({"n": {"$gt": 1}}) == {"big", "near", "small", "text"}
    assert keys({"n": {"$lt": BIG}}) == {"near", "small", "text"}
    assert keys({"n": {"$gte": BIG}}) == {"big"}
    assert keys({"n": {"$gt": BIG - 1}}) == {"big"}  # exact: as floats both are out of range
    assert keys({"n": {"$gt": 10**16}}) == {"big", "near"}  # 10**16 + 1 > 10**16, exactly
    assert keys({"n": {"$lte": 1e308}}) == {"near", "small", "text"}
    assert keys({"n": BIG}) == {"big"}
    assert keys({"n": {"$eq": BIG}}) == {"big"}
    assert keys({"n": {"$lt": "1e999"}}) == {"big", "near", "small", "text"}  # "1e999": inf


def _big_values() -> dict[str, dict[str, Any]]:
    return {
        "big": {"n": BIG},
        "near": {"n": 10**16 + 1},
        "small": {"n": 5},
        "text": {"n": "7"},  # a numeric string counts, as in InMemoryStore
        "none": {"m": 1},
    }


def test_an_int_beyond_float_range_does_not_break_a_range_filter(db_dsn: str) -> None:
    with PostgresStore.from_conn_string(db_dsn) as store:
        for key, value in _big_values().items():
            store.put(("b",), key, value)
        assert store.get(("b",), "big").value == {"n": BIG}  # type: ignore[union-attr]
        _check_big(lambda f: {i.key for i in store.search(("b",), filter=f, limit=50)})
    assert rules.matches({"n": {"$gt": 0}}, {"n": BIG})
    assert not rules.matches({"n": {"$lt": 1.5}}, {"n": BIG})


async def test_an_int_beyond_float_range_async(db_dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(db_dsn) as store:
        for key, value in _big_values().items():
            await store.aput(("b",), key, value)
        found: dict[str, set[str]] = {}
        filters = [{"n": {"$gt": 1}}, {"n": {"$lt": BIG}}, {"n": {"$gt": BIG - 1}}]
        for f in filters:
            found[json.dumps(f)] = {i.key for i in await store.asearch(("b",), filter=f)}
    assert list(found.values()) == [
        {"big", "near", "small", "text"},
        {"near", "small", "text"},
        {"big"},
    ]


def test_an_int_beyond_float_range_in_a_semantic_search(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("b",), "big", {"text": "pizza", "n": BIG})
        store.put(("b",), "small", {"text": "pizza pasta", "n": 2})
        found = store.search(("b",), query="pizza", filter={"n": {"$gt": 1}})
        assert {i.key for i in found} == {"big", "small"}
        found = store.search(("b",), query="pizza", filter={"n": {"$lt": 10**300}})
        assert [i.key for i in found] == ["small"]


# --------------------------------------------------------------------------- 5. deserializer


class _RawJsonb(Loader):
    """A connection's own jsonb loader: the raw JSON bytes (binary jsonb: a version byte first)."""

    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)[1:]


class _Deserializer:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, raw: Any) -> dict[str, Any]:
        self.seen.append(raw)
        return {"decoded": json.loads(raw)}


def test_the_deserializer_reads_only_what_the_connection_did_not_load(db_dsn: str) -> None:
    reads = _Deserializer()
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        # psycopg's own loader makes dicts: the official store does not call its deserializer
        store = PostgresStore(conn, deserializer=reads)
        store.put(("d",), "k", {"v": 1})
        store.put(("d",), "exact", {"f": 1e20})  # kept as exact text too: read from it
        assert store.get(("d",), "k").value == {"v": 1}  # type: ignore[union-attr]
        assert store.get(("d",), "exact").value == {"f": 1e20}  # type: ignore[union-attr]
        assert reads.seen == []
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.adapters.register_loader("jsonb", _RawJsonb)
        store = PostgresStore(conn, deserializer=reads)
        item = store.get(("d",), "k")
        assert item is not None
        assert item.value == {"decoded": {"v": 1}}
        assert reads.seen == [b'{"v": 1}']
        assert [i.value for i in store.search(("d",), filter={"v": 1})] == [{"decoded": {"v": 1}}]
        # without a deserializer such a value is read as JSON
        plain = PostgresStore(conn)
        assert plain.get(("d",), "k").value == {"v": 1}  # type: ignore[union-attr]
        assert [i.key for i in plain.search(("d",), filter={"v": 1})] == ["k"]


async def test_the_deserializer_async(db_dsn: str) -> None:
    reads = _Deserializer()
    async with await psycopg.AsyncConnection.connect(db_dsn, autocommit=True) as conn:
        store = AsyncPostgresStore(conn, deserializer=reads)
        await store.aput(("d",), "k", {"v": 1})
        assert (await store.aget(("d",), "k")).value == {"v": 1}  # type: ignore[union-attr]
        assert reads.seen == []
        conn.adapters.register_loader("jsonb", _RawJsonb)
        assert [i.value for i in await store.asearch(("d",))] == [{"decoded": {"v": 1}}]
        assert reads.seen == [b'{"v": 1}']


# --------------------------------------------------------------------------- 6. conn


def test_store_conn_is_the_pool_or_connection(db_dsn: str) -> None:
    with ConnectionPool(db_dsn, open=True) as pool:
        assert PostgresStore(pool).conn is pool
    with psycopg.connect(db_dsn) as conn:
        assert PostgresStore(conn).conn is conn
    with PostgresStore.from_conn_string(db_dsn) as store:
        assert isinstance(store.conn, ConnectionPool)
        with store.conn.connection() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)


async def test_store_conn_async(db_dsn: str) -> None:
    async with AsyncConnectionPool(db_dsn, open=False) as pool:
        assert AsyncPostgresStore(pool).conn is pool
    async with await psycopg.AsyncConnection.connect(db_dsn) as conn:
        assert AsyncPostgresStore(conn).conn is conn
    async with AsyncPostgresStore.from_conn_string(db_dsn) as store:
        assert isinstance(store.conn, AsyncConnectionPool)


# --------------------------------------------------------------------------- 7. the sweeper


def _sweepers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lgps-ttl-sweeper"]


def test_no_sweeper_without_a_ttl_config(db_dsn: str) -> None:
    before = _sweepers()
    with PostgresStore.from_conn_string(db_dsn) as store:
        done = store.start_ttl_sweeper()
        assert done.done()
        assert done.result() is None
        done = store.start_ttl_sweeper(sweep_interval_minutes=1)
        assert done.done()
        assert _sweepers() == before
        assert store.stop_ttl_sweeper(timeout=1)
    # with a TTL config and an interval of 0: the official store's default (5 minutes)
    with PostgresStore.from_conn_string(db_dsn, ttl={"sweep_interval_minutes": 0}) as store:
        running = store.start_ttl_sweeper()
        assert not running.done()
        assert len(_sweepers()) == len(before) + 1
        assert store.stop_ttl_sweeper(timeout=5)
        assert running.done()
        with pytest.raises(InvalidInputError, match="sweep_interval_minutes"):
            store.start_ttl_sweeper(sweep_interval_minutes=-1)
    assert _sweepers() == before


async def test_no_sweeper_without_a_ttl_config_async(db_dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(db_dsn) as store:
        task = await store.start_ttl_sweeper()
        await task
        assert task.done()
        assert task.result() is None
        assert store._sweeper_task is None
        assert await store.stop_ttl_sweeper(timeout=1)
    async with AsyncPostgresStore.from_conn_string(
        db_dsn,
        ttl={"sweep_interval_minutes": 0},  # type: ignore[typeddict-item]
    ) as store:
        task = await store.start_ttl_sweeper()
        assert not task.done()
        assert await store.stop_ttl_sweeper(timeout=5)
        assert task.done()


def test_a_put_index_given_as_a_string_is_refused(vector_dsn: str) -> None:
    # the official store reads "text" as the paths "t", "e", "x", "t": nothing is embedded
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        with pytest.raises(InvalidInputError, match="list of field paths"):
            store.put(("u",), "k", {"text": "pizza"}, index="text")  # type: ignore[arg-type]
        assert store.get(("u",), "k") is None
        store.put(("u",), "k", {"text": "pizza"}, index=["text"])
    assert _fields(vector_dsn) == [("k", "text")]
