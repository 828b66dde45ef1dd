"""PostgresStore and AsyncPostgresStore on a real Postgres: the persistence docs' store examples,
the same answers as InMemoryStore on random operations, TTL, concurrency and bad input."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from langgraph_pg_saver import (
    AsyncPostgresStore,
    InvalidInputError,
    PgSaverError,
    PostgresSaver,
    PostgresStore,
)


@pytest.fixture
def store(db_dsn: str) -> Iterator[PostgresStore]:
    with PostgresStore.from_conn_string(db_dsn) as s:
        yield s


@pytest.fixture
async def astore(db_dsn: str) -> AsyncIterator[AsyncPostgresStore]:
    async with AsyncPostgresStore.from_conn_string(db_dsn) as s:
        yield s


# --------------------------------------------------------------------------- the docs' examples


def test_memories_per_user_namespace_as_in_the_docs(store: PostgresStore) -> None:
    user_id = "1"
    namespace_for_memory = (user_id, "memories")
    memory_id = str(uuid.uuid4())
    memory = {"food_preference": "I like pizza"}
    store.put(namespace_for_memory, memory_id, memory)
    memories = store.search(namespace_for_memory)
    d = memories[-1].dict()
    assert d["value"] == {"food_preference": "I like pizza"}
    assert d["key"] == memory_id
    assert d["namespace"] == ["1", "memories"]
    assert d["created_at"] == d["updated_at"]
    item = store.get(namespace_for_memory, memory_id)
    assert item is not None
    assert item.value == memory
    # a prefix matches namespaces below it; the newest first
    store.put(("alice", "memories"), "a", {"n": 1})
    store.put(("alice", "preferences"), "b", {"n": 2})
    assert [i.key for i in store.search(("alice",), limit=100)] == ["b", "a"]
    assert [i.key for i in store.search(("alice", "memories"), limit=100)] == ["a"]
    # paging as the docs do it
    for i in range(7):
        store.put(("alice", "memories"), f"p{i}", {"i": i})
    seen: list[str] = []
    offset = 0
    while page := store.search(("alice", "memories"), limit=3, offset=offset):
        seen.extend(item.key for item in page)
        offset += 3
    assert sorted(seen) == sorted(["a", *(f"p{i}" for i in range(7))])
    assert len(seen) == 8
    assert store.list_namespaces(prefix=("alice",), max_depth=2) == [
        ("alice", "memories"),
        ("alice", "preferences"),
    ]
    store.delete(namespace_for_memory, memory_id)
    assert store.get(namespace_for_memory, memory_id) is None


@dataclass
class Context:
    user_id: str


class ChatState(TypedDict):
    messages: Annotated[list[str], operator.add]


def remembering_graph() -> StateGraph[Any]:
    """A node that recalls the user's memories through runtime.store and writes a new one."""

    def call_model(state: ChatState, runtime: Runtime[Context]) -> dict[str, Any]:
        assert runtime.store is not None
        namespace = (runtime.context.user_id, "memories")
        memories = runtime.store.search(namespace, limit=100)
        said = state["messages"][-1]
        runtime.store.put(namespace, str(uuid.uuid4()), {"memory": said})
        known = sorted(m.value["memory"] for m in memories)
        return {"messages": [f"I remember: {', '.join(known) or 'nothing'}"]}

    g: StateGraph[Any] = StateGraph(ChatState, context_schema=Context)
    g.add_node("call_model", call_model)
    g.add_edge(START, "call_model")
    g.add_edge("call_model", END)
    return g


def test_a_graph_remembers_across_threads_through_runtime_store(db_dsn: str) -> None:
    with (
        PostgresSaver.from_conn_string(db_dsn) as saver,
        PostgresStore.from_conn_string(db_dsn) as store,
    ):
        graph = remembering_graph().compile(checkpointer=saver, store=store)
        out = graph.invoke(
            {"messages": ["I like pizza"]},
            {"configurable": {"thread_id": "1"}},
            context=Context(user_id="1"),
        )
        assert out["messages"][-1] == "I remember: nothing"
        # a new thread, the same user: the memory is there
        out = graph.invoke(
            {"messages": ["hi again"]},
            {"configurable": {"thread_id": "2"}},
            context=Context(user_id="1"),
        )
        assert out["messages"][-1] == "I remember: I like pizza"
        # another user sees nothing of it
        out = graph.invoke(
            {"messages": ["hello"]},
            {"configurable": {"thread_id": "3"}},
            context=Context(user_id="2"),
        )
        assert out["messages"][-1] == "I remember: nothing"


async def test_async_store_in_an_async_graph(db_dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(db_dsn) as store:

        async def node(state: ChatState, runtime: Runtime[Context]) -> dict[str, Any]:
            assert runtime.store is not None
            ns = (runtime.context.user_id, "memories")
            await runtime.store.aput(ns, "last", {"memory": state["messages"][-1]})
            found = await runtime.store.asearch(ns)
            return {"messages": [f"{len(found)} memories"]}

        g: StateGraph[Any] = StateGraph(ChatState, context_schema=Context)
        g.add_node("node", node)
        g.add_edge(START, "node")
        g.add_edge("node", END)
        graph = g.compile(store=store)
        out = await graph.ainvoke({"messages": ["x"]}, context=Context(user_id="u"))
        assert out["messages"][-1] == "1 memories"
        item = await store.aget(("u", "memories"), "last")
        assert item is not None
        assert item.value == {"memory": "x"}
        # the sync methods from another thread run on the store's loop
        found = await asyncio.to_thread(store.search, ("u",))
        assert [i.key for i in found] == ["last"]
        with pytest.raises(asyncio.InvalidStateError):
            store.search(("u",))


# --------------------------------------------------------------------------- filters, lossless values


def test_filters_and_values_come_back_exactly(store: PostgresStore) -> None:
    ns = ("docs",)
    values = {
        "a": {"kind": "note", "n": 3, "tags": ["x", "y"], "meta": {"lang": "en", "v": 1}},
        "b": {"kind": "note", "n": 7, "tags": ["x"], "meta": {"lang": "fr", "v": 2}},
        "c": {"kind": "task", "n": "12", "done": True},
        "d": {"kind": "note\x00hidden", "big": 1e20, "neg": -0.0, "deep": {"s": "a\x00b"}},
    }
    for k, v in values.items():
        store.put(ns, k, v)
    for k, v in values.items():
        item = store.get(ns, k)
        assert item is not None
        assert item.value == v
        assert {k: type(x) for k, x in item.value.items()} == {k: type(x) for k, x in v.items()}
    got = store.get(ns, "d")
    assert got is not None
    assert str(got.value["neg"]) == "-0.0"

    def keys(flt: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in store.search(ns, filter=flt, limit=100))

    assert keys({"kind": "note"}) == ["a", "b"]
    assert keys({"kind": "note\x00hidden"}) == ["d"]
    assert keys({"meta": {"lang": "en"}}) == ["a"]
    assert keys({"tags": ["x"]}) == ["b"]  # a list matches an equal list
    assert keys({"n": {"$gt": 5}}) == ["b", "c"]  # "12" counts as a number, as in InMemoryStore
    assert keys({"n": {"$gte": 3, "$lt": 7}}) == ["a"]
    assert keys({"kind": {"$ne": "note"}}) == ["c", "d"]
    assert keys({"done": True}) == ["c"]
    assert keys({"big": 1e20}) == ["d"]
    assert keys({"missing": None}) == ["a", "b", "c", "d"]
    with pytest.raises(InvalidInputError, match="needs a number"):
        store.search(ns, filter={"n": {"$gt": "many"}})
    with pytest.raises(InvalidInputError, match="unknown filter operator"):
        store.search(ns, filter={"n": {"$regex": "x"}})


def test_bad_input_is_refused_and_nothing_is_written(store: PostgresStore, db_dsn: str) -> None:
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: store.put((), "k", {"a": 1}), InvalidNamespaceError, "(?i)empty"),
        (lambda: store.put(("a.b",), "k", {"a": 1}), InvalidNamespaceError, "a.b"),
        (lambda: store.put(("a", ""), "k", {"a": 1}), InvalidNamespaceError, "(?i)empty"),
        (lambda: store.put(("a\x00",), "k", {"a": 1}), InvalidNamespaceError, "NUL"),
        (lambda: store.put(("langgraph",), "k", {"a": 1}), InvalidNamespaceError, "langgraph"),
        (lambda: store.put(("a",), "k", ["not", "a", "dict"]), InvalidInputError, "must be a dict"),
        (lambda: store.put(("a",), "k\x00", {"a": 1}), InvalidInputError, "NUL"),
        (lambda: store.put(("a",), "k", {"when": time}), InvalidInputError, "value\\['when'\\]"),
        (lambda: store.put(("a",), "k", {"t": (1, 2)}), InvalidInputError, "use a list"),
        (lambda: store.put(("a",), "k", {"x": float("nan")}), InvalidInputError, "nan"),
        (lambda: store.put(("a",), "k", {1: "int key"}), InvalidInputError, "JSON keys"),
        (lambda: store.put(("a",), "k", {"s": "\ud800"}), InvalidInputError, "surrogate"),
        (lambda: store.put(("a",), "k", {"a": 1}, ttl=-1), InvalidInputError, "ttl"),
        (lambda: store.search(("a",), limit=-1), InvalidInputError, "limit"),
        (
            lambda: store.search(("a",), filter={"'; DROP TABLE x; --": {"$bad": 1}}),
            InvalidInputError,
            "operator",
        ),
    ]
    for call, error, words in cases:
        with pytest.raises(error, match=words):
            call()
    # a batch with one bad op writes nothing of the good ones
    with pytest.raises(InvalidInputError):
        store.batch(
            [PutOp(("a",), "good", {"x": 1}), PutOp(("a",), "bad", {"x": {1, 2}})]  # type: ignore[dict-item]
        )
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgsaver_store").fetchone() == (0,)
    # a hostile filter key is a value, never SQL
    store.put(("a",), "k", {"x": 1})
    assert store.search(("a",), filter={"x') OR true; --": 1}) == []


# --------------------------------------------------------------------------- InMemoryStore equivalence

LABELS = st.sampled_from(["u1", "u2", "mem", "prefs", "a_b", "x%y"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
KEYS = st.sampled_from(["k1", "k2", "k3", "k4"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, 2.0, 1e20, -0.0]),
    st.sampled_from(["a", "b", "", "a\x00b", "ünï"]),
)
VALUES = st.dictionaries(
    st.sampled_from(["kind", "n", "tags", "meta"]),
    st.one_of(
        SCALARS,
        st.lists(SCALARS, max_size=2),
        st.dictionaries(st.sampled_from(["lang", "v"]), SCALARS, max_size=2),
    ),
    max_size=3,
)
FILTERS = st.dictionaries(
    st.sampled_from(["kind", "n", "tags", "meta"]),
    st.one_of(
        SCALARS,
        st.lists(SCALARS, max_size=2),
        st.dictionaries(st.sampled_from(["lang", "v"]), SCALARS, min_size=1, max_size=1),
        st.fixed_dictionaries({"$ne": SCALARS}),
        st.fixed_dictionaries({"$eq": SCALARS}),
    ),
    max_size=2,
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), NAMESPACES, KEYS, VALUES),
        st.tuples(st.just("delete"), NAMESPACES, KEYS),
        st.tuples(st.just("get"), NAMESPACES, KEYS),
        st.tuples(st.just("search"), st.lists(LABELS, max_size=2).map(tuple), FILTERS),
        st.tuples(
            st.just("list"), st.lists(LABELS, max_size=1).map(tuple), st.sampled_from([None, 1, 2])
        ),
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_the_same_answers_as_in_memory_store(store: PostgresStore, ops: list[Any]) -> None:
    store.batch(
        [
            PutOp(ns, key, None)
            for ns in store.list_namespaces(limit=1000)
            for key in ("k1", "k2", "k3", "k4")
        ]
    )
    memory = InMemoryStore()
    for op in ops:
        kind = op[0]
        if kind == "put":
            for s in (store, memory):
                s.put(op[1], op[2], op[3])
        elif kind == "delete":
            for s in (store, memory):
                s.delete(op[1], op[2])
        elif kind == "get":
            ours, theirs = store.get(op[1], op[2]), memory.get(op[1], op[2])
            assert (ours and ours.value) == (theirs and theirs.value), op
        elif kind == "search":
            ours_items = store.search(op[1], filter=op[2] or None, limit=1000)
            theirs_items = memory.search(op[1], filter=op[2] or None, limit=1000)
            assert sorted((i.namespace, i.key) for i in ours_items) == sorted(
                (i.namespace, i.key) for i in theirs_items
            ), op
            stamps = [i.updated_at for i in ours_items]
            assert stamps == sorted(stamps, reverse=True)
        else:
            prefix, depth = op[1], op[2]
            ours_ns = store.list_namespaces(prefix=prefix or None, max_depth=depth, limit=1000)
            alive = [ns for ns in memory.list_namespaces(limit=1000) if memory.search(ns, limit=1)]
            theirs_ns = sorted(
                {ns[:depth] if depth else ns for ns in alive if ns[: len(prefix)] == prefix}
            )
            # InMemoryStore also lists namespaces whose items were all deleted (and those only
            # read): the stored namespaces are what is compared
            assert ours_ns == theirs_ns, op


# --------------------------------------------------------------------------- TTL


def test_ttl_with_omit_expired_expired_items_are_never_returned_and_reads_refresh(
    db_dsn: str,
) -> None:
    ttl = {"default_ttl": 0.02, "refresh_on_read": True, "omit_expired": True}  # 1.2 s
    with PostgresStore.from_conn_string(db_dsn, ttl=ttl) as store:  # type: ignore[arg-type]
        store.put(("t",), "short", {"v": 1})
        store.put(("t",), "forever", {"v": 2}, ttl=None)
        store.put(("t",), "kept", {"v": 3})
        deadline = time.monotonic() + 1.8
        while time.monotonic() < deadline:  # read every 0.3 s: its TTL keeps starting again
            assert store.get(("t",), "kept") is not None
            time.sleep(0.3)
        assert store.get(("t",), "short") is None  # expired, not swept yet
        assert [i.key for i in store.search(("t",))] == ["kept", "forever"]
        assert store.list_namespaces() == [("t",)]
        # a read that does not refresh
        store.get(("t",), "kept", refresh_ttl=False)
        with psycopg.connect(db_dsn) as conn:
            assert conn.execute("SELECT count(*) FROM pgsaver_store").fetchone() == (3,)
        time.sleep(1.4)
        assert store.get(("t",), "kept") is None
        assert store.sweep_ttl() == 2
        with psycopg.connect(db_dsn) as conn:
            assert conn.execute("SELECT key FROM pgsaver_store").fetchall() == [("forever",)]
        # put again after expiry: a new item
        store.put(("t",), "short", {"v": 9})
        item = store.get(("t",), "short")
        assert item is not None
        assert item.value == {"v": 9}


def test_ttl_by_default_expired_items_come_back_until_swept_and_a_read_revives_them(
    db_dsn: str,
) -> None:
    """LangGraph's contract (TTLConfig.omit_expired, False unless set): an item whose TTL ran
    out but that no sweep deleted yet is still returned by get, search and list_namespaces, and a
    read that refreshes gives it a new TTL; one read without refresh leaves it expired, so the
    sweep deletes it."""
    ttl = {"default_ttl": 0.01, "refresh_on_read": True}  # 0.6 s
    with (
        PostgresStore.from_conn_string(db_dsn, ttl=ttl) as store,  # type: ignore[arg-type]
        PostgresStore.from_conn_string(db_dsn, ttl={**ttl, "omit_expired": True}) as strict,  # type: ignore[arg-type]
    ):
        store.put(("t",), "revived", {"v": 1})
        store.put(("t",), "left", {"v": 2})
        time.sleep(1.0)  # both expired, not swept
        assert strict.get(("t",), "revived") is None
        assert strict.search(("t",)) == []
        assert strict.list_namespaces() == []
        assert {i.key for i in store.search(("t",), refresh_ttl=False)} == {"revived", "left"}
        assert store.list_namespaces() == [("t",)]
        left = store.get(("t",), "left", refresh_ttl=False)
        assert left is not None
        assert left.value == {"v": 2}
        revived = store.get(("t",), "revived")  # refreshes: a new TTL
        assert revived is not None
        assert revived.value == {"v": 1}
        assert [i.key for i in strict.search(("t",))] == ["revived"]
        assert store.sweep_ttl() == 1
        with psycopg.connect(db_dsn) as conn:
            assert conn.execute("SELECT key FROM pgsaver_store").fetchall() == [("revived",)]


def test_one_sweep_at_a_time_across_workers(db_dsn: str) -> None:
    with PostgresStore.from_conn_string(db_dsn) as store:
        for i in range(5):
            store.put(("s",), f"k{i}", {"i": i}, ttl=0.001)
        time.sleep(0.2)
        with psycopg.connect(db_dsn) as other, other.transaction():
            # another worker's sweep holds the lock: this one does nothing
            other.execute(
                "SELECT pg_advisory_xact_lock(1818718323, hashtext('store-sweep:' || 'public'))"
            )
            assert store.sweep_ttl() == 0
        assert store.sweep_ttl() == 5


def test_the_sweeper_runs_and_stops_with_the_store(db_dsn: str) -> None:
    with PostgresStore.from_conn_string(db_dsn, ttl={"sweep_interval_minutes": 0.005}) as store:  # type: ignore[arg-type]
        store.put(("s",), "k", {"i": 1}, ttl=0.001)
        done = store.start_ttl_sweeper()
        deadline = time.monotonic() + 10
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM pgsaver_store").fetchone() != (0,):
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert store.stop_ttl_sweeper(timeout=5)
        assert done.done()


async def test_async_sweeper(db_dsn: str) -> None:
    async with AsyncPostgresStore.from_conn_string(
        db_dsn, ttl={"sweep_interval_minutes": 0.005}
    ) as store:  # type: ignore[arg-type]
        await store.aput(("s",), "k", {"i": 1}, ttl=0.001)
        task = await store.start_ttl_sweeper()
        for _ in range(200):
            if (
                await store.aget(("s",), "k", refresh_ttl=False) is None
                and (await asyncio.to_thread(_count, db_dsn)) == 0
            ):
                break
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(_count, db_dsn) == 0
        assert await store.stop_ttl_sweeper(timeout=5)
        assert task.done()


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgsaver_store").fetchone()
        assert row is not None
        return int(row[0])


# --------------------------------------------------------------------------- concurrency, schema


async def test_fifty_async_tasks(astore: AsyncPostgresStore) -> None:
    async def worker(i: int) -> None:
        ns = ("users", f"u{i % 5}")
        for j in range(10):
            await astore.aput(ns, f"k{i}-{j}", {"i": i, "j": j})
        found = await astore.asearch(ns, filter={"i": i}, limit=100)
        assert sorted(item.value["j"] for item in found) == list(range(10))

    await asyncio.gather(*(worker(i) for i in range(50)))
    total = 0
    for u in range(5):
        total += len(await astore.asearch(("users", f"u{u}"), limit=1000))
    assert total == 500


def test_threads_share_a_store(store: PostgresStore) -> None:
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for j in range(20):
                store.put(("shared",), "counter", {"by": i, "j": j})
                store.batch([GetOp(("shared",), "counter"), SearchOp(("shared",))])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    item = store.get(("shared",), "counter")
    assert item is not None
    assert item.value["j"] == 19


def test_schema_option_and_check_only_setup(empty_db_dsn: str) -> None:
    with PostgresStore.from_conn_string(empty_db_dsn, schema="tenant_a") as store:
        with pytest.raises(PgSaverError, match="not set up"):
            store.setup(check=True)
        store.setup()
        store.setup(check=True)
        store.put(("x",), "k", {"v": 1})
    with psycopg.connect(empty_db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM tenant_a.pgsaver_store").fetchone() == (1,)
        assert conn.execute("SELECT to_regclass('public.pgsaver_store')").fetchone() == (None,)


def test_sync_and_async_stores_expose_the_same_api() -> None:
    import inspect

    pairs = {
        "batch": "abatch",
        "setup": "setup",
        "sweep_ttl": "sweep_ttl",
        "from_conn_string": "from_conn_string",
        "__init__": "__init__",
    }
    for sync_name, async_name in pairs.items():
        s = inspect.signature(getattr(PostgresStore, sync_name))
        a = inspect.signature(getattr(AsyncPostgresStore, async_name))
        assert list(s.parameters) == list(a.parameters), sync_name
    for name in ("get", "put", "search", "delete", "list_namespaces", "aget", "aput", "asearch"):
        assert hasattr(PostgresStore, name)
        assert hasattr(AsyncPostgresStore, name)


def test_ops_passed_to_batch_directly_are_checked_too(store: PostgresStore) -> None:
    # BaseStore's methods check namespaces; ops given to batch() skip them, the store does not
    with pytest.raises(InvalidNamespaceError, match=r"contains a '\.'"):
        store.batch([PutOp(("a.b",), "k", {"a": 1})])
    with pytest.raises(InvalidNamespaceError, match="cannot be empty"):
        store.batch([PutOp((), "k", {"a": 1})])
    with pytest.raises(InvalidNamespaceError, match="NUL"):
        store.batch([GetOp(("a\x00",), "k")])
    # put()'s own rule (BaseStore): LangGraph's batch rules leave the root label to it
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        store.put(("langgraph",), "k", {"a": 1})


TRICKY_VALUES = [
    {"n": True},
    {"n": False},
    {"n": 1},
    {"n": 0},
    {"n": 1.0},
    {"n": 2},
    {"n": 2.0},
    {"n": -0.0},
    {"n": 1e20},
    {"n": "1"},
    {"n": None},
    {},
    {"n": "a"},
    {"n": "a\x00b"},
    {"n": ["a"]},
    {"n": ["a", "b"]},
    {"n": {"x": 1}},
    {"n": {"x": True, "y": 2}},
    {"n": {"x": {"deep": "a"}}},
]
TRICKY_FILTERS = [
    {"n": v}
    for v in (True, False, 1, 0, 1.0, 2, 2.0, 0.0, 1e20, "1", None, "a", "a\x00b", ["a"], [])
] + [
    {"n": {"x": 1}},
    {"n": {"x": True}},
    {"n": {"x": {"deep": "a"}}},
    {"n": {"$eq": 1}},
    {"n": {"$ne": 1}},
    {"n": {"$gt": 0.5}},
    {"n": {"$lte": 1}},
    {"n": {"$eq": "a"}},
    {"n": {"$gte": 1}},
    {"n": {"$gt": False}},
    {"n": {"$eq": {"x": 1}}},
]


def test_tricky_filters_select_what_in_memory_store_selects(store: PostgresStore) -> None:
    memory = InMemoryStore()
    for i, value in enumerate(TRICKY_VALUES):
        for s in (store, memory):
            s.put(("t",), f"v{i:02d}", value)
    for flt in TRICKY_FILTERS:
        ours = sorted(i.key for i in store.search(("t",), filter=flt, limit=100))
        try:
            theirs = sorted(i.key for i in memory.search(("t",), filter=flt, limit=100))
        except (TypeError, ValueError):
            # InMemoryStore raises on float(None) and float("a"); here a value that is not a
            # number matches no ordering comparison
            theirs = sorted(
                f"v{i:02d}"
                for i, v in enumerate(TRICKY_VALUES)
                if isinstance(v.get("n"), (int, float, str))  # bools too: True is 1.0
                and _is_number(v["n"])
                and _cmp(float(v["n"]), next(iter(flt["n"])), next(iter(flt["n"].values())))
            )
        assert ours == theirs, flt
        # limit and offset count matches, not candidates
        page = [i.key for i in store.search(("t",), filter=flt, limit=2, offset=1)]
        full = [i.key for i in store.search(("t",), filter=flt, limit=100)]
        assert page == full[1:3], flt


def _is_number(text: object) -> bool:
    try:
        float(text)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def _cmp(left: float, op: str, right: float) -> bool:
    return {
        "$gt": left > right,
        "$gte": left >= right,
        "$lt": left < right,
        "$lte": left <= right,
    }[op]


async def test_a_saver_and_a_store_on_one_pool(db_dsn: str) -> None:
    """The user guide's FastAPI lifespan: one pool for the checkpointer and the store."""
    from psycopg_pool import AsyncConnectionPool

    from langgraph_pg_saver import AsyncPostgresSaver

    async with AsyncConnectionPool(db_dsn, min_size=1, max_size=4, open=False) as pool:
        saver = AsyncPostgresSaver(pool)
        store = AsyncPostgresStore(pool)
        await saver.setup()
        await store.setup()
        graph = remembering_graph().compile(checkpointer=saver, store=store)
        await graph.ainvoke(
            {"messages": ["I like tea"]},
            {"configurable": {"thread_id": "t"}},
            context=Context(user_id="7"),
        )
        out = await graph.ainvoke(
            {"messages": ["again"]},
            {"configurable": {"thread_id": "t2"}},
            context=Context(user_id="7"),
        )
        assert out["messages"][-1] == "I remember: I like tea"
        await store.close()
        await saver.close()
        assert not pool.closed  # a pool passed in is the caller's to close


def _store_worker(dsn: str, n: int, start: Any, out: Any) -> None:
    """A worker process: its own store, 40 puts to shared and own namespaces, reads, a sweep."""
    try:
        with PostgresStore.from_conn_string(dsn) as store:
            start.wait(60)
            for j in range(40):
                store.put(("shared", f"s{j % 4}"), f"p{n}-{j}", {"by": n, "j": j})
                store.put(("own", f"p{n}"), "counter", {"j": j})
                store.search(("shared",), filter={"by": n}, limit=5)
                store.sweep_ttl()
        out.put((n, None))
    except BaseException as exc:  # pragma: no cover - reported by the test
        out.put((n, repr(exc)))


@pytest.mark.slow
def test_eight_processes_share_a_store(db_dsn: str) -> None:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_store_worker, args=(db_dsn, n, start, out)) for n in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    assert [err for _, err in results if err] == []
    assert all(p.exitcode == 0 for p in procs)
    with PostgresStore.from_conn_string(db_dsn) as store:
        shared = store.search(("shared",), limit=1000)
        assert len(shared) == 8 * 40
        assert {(i.value["by"], i.value["j"]) for i in shared} == {
            (n, j) for n in range(8) for j in range(40)
        }
        for n in range(8):
            item = store.get(("own", f"p{n}"), "counter")
            assert item is not None
            assert item.value == {"j": 39}
        assert len(store.list_namespaces(prefix=("own",))) == 8


def test_a_store_on_a_single_connection(db_dsn: str) -> None:
    # (the deserializer: tests/test_store_config.py)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        store = PostgresStore(conn)
        store.setup()
        store.put(("c",), "k", {"v": 1})
        item = store.get(("c",), "k")
        assert item is not None
        assert item.value == {"v": 1}
        assert [i.value for i in store.search(("c",))] == [{"v": 1}]
    # inside a transaction of the caller's, the store's writes join it: a rollback undoes them
    with psycopg.connect(db_dsn) as conn:
        store = PostgresStore(conn)
        with conn.transaction():
            store.put(("c",), "kept", {"v": 2})
        try:
            with conn.transaction():
                store.put(("c",), "rolled back", {"v": 3})
                raise RuntimeError("the caller's own failure")
        except RuntimeError:
            pass
        assert store.get(("c",), "kept") is not None
        assert store.get(("c",), "rolled back") is None


def test_an_offset_counts_only_matches_when_a_lossy_row_is_among_the_candidates(
    store: PostgresStore,
) -> None:
    for key, s in (("k3", "x"), ("k2", "x"), ("k1", "x\x00")):  # k1 newest, and lossy
        store.put(("o",), key, {"s": s})
    assert [i.key for i in store.search(("o",), filter={"s": "x"}, limit=10)] == ["k2", "k3"]
    assert [i.key for i in store.search(("o",), filter={"s": "x"}, offset=1, limit=1)] == ["k3"]


def test_eq_with_a_dict_means_equality(store: PostgresStore) -> None:
    store.put(("e",), "exact", {"a": {"b": 2}})
    store.put(("e",), "more", {"a": {"b": 2, "c": 3}})
    assert [i.key for i in store.search(("e",), filter={"a": {"$eq": {"b": 2}}})] == ["exact"]
    assert sorted(i.key for i in store.search(("e",), filter={"a": {"b": 2}})) == ["exact", "more"]


def test_a_query_without_an_index_is_ignored_as_by_the_official_store(store: PostgresStore) -> None:
    store.put(("q",), "k", {"text": "pizza"})
    found = store.search(("q",), query="pizza")
    assert [i.key for i in found] == ["k"]
    assert found[0].score is None


async def test_namespaces_given_as_lists_read_as_their_tuples(
    store: PostgresStore, astore: AsyncPostgresStore
) -> None:
    """The official store takes a list of labels wherever it takes a namespace (its own tests
    call ``search(["test"])`` and batch a SearchOp with a list prefix): so do ours, with the same
    answers as the tuple; a string is still refused, not read as one-letter labels."""
    store.put(["users", "alice"], "m1", {"text": "likes tea"})
    store.put(("users", "bob"), "m2", {"text": "likes coffee"})
    got = store.get(["users", "alice"], "m1")
    assert got is not None
    assert got.namespace == ("users", "alice")
    assert got.value == {"text": "likes tea"}
    assert [i.key for i in store.search(["users"])] == [i.key for i in store.search(("users",))]
    assert {i.key for i in store.search(["users"])} == {"m1", "m2"}
    (found,) = store.batch([SearchOp(namespace_prefix=["users", "bob"])])  # type: ignore[arg-type]
    assert [i.key for i in found] == ["m2"]  # type: ignore[union-attr]
    assert store.list_namespaces(prefix=["users"]) == [("users", "alice"), ("users", "bob")]  # type: ignore[arg-type]
    assert await astore.aget(["users", "bob"], "m2") is not None
    assert [i.key for i in await astore.asearch(["users", "alice"])] == ["m1"]
    store.delete(["users", "alice"], "m1")
    assert store.get(("users", "alice"), "m1") is None
    with pytest.raises(InvalidNamespaceError, match="tuple \\(or list\\) of strings"):
        store.search("users")  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError, match="'\\.'"):
        store.put(["a.b"], "k", {"a": 1})
