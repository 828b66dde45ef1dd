"""Semantic search in one statement (the search function setup() makes): every shape against
InMemoryStore with the same embedding, on both of the function's ways (the exact scan of the
prefix and the ANN index), sync and async; zero vectors; the statement counted on the wire."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph_pg_saver import AsyncPostgresStore, PostgresStore, SchemaError
from langgraph_pg_saver.store import rules
from langgraph_pg_saver.store import store as sync_module
from langgraph_pg_saver.store import store_async as async_module
from tests.helpers import bag_of_words, freeze_empty_statistics, scans_during, traced

DIMS = 32
WORDS = [f"w{i}" for i in range(40)]


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A bag of hashed words; a text without words is the zero vector."""
    return bag_of_words(texts, DIMS)


def items() -> list[tuple[tuple[str, ...], str, dict[str, Any], bool]]:
    """(namespace, key, value, indexed) of 240 items: a large namespace, a small one, one of a
    single item; some without vectors, some whose text is the zero vector."""
    rng = random.Random(7)
    out = []
    for i in range(240):
        ns = ("a", "big") if i < 200 else ("a", "small") if i < 236 else ("b",)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        value: dict[str, Any] = {
            "text": "" if i % 37 == 5 else words,
            "title": " ".join(rng.choice(WORDS) for _ in range(2)),
            "kind": "rare" if i % 50 == 0 else ("food", "pet", "work")[i % 3],
            "n": i,
        }
        out.append((ns, f"k{i:03d}", value, i % 23 != 4))
    return out


QUERIES = ["w1 w2 w3", "w10 w11 w10"]
PREFIXES: list[tuple[str, ...]] = [(), ("a",), ("a", "big"), ("a", "small"), ("b",)]
FILTERS: list[dict[str, Any] | None] = [
    None,
    {"kind": "food"},
    {"kind": "rare"},  # 1 in 50
    {"kind": "pet", "n": {"$gt": 100}},  # lossy: its comparison is checked in Python
    {"n": {"$lt": 30}},  # lossy, no prefilter at all
]
PAGES = [{"limit": 10}, {"limit": 3, "offset": 4}, {"limit": 50}]


def load(store: Any) -> None:
    ops = [PutOp(ns, key, value, index=None if on else False) for ns, key, value, on in items()]
    store.batch(ops)


def _r(score: float | None) -> float | None:
    return None if score is None else round(score, 6)


def check(ours: list[Any], theirs: list[Any], scores: dict[str, float | None]) -> None:
    """The same scores in the same order, each item with its own score; the same items, but
    among equal scores in any order (InMemoryStore keeps the order it holds them in, ours is by
    key), so at the first and the last score (an offset or a limit may cut such a group) any
    of the items that have it."""
    assert [_r(i.score) for i in ours] == [_r(i.score) for i in theirs]
    for item in ours:
        assert item.score is None or _r(item.score) == _r(scores[item.key]), item.key
    if theirs:
        edges = {_r(theirs[0].score), _r(theirs[-1].score)}
        assert {i.key for i in ours if _r(i.score) not in edges} == {
            i.key for i in theirs if _r(i.score) not in edges
        }
    assert len({(i.namespace, i.key) for i in ours}) == len(ours)


@pytest.fixture(params=["default", "index", "exact"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The function's choice as the store makes it, or forced to the ANN index (no prefix is
    small enough, no filter sparse enough) or to the exact scan."""
    for module in (sync_module, async_module):
        if request.param == "index":
            monkeypatch.setattr(module, "PROBE_ITEMS", 1)
            monkeypatch.setattr(module, "ANN_TUPLES", 0)
        elif request.param == "exact":
            monkeypatch.setattr(module, "PROBE_ITEMS", 1)
            monkeypatch.setattr(module, "ANN_TUPLES", 10**6)
    return request.param


def memory_store(fields: list[str]) -> InMemoryStore:
    memory = InMemoryStore(index={"dims": DIMS, "embed": embed, "fields": fields})  # type: ignore[arg-type]
    for ns, key, value, on in items():  # one at a time: a batch repeating a text trips it up
        memory.put(ns, key, value, index=None if on else False)
    return memory


@pytest.mark.parametrize("fields", [["text"], ["text", "title"]])
def test_every_shape_as_in_memory_store(vector_dsn: str, way: str, fields: list[str]) -> None:
    memory = memory_store(fields)
    index = {"dims": DIMS, "embed": embed, "fields": fields}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        load(store)
        for query in QUERIES:
            for prefix in PREFIXES:
                scores = {i.key: i.score for i in memory.search(prefix, query=query, limit=1000)}
                for flt in FILTERS:
                    for page in PAGES:
                        ours = store.search(prefix, query=query, filter=flt, **page)
                        theirs = memory.search(prefix, query=query, filter=flt, **page)
                        check(ours, theirs, scores)


async def test_async_shapes_as_in_memory_store(vector_dsn: str, way: str) -> None:
    memory = memory_store(["text"])
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    async with AsyncPostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        await store.setup()
        await store.abatch(
            [PutOp(ns, key, value, index=None if on else False) for ns, key, value, on in items()]
        )
        for prefix in PREFIXES[:3]:
            scores = {i.key: i.score for i in memory.search(prefix, query="w1 w2", limit=1000)}
            for flt in FILTERS:
                for page in PAGES[:2]:
                    ours = await store.asearch(prefix, query="w1 w2", filter=flt, **page)
                    theirs = memory.search(prefix, query="w1 w2", filter=flt, **page)
                    check(ours, theirs, scores)


def test_zero_vectors_score_zero_in_their_place(vector_dsn: str, way: str) -> None:
    """pgvector's HNSW index of cosine distance leaves zero vectors out; they are scored 0 (as
    InMemoryStore scores them): after every item nearer than orthogonal, before the others."""
    index = {"dims": 4, "embed": lambda texts: [[float(x) for x in t.split()] for t in texts]}
    with PostgresStore.from_conn_string(vector_dsn, index={**index, "fields": ["v"]}) as store:  # type: ignore[arg-type]
        store.setup()
        memory = InMemoryStore(index={**index, "fields": ["v"]})  # type: ignore[arg-type]
        vectors = {"near": "1 0 0 0", "side": "0 1 0 0", "far": "-1 0 0 0", "zero": "0 0 0 0"}
        for s in (store, memory):
            for key, v in vectors.items():
                s.put(("z",), key, {"v": v})
            s.put(("z",), "plain", {"v": "1 1 1 1"}, index=False)
        ours = store.search(("z",), query="1 0.1 0 0", limit=10)
        theirs = memory.search(("z",), query="1 0.1 0 0", limit=10)
        assert [i.key for i in ours] == ["near", "side", "zero", "far", "plain"]
        zero = next(i for i in ours if i.key == "zero")
        assert zero.score == 0.0
        check(ours, theirs, {i.key: i.score for i in theirs})
        # a zero query: every item scores 0
        assert {i.score for i in store.search(("z",), query="0 0 0 0", limit=10)} == {0.0, None}


def test_a_flat_store_sharing_the_schema_leaves_the_index_search_whole(
    vector_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One search function per distance and schema: a flat store's setup() after an HNSW
    store's must not make the HNSW store's index searches lose the zero vectors."""
    for module in (sync_module, async_module):  # the index's way
        monkeypatch.setattr(module, "PROBE_ITEMS", 1)
        monkeypatch.setattr(module, "ANN_TUPLES", 0)
    index = {"dims": 4, "embed": lambda texts: [[float(x) for x in t.split()] for t in texts]}
    hnsw = {**index, "fields": ["v"]}
    flat = {**hnsw, "ann_index_config": {"kind": "flat"}}
    with (
        PostgresStore.from_conn_string(vector_dsn, index=hnsw) as store,  # type: ignore[arg-type]
        PostgresStore.from_conn_string(vector_dsn, index=flat) as other,  # type: ignore[arg-type]
    ):
        store.setup()
        for key, v in {"near": "1 0 0 0", "far": "-1 0 0 0", "zero": "0 0 0 0"}.items():
            store.put(("z",), key, {"v": v})
        for i in range(20):  # more than the probe reads: the index's way is taken
            store.put(("z",), f"f{i}", {"v": f"0 -1 {i} 0"})
        other.setup()
        for s in (store, other):
            # two asked for: the index gives two (near, far) unless the zero vectors are read
            found = s.search(("z",), query="1 0.1 0 0", limit=2)
            assert [i.key for i in found] == ["near", "zero"]


@pytest.mark.parametrize(
    ("prefix", "flt", "page"),
    [
        ((), None, {}),
        (("a", "big"), {"kind": "food"}, {"offset": 3}),
        (("a", "small"), {"kind": "rare"}, {"limit": 40}),
        (("a",), {"kind": "pet", "n": {"$gt": 100}}, {}),
    ],
)
def test_one_round_trip_per_search(
    vector_dsn: str, way: str, prefix: Any, flt: Any, page: Any
) -> None:
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as setup:  # type: ignore[arg-type]
        setup.setup()
        load(setup)
    with psycopg.connect(vector_dsn, autocommit=True) as conn:
        store = PostgresStore(conn, index=index)  # type: ignore[arg-type]
        store.search(prefix, query="w1", filter=flt, **page)  # any first-use checks
        with traced(conn.pgconn) as trace:
            found = store.search(prefix, query="w1 w2", filter=flt, **page)
        assert trace.round_trips == 1
        assert found


def test_a_vectors_table_older_than_the_function_still_searches(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    memory = memory_store(["text"])
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        load(store)
        with psycopg.connect(vector_dsn, autocommit=True) as conn:
            old = "text, text, text, jsonb, boolean, " + ", ".join(["integer"] * 9)
            conn.execute(
                f"DROP FUNCTION pgsaver_store_nearest_cosine({old}),"
                f" pgsaver_store_nearest_cosine({old}, text)"
            )
        with pytest.raises(SchemaError, match="pgsaver_store_nearest_cosine"):
            store.setup(check=True)
        with PostgresStore.from_conn_string(vector_dsn, index=index) as old:  # type: ignore[arg-type]
            scores = {i.key: i.score for i in memory.search(("a",), query="w3", limit=1000)}
            for flt in FILTERS[:3]:
                check(
                    old.search(("a",), query="w3", filter=flt),
                    memory.search(("a",), query="w3", filter=flt),
                    scores,
                )
        store.setup()  # makes it again
        store.setup(check=True)
        assert store.search(("a",), query="w3")


#: values Python's == takes as 1 or 0 (InMemoryStore's rule), beside others that are not
FLAGS: list[Any] = [True, False, 1, 0, 1.0, 0.0, -0.0, "1", "true", None, [1], {"on": True}]


def flag_items() -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    out = []
    for i in range(120):
        value: dict[str, Any] = {"text": " ".join(WORDS[(i * 7 + j) % 40] for j in range(4))}
        if i % 13:  # some without the key
            value["flag"] = FLAGS[i % len(FLAGS)]
        value["meta"] = {"on": FLAGS[(i // 3) % len(FLAGS)], "tier": i % 3}
        for b in range(5):
            value[f"b{b}"] = bool((i >> b) & 1)
        out.append((("f", f"g{i % 4}"), f"k{i:03d}", value))
    return out


FLAG_FILTERS: list[dict[str, Any]] = [
    {"flag": True},
    {"flag": False},
    {"flag": 1},
    {"flag": 0},
    {"flag": 1.0},
    {"flag": -0.0},
    {"flag": {"$eq": True}},
    {"meta": {"on": 1}},
    {"meta": {"on": False, "tier": 0}},
    {"flag": "1"},
    # 32 alternatives, more than a prefilter spells out: some keys are checked in Python
    {"b0": True, "b1": False, "b2": True, "b3": 0, "b4": 1},
]


def test_numbers_and_booleans_filter_as_python_compares_them(vector_dsn: str, way: str) -> None:
    """{"flag": True} matches 1 and 1.0 as well (Python's ==, InMemoryStore's rule), and
    {"flag": 0} False: the prefilter spells both out for SQL (jsonb tells them apart), so these
    filters select exactly in SQL, with and without a query, under every way of the search."""
    from langgraph_pg_saver.store import rules

    for flt in FLAG_FILTERS[:-1]:
        plan = rules.plan_filter(flt)
        assert plan.exact, flt
    assert not rules.plan_filter(FLAG_FILTERS[-1]).exact
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.batch([PutOp(ns, key, value) for ns, key, value in flag_items()])
        for ns, key, value in flag_items():
            memory.put(ns, key, value)
        for prefix in [("f",), ("f", "g1")]:
            scores = {i.key: i.score for i in memory.search(prefix, query="w1 w8", limit=1000)}
            for flt in FLAG_FILTERS:
                for query in (None, "w1 w8"):
                    ours = store.search(prefix, query=query, filter=flt, limit=200)
                    theirs = memory.search(prefix, query=query, filter=flt, limit=200)
                    assert {i.key for i in ours} == {i.key for i in theirs}, (prefix, flt, query)
                    if query:
                        check(ours, theirs, scores)


INDEXES = ("pgsaver_store_value_idx", "pgsaver_store_vectors_hnsw_cosine_idx")


def _search_scans(
    store: PostgresStore, conn: psycopg.Connection[Any], prefix: tuple[str, ...], **kw: Any
) -> dict[str, Any]:
    found: list[Any] = []
    scans = scans_during(conn, lambda: found.extend(store.search(prefix, **kw)), INDEXES)
    assert found
    return scans


def test_plans_after_statistics_of_empty_tables(vector_dsn: str) -> None:
    """ANALYZE of the empty tables (autovacuum off: the statistics stay those), a session that
    searches then (the index scan's plan is kept for the session), 4,000 items loaded: that
    session's search without a prefix reads the HNSW index, not the tables, and a filter
    matching 1% reads the items it matches through the value's GIN index."""
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as loader:  # type: ignore[arg-type]
        loader.setup()
        freeze_empty_statistics(vector_dsn)
        with psycopg.connect(vector_dsn) as conn:
            early = PostgresStore(conn, index=index)  # type: ignore[arg-type]
            early.put(("p",), "first", {"text": "w1 w2"})
            conn.commit()
            assert early.search(("p",), query="w1")  # planned on the empty tables' statistics
            conn.commit()
            rng = random.Random(3)
            for start in range(0, 4_000, 1_000):
                loader.batch(
                    [
                        PutOp(
                            ("g", f"s{i % 10}"),
                            f"m{i}",
                            {
                                "text": " ".join(rng.choice(WORDS) for _ in range(6)),
                                "tag": "rare" if i % 100 == 7 else "common",
                            },
                        )
                        for i in range(start, start + 1_000)
                    ]
                )
            plain = _search_scans(early, conn, (), query="w3 w4", limit=10)
            rare = _search_scans(early, conn, (), query="w3 w4", filter={"tag": "rare"}, limit=10)
    assert plain["pgsaver_store_vectors"][0] == 0, plain
    assert plain["pgsaver_store"][0] == 0, plain
    assert plain["pgsaver_store_vectors_hnsw_cosine_idx"][1] > 0, plain
    # (one scan of the items: their count, which statistics of an empty table do not give)
    assert rare["pgsaver_store"][0] <= 1, rare
    assert rare["pgsaver_store_vectors"][0] == 0, rare
    assert rare["pgsaver_store_value_idx"][1] > 0, rare


@pytest.mark.parametrize("query", [None, "w1"])
def test_an_offset_counts_only_matches(vector_dsn: str, way: str, query: str | None) -> None:
    """A row the SQL prefilter lets through but the check drops (its value is kept exactly:
    jsonb would lose the NUL) must not count towards the offset."""
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    values = {
        "a": {"s": "a\x00b", "text": "w1"},
        "b": {"s": "ab", "text": "w1 w2"},
        "c": {"s": "ab", "text": "w1 w2 w3"},
        "d": {"s": "ab", "text": "w1 w2 w3 w4"},
    }
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        for key, value in values.items():
            store.put(("o",), key, value)
            memory.put(("o",), key, value)
        for offset in range(4):
            for limit in (1, 2, 10):
                ours = store.search(
                    ("o",), query=query, filter={"s": "ab"}, offset=offset, limit=limit
                )
                theirs = memory.search(
                    ("o",), query=query, filter={"s": "ab"}, offset=offset, limit=limit
                )
                if query is None:  # (without a query, newest first: d, c, b)
                    assert [i.key for i in ours] == ["d", "c", "b"][offset : offset + limit]
                else:
                    assert [i.key for i in ours] == [i.key for i in theirs], (offset, limit)


def test_filter_keys_jsonb_cannot_hold_are_checked_not_sent(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("k",), "nul", {"a\x00": "x", "m": {"b\x00": "y"}, "text": "w1"})
        store.put(("k",), "plain", {"a": "x", "text": "w2"})
        for query in (None, "w1"):
            assert [i.key for i in store.search(("k",), query=query, filter={"a\x00": "x"})] == [
                "nul"
            ]
            found = store.search(("k",), query=query, filter={"m": {"b\x00": "y"}})
            assert [i.key for i in found] == ["nul"]
            assert store.search(("k",), query=query, filter={"a\ud800": "x"}) == []


# --------------------------------------------------------------------------- iterative_scan off


def _tagged(i: int) -> str:
    return "rare" if i % 100 == 7 else "tenth" if i % 10 == 3 else "common"


def test_iterative_scan_off_answers_from_the_first_candidates(
    vector_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ann_index_config={"iterative_scan": "off"}``: where the matches under a prefix are many,
    the answer is what the index's first ``ef_search`` candidates give (the official store's
    search: it may be short, every item in it with its exact score, nearest first); where they
    are few, the exact scan (whole), the matches counted no further than that choice needs; a
    filter over the whole of a large store (here: over 1,000 items) goes to the index without a
    count. The default ("relaxed_order") answers whole everywhere."""
    monkeypatch.setattr(rules, "FIRST_WHOLE_ITEMS", 1_000)  # setup() makes the function with it
    rng = random.Random(11)
    values = [
        {"text": " ".join(rng.choice(WORDS) for _ in range(6)), "tag": _tagged(i)}
        for i in range(4_000)
    ]
    base = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    off = {**base, "ann_index_config": {"kind": "hnsw", "iterative_scan": "off"}}
    memory = InMemoryStore(index=base)  # type: ignore[arg-type]
    with (
        PostgresStore.from_conn_string(vector_dsn, index=base) as whole,  # type: ignore[arg-type]
        PostgresStore.from_conn_string(vector_dsn, index=off) as first,  # type: ignore[arg-type]
    ):
        assert first.index_spec is not None
        assert first.index_spec.iterative_scan == "off"
        whole.setup()
        for start in range(0, 4_000, 1_000):
            ops = [
                PutOp(("t", "ab"[i % 2]), f"m{i}", values[i]) for i in range(start, start + 1_000)
            ]
            whole.batch(ops)
            memory.batch(ops)
        with psycopg.connect(vector_dsn, autocommit=True) as admin:
            admin.execute("ANALYZE pgsaver_store")  # the store's size from the statistics
        query = "w1 w2 w3"
        exact = {i.key: i.score for i in memory.search(("t",), query=query, limit=10_000)}
        shortened = 0
        for prefix, tag in (
            (("t", "b"), "rare"),  # 40 matches under half the store: the exact scan
            (("t", "b"), "tenth"),  # 400: the index
            (("t",), "common"),  # the whole store: the index, not counted
            (("t",), "rare"),  # the whole store: the index, as the official store reads it
        ):
            theirs = memory.search(prefix, query=query, filter={"tag": tag}, limit=10)
            check(whole.search(prefix, query=query, filter={"tag": tag}, limit=10), theirs, exact)
            got = first.search(prefix, query=query, filter={"tag": tag}, limit=10)
            if (prefix, tag) == (("t", "b"), "rare"):
                check(got, theirs, exact)
                continue
            assert all(values[int(i.key[1:])]["tag"] == tag for i in got)
            assert all(i.namespace[: len(prefix)] == prefix for i in got)
            assert [_r(i.score) for i in got] == [_r(exact[i.key]) for i in got]
            assert [i.score for i in got] == sorted((i.score for i in got), reverse=True)
            shortened += len(got) < 10
        # 400 and 40 matches: a few among the index's 40 candidates, not the 10 asked for
        assert shortened >= 2
        with psycopg.connect(vector_dsn, autocommit=True) as conn:
            reader = PostgresStore(conn, index=off)  # type: ignore[arg-type]
            common = _search_scans(reader, conn, ("t",), query=query, filter={"tag": "common"})
            rare = _search_scans(reader, conn, ("t", "b"), query=query, filter={"tag": "rare"})
    # the whole store: the index's candidates and the items answered, read by primary key; the
    # 3,560 matches not counted (no scan of the items, nor of the value's GIN index)
    assert common["pgsaver_store_vectors_hnsw_cosine_idx"][1] > 0, common
    assert common["pgsaver_store"][0] == 0, common
    assert common["pgsaver_store_value_idx"][1] == 0, common
    # 40: counted (the value's GIN index or the prefix's range), then scanned exactly
    assert rare["pgsaver_store_vectors_hnsw_cosine_idx"][1] == 0, rare


def test_setup_keeps_the_search_function_of_an_earlier_release_as_a_call(
    vector_dsn: str,
) -> None:
    """The search function's earlier form (14 arguments, before ``iterative_scan``), which a
    store of an earlier release calls during a rolling upgrade, is made by setup() as a call of
    the current one: the same rows, in one statement."""
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("a",), "k", {"text": "w1 w2"})
        store.put(("a",), "j", {"text": "w3"})
        assert store.search(("a",), query="w1")[0].key == "k"
    vector = "[" + ",".join(str(x) for x in embed(["w1"])[0]) + "]"
    args = (vector, "a", "a.%", None, False, 0, 10, 10, 0, 10, 10, 40, 8, 4)
    with psycopg.connect(vector_dsn, autocommit=True) as conn:
        forms = conn.execute(
            "SELECT pg_get_function_identity_arguments(oid) FROM pg_proc"
            " WHERE proname = 'pgsaver_store_nearest_cosine' ORDER BY pronargs"
        ).fetchall()
        old = conn.execute(
            "SELECT key, distance FROM pgsaver_store_nearest_cosine("
            + ", ".join(["%s"] * 14)
            + ")",
            args,
        ).fetchall()
        new = conn.execute(
            "SELECT key, distance FROM pgsaver_store_nearest_cosine("
            + ", ".join(["%s"] * 15)
            + ")",
            (*args, None),
        ).fetchall()
    assert len(forms) == 2, forms
    assert forms[1][0].endswith("p_scan text"), forms
    assert old == new
    assert old[0][0] == "k"
