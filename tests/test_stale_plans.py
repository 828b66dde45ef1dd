"""Plans that stay on their index after statistics taken on empty tables (issue 30, point 5).

A fresh deployment analyzed right after setup has reltuples = 0 for every table: the planner then
costs a scan of the table's few pages below any index scan. A session keeps what it planned then:
a prepared statement's generic plan (made at its sixth execution) and a PL/pgSQL function's plans
live until the next ANALYZE or VACUUM of the table, however large the table grows. Each test here
analyzes the empty tables (autovacuum off, so nothing replans behind its back), runs the hot
operations on one pooled connection often enough for every statement to settle on its generic
plan, grows the tables to 20,000 checkpoints in SQL, runs the operations again, and looks at the
plans that session really uses:

- every plan executed after the growth, top-level statements and the statements inside our
  functions, as auto_explain logs them (``log_nested_statements``, sent to the client as NOTICEs):
  no sequential scan of our tables, and the buffers each statement touches stay within a few of
  what it touched on the small tables (a scan would touch hundreds);
- every prepared statement of the session, its cached generic plan shown by ``EXPLAIN EXECUTE``
  under ``plan_cache_mode = force_generic_plan``: no sequential scan of our tables.

Three ways to connect: ``prepare_threshold=0`` (the official docs' pool), from_conn_string's default
(prepared after 5 uses) and ``None`` (nothing prepared: put and get_tuple call the functions).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config
from test_indexes import plan_nodes

from langgraph_pg_saver import PostgresCache, PostgresSaver, PostgresStore, ThreadDeletedError
from langgraph_pg_saver.db import policy
from langgraph_pg_saver.db.pool import DEFAULT_PREPARE_THRESHOLD

TABLES = ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes")
STORE = "pgsaver_store"
CACHE = "pgsaver_cache"
DELETED = "pgsaver_deleted_threads"  # read by every put_writes (migration 0018's check)
GROWN = 20_000  # checkpoints added in SQL after the plans are made
SETTLE = 14  # runs of each operation before the growth: prepared by the client after 5 (the
# default threshold), then 5 custom plans on the server, generic from the next


def seq_scans(plan: Any) -> list[str]:
    return sorted(
        {
            n["Relation Name"]
            for n in plan_nodes(plan)
            if n["Node Type"] == "Seq Scan"
            and n.get("Relation Name") in (*TABLES, STORE, CACHE, DELETED)
        }
    )


def _buffers(plan: dict[str, Any]) -> int:
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


@pytest.fixture
def analyzed_empty(db_dsn: str) -> str:
    """The migrated database, its empty tables analyzed, autovacuum off on them."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        try:
            conn.execute("LOAD 'auto_explain'")
        except psycopg.Error as exc:  # contrib missing: nothing to look at the plans with
            pytest.skip(f"auto_explain is not available: {exc}")
        for table in (*TABLES, STORE, CACHE, DELETED):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
            conn.execute(f"ANALYZE {table}")
        rows = conn.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relname = ANY(%s)",
            ([*TABLES, STORE, CACHE, DELETED],),
        ).fetchall()
    assert all(r[1] == 0 for r in rows), rows  # analyzed (0), not never analyzed (-1)
    return db_dsn


def grow(dsn: str) -> None:
    """GROWN checkpoints in 200 threads of 100, with two channel values each and three pending
    writes, as the saver stores them (sizes of a small graph's rows)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id,"
            " parent_checkpoint_id, type, checkpoint, channel_versions, metadata)"
            " SELECT 'bulk-' || (i / 100), '', lpad(i::text, 10, '0'),"
            " CASE WHEN i %% 100 > 0 THEN lpad((i - 1)::text, 10, '0') END, 'msgpack',"
            " decode(repeat('ab', 300), 'hex'), jsonb_build_object('a', i::text, 'b', i::text),"
            " jsonb_build_object('step', i, 'source', 'loop')"
            " FROM generate_series(1, %s) AS i",
            (GROWN,),
        )
        conn.execute(
            "INSERT INTO pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
            " SELECT 'bulk-' || (i / 100), '', ch, i::text, 'msgpack', decode(repeat('cd', 500), 'hex')"
            " FROM generate_series(1, %s) AS i, unnest(ARRAY['a', 'b']) AS ch",
            (GROWN,),
        )
        conn.execute(
            "INSERT INTO pgsaver_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,"
            " task_path, idx, channel, type, blob)"
            " SELECT 'bulk-' || (i / 100), '', lpad(i::text, 10, '0'), 'task', '', w, 'a',"
            " 'msgpack', decode(repeat('ef', 300), 'hex')"
            " FROM generate_series(1, %s) AS i, generate_series(0, 2) AS w",
            (GROWN,),
        )
        # the records of as many deleted threads (their ids sort apart from the live threads')
        conn.execute(
            "INSERT INTO pgsaver_deleted_threads (thread_id, last_checkpoint_id)"
            " SELECT 'deleted-' || i, lpad(i::text, 10, '0') FROM generate_series(1, %s) AS i",
            (GROWN,),
        )
        pages = conn.execute(
            "SELECT min(pg_relation_size(t::regclass)) / 8192 FROM unnest(%s::text[]) AS t",
            ([*TABLES, DELETED],),
        ).fetchone()
    assert pages is not None
    assert pages[0] > 100  # far past the few pages the plans were made on


class Session:
    """The one connection of a saver's pool, with auto_explain loaded (off until ``watch``)."""

    def __init__(self, saver: PostgresSaver | PostgresStore | PostgresCache[Any]) -> None:
        self.pool = saver._driver.pool
        assert self.pool is not None
        self.notices: list[str] = []
        with self.pool.connection() as conn:
            self.pid = conn.info.backend_pid
            conn.execute("LOAD 'auto_explain'")
            for setting, value in (
                ("log_min_duration", "-1"),
                ("log_nested_statements", "on"),
                ("log_analyze", "on"),
                ("log_buffers", "on"),
                ("log_timing", "off"),
                ("log_format", "json"),
                ("log_level", "notice"),
            ):
                conn.execute(f"SET auto_explain.{setting} = {value}")
            conn.add_notice_handler(lambda d: self.notices.append(d.message_primary or ""))

    def watch(self, on: bool) -> None:
        with self.pool.connection() as conn:
            assert conn.info.backend_pid == self.pid  # one session throughout
            conn.execute(f"SET auto_explain.log_min_duration = {0 if on else -1}")

    def plans(self) -> list[tuple[str, dict[str, Any]]]:
        """(query text, plan) of every statement logged since the last call."""
        out = []
        for message in self.notices:
            if "{" not in message:
                continue
            logged = json.loads(message[message.index("{") :])
            out.append((" ".join(logged["Query Text"].split()), logged))
        self.notices.clear()
        return out

    def generic_plans(self) -> dict[str, tuple[int, list[str]]]:
        """Each prepared statement's generic-plan count and the scans of its cached generic plan."""
        out: dict[str, tuple[int, list[str]]] = {}
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT name, statement, parameter_types::text[], generic_plans"
                " FROM pg_prepared_statements"
            ).fetchall()
            conn.execute("SET plan_cache_mode = force_generic_plan")
            try:
                for name, statement, types, generic in rows:
                    if "pg_prepared_statements" in statement:
                        continue
                    args = ", ".join(f"NULL::{t}" for t in types)
                    explain = f"EXPLAIN (FORMAT JSON) EXECUTE {name}" + (
                        f"({args})" if types else ""
                    )
                    row = conn.execute(explain.encode()).fetchone()
                    assert row is not None
                    out[" ".join(statement.split())] = (generic, seq_scans(row[0]))
            finally:
                conn.execute("RESET plan_cache_mode")
        return out


def hot_path(saver: PostgresSaver, thread: str, runs: int) -> None:
    """What a running graph sends: put (after the first, with a parent), put_writes, get_tuple of
    the latest and by id, DeltaChannel history."""
    latest = config(thread)
    stored = latest
    for i in range(runs):
        cp = checkpoint({"a": f"v{i}", "b": [i]}, {"a": str(i + 1), "b": str(i + 1)})
        cp["v"] = 4  # LangGraph's format (older ones read their parent's sends: pending_sends)
        stored = saver.put(stored, cp, {"step": i, "source": "loop"}, {"a": i + 1, "b": i + 1})
        saver.put_writes(stored, [("a", i), ("b", i)], f"task-{i}")
        saver.put_writes(stored, [("__interrupt__", i)], f"task-{i}")  # a special write: upsert
        assert saver.get_tuple(latest) is not None
        assert saver.get_tuple(stored) is not None
        assert saver.get_delta_channel_history(config=stored, channels=["a"])
        assert saver.get_delta_channel_history(config=latest, channels=["a", "b"])


def refused(saver: PostgresSaver, thread: str) -> None:
    """The thread deleted while a run goes on: the run's next put and put_writes are refused
    (migration 0018; the record's reads, and the refusal's cleanup, on the grown tables)."""
    last = saver.get_tuple(config(thread))
    assert last is not None
    saver.delete_thread(thread)
    late = checkpoint({"a": "late", "b": [0]}, {"a": "900", "b": "900"})
    with pytest.raises(ThreadDeletedError):
        saver.put(last.config, late, {"step": 99}, {"a": 900, "b": 900})
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(last.config, [("a", "late")], "late-task")


@pytest.fixture(
    params=[0, DEFAULT_PREPARE_THRESHOLD, None], ids=["prepare-0", "default", "unprepared"]
)
def session(analyzed_empty: str, request: pytest.FixtureRequest) -> Iterator[Session]:
    with PostgresSaver.from_conn_string(
        analyzed_empty, min_size=1, max_size=1, prepare_threshold=request.param
    ) as saver:
        s = Session(saver)
        s.saver = saver  # type: ignore[attr-defined]
        s.threshold = request.param  # type: ignore[attr-defined]
        yield s


def test_the_hot_path_stays_on_its_indexes_after_statistics_of_empty_tables(
    session: Session, analyzed_empty: str
) -> None:
    saver: PostgresSaver = session.saver  # type: ignore[attr-defined]
    # on the small tables: what each statement touches there, and the plans fixed
    session.watch(True)
    hot_path(saver, "small", SETTLE)
    session.watch(False)
    small: dict[str, int] = {}
    for query, plan in session.plans():
        small[query] = max(small.get(query, 0), _buffers(plan))
    if session.threshold is not None:  # type: ignore[attr-defined]
        settled = session.generic_plans()
        put = [g for q, (g, _) in settled.items() if "allowed AS" in q]
        assert put, settled
        assert put[0] > 0, settled  # the put's generic plan was made on the small tables

    grow(analyzed_empty)
    session.watch(True)
    hot_path(saver, "small", 3)  # a thread begun before the growth
    hot_path(saver, "after", 3)
    refused(saver, "small")  # a delete, then a late run's writes: the records read by key
    session.watch(False)
    scans: dict[str, list[str]] = {}
    grew: dict[str, tuple[int, int]] = {}
    seen = 0
    for query, plan in session.plans():
        seen += 1
        if seq_scans(plan):
            scans[query[:120]] = seq_scans(plan)
        before = small.get(query)
        # a statement run only now (the first put of a thread) has no small-table figure
        if before is not None and _buffers(plan) > before + 12:
            grew[query[:120]] = (before, _buffers(plan))
    assert seen >= 6 * 5, seen  # the operations' statements, and those inside the functions
    assert not scans, f"sequential scans after the growth: {scans}"
    assert not grew, f"buffers per call grew with the table (small, grown): {grew}"
    if session.threshold is not None:  # type: ignore[attr-defined]
        generic = {q[:120]: s for q, (g, s) in session.generic_plans().items() if s}
        assert not generic, f"cached generic plans that scan: {generic}"


def test_delta_history_reads_the_same_through_the_function(db_dsn: str) -> None:
    """Migration 0011's pgsaver_delta_history (as 0012 replaced it) holds delta_history: for every
    checkpoint of DeltaChannel threads (with subgraph namespaces too), by id and as the latest,
    the function and the statement give the same history."""
    from graphs import delta_chat, with_subgraph

    from langgraph_pg_saver.checkpoint import history as _history

    with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=0) as saver:
        for builder, thread, given, turns in (
            (delta_chat, "delta", {"messages": ["hi"]}, 6),
            (with_subgraph, "sub", {"foo": "x"}, 2),
        ):
            graph = builder().compile(checkpointer=saver)
            for _ in range(turns):
                graph.invoke(given, {"configurable": {"thread_id": thread}})
        configs = [t.config for t in saver.list(None)]
        targets = [
            *configs,
            *({"configurable": dict(c["configurable"], checkpoint_id=None)} for c in configs[:3]),
        ]
        assert len(configs) > 10
        for target in targets:
            if target["configurable"].get("checkpoint_id") is None:
                target = {
                    "configurable": {
                        k: v for k, v in target["configurable"].items() if k != "checkpoint_id"
                    }
                }
            got = {
                function: saver._driver.drive(
                    _history.delta_history(
                        saver._q, saver.serde, target, ["messages", "foo", "x"], function
                    )
                )
                for function in (True, False)
            }
            assert got[True] == got[False], target
        assert any(h.get("seed") is not None or h["writes"] for h in got[True].values())


def list_thread(saver: PostgresSaver, thread: str) -> None:
    """What a thread's list() and get_state_history send: its namespace (read_tuples), every
    namespace (read_tuples_per_ns), before a checkpoint, a metadata filter (list_keys, then
    read_tuples_keys), across threads with a limit (read_tuples_recent, list_keys_recent)."""
    latest = saver.get_tuple(config(thread))
    assert latest is not None
    whole = {"configurable": {"thread_id": thread}}
    assert list(saver.list(config(thread), limit=2))
    assert list(saver.list(whole, limit=2))
    assert list(saver.list(whole))
    assert list(saver.list(whole, before=latest.config, limit=3))
    assert list(saver.list(whole, filter={"source": "loop"}, limit=2))
    assert list(saver.list(None, limit=2))
    assert list(saver.list(None, filter={"source": "loop"}, limit=2))


def _settle_grow_and_check(
    session: Session,
    dsn: str,
    run: Any,
    grow_tables: Any,
    per_call: bool = True,
    walks: str = "\0",
) -> None:
    """The hot path test's three checks, for ``run(label)``: on the small tables, then after
    ``grow_tables(dsn)``; the buffers per call only with ``per_call``, and not for statements
    that begin with ``walks``."""
    session.watch(True)
    for _ in range(SETTLE):
        run("small")
    session.watch(False)
    small: dict[str, int] = {}
    for query, plan in session.plans():
        small[query] = max(small.get(query, 0), _buffers(plan))
    grow_tables(dsn)
    session.watch(True)
    for _ in range(3):
        run("after")
    session.watch(False)
    scans: dict[str, list[str]] = {}
    grew: dict[str, tuple[int, int]] = {}
    seen = 0
    for query, plan in session.plans():
        seen += 1
        if seq_scans(plan):
            scans[query[:120]] = seq_scans(plan)
        before = small.get(query)
        if (
            per_call
            and not query.startswith(walks)
            and before is not None
            and _buffers(plan) > before + 12
        ):
            grew[query[:120]] = (before, _buffers(plan))
    assert seen >= 3 * 3, seen
    assert not scans, f"sequential scans after the growth: {scans}"
    assert not grew, f"buffers per call grew with the table (small, grown): {grew}"
    if session.threshold is not None:  # type: ignore[attr-defined]
        generic = {q[:120]: s for q, (g, s) in session.generic_plans().items() if s}
        assert not generic, f"cached generic plans that scan: {generic}"


def test_list_of_a_thread_stays_on_its_indexes_after_statistics_of_empty_tables(
    session: Session, analyzed_empty: str
) -> None:
    """list() within a thread (and across threads' first phase): its statements are prepared
    only once the tables are large (db/sql.PLANNED_BY_STATS); until then planned per call."""
    saver: PostgresSaver = session.saver  # type: ignore[attr-defined]
    hot_path(saver, "small", 3)
    _settle_grow_and_check(
        session, analyzed_empty, lambda _: list_thread(saver, "small"), grow, per_call=False
    )
    # within the thread, per call: the same buffers on the grown tables
    session.watch(True)
    list_thread(saver, "small")
    session.watch(False)
    session.plans()


def grow_store(dsn: str) -> None:
    """20,000 items in 200 namespaces of the store's table, as the store writes them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_store (prefix, key, value, ttl_minutes, expires_at)"
            " SELECT 'bulk.' || (i %% 200), 'k' || i,"
            " jsonb_build_object('text', repeat('x', 200), 'i', i), 60, now() + interval '1 hour'"
            " FROM generate_series(1, %s) AS i",
            (GROWN,),
        )
        row = conn.execute("SELECT pg_relation_size('pgsaver_store') / 8192").fetchone()
    assert row is not None
    assert row[0] > 100


def store_ops(store: PostgresStore, label: str) -> None:
    """The store's reads and writes of one namespace: put, get (with the TTL refresh), search,
    search with a filter, list_namespaces below a prefix, delete."""
    ns = ("user", label)
    store.put(ns, "a", {"text": "hello", "n": 1})
    store.put(ns, "b", {"text": "world", "n": 2})
    assert store.get(ns, "a") is not None
    assert store.search(ns, limit=5)
    assert store.search(ns, filter={"n": 2}, limit=5)
    assert store.list_namespaces(prefix=("user",), limit=10)
    store.delete(ns, "b")


@pytest.fixture(
    params=[0, DEFAULT_PREPARE_THRESHOLD, None], ids=["prepare-0", "default", "unprepared"]
)
def store_session(analyzed_empty: str, request: pytest.FixtureRequest) -> Iterator[Session]:
    with PostgresStore.from_conn_string(
        analyzed_empty,
        pool_config={"min_size": 1, "max_size": 1},
        prepare_threshold=request.param,
        ttl={"default_ttl": 60, "refresh_on_read": True},
    ) as store:
        s = Session(store)
        s.store = store  # type: ignore[attr-defined]
        s.threshold = request.param  # type: ignore[attr-defined]
        yield s


def test_the_store_stays_on_its_indexes_after_statistics_of_empty_tables(
    store_session: Session, analyzed_empty: str
) -> None:
    store: PostgresStore = store_session.store  # type: ignore[attr-defined]
    # list_namespaces' walk (store_prefixes) reads the index entries of every namespace that
    # sorts between the prefix's first match and its last, matching or not: more of them after
    # the growth, on its index all the same
    _settle_grow_and_check(
        store_session,
        analyzed_empty,
        lambda label: store_ops(store, label),
        grow_store,
        walks="WITH RECURSIVE p AS",
    )


def grow_cache(dsn: str) -> None:
    """20,000 node results in 20 namespaces of the cache's table (well past TRUSTED_CACHE_PAGES),
    a tenth of them expired."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_cache (ns, key, type, blob, expires_at)"
            " SELECT '[\"bulk\", \"' || (i %% 20) || '\"]', 'k' || i, 'msgpack',"
            " decode(repeat('ab', 300), 'hex'),"
            " CASE WHEN i %% 10 = 0 THEN now() - interval '1 hour' ELSE now() + interval '1 hour' END"
            " FROM generate_series(1, %s) AS i",
            (GROWN,),
        )
        row = conn.execute("SELECT pg_relation_size('pgsaver_cache') / 8192").fetchone()
    assert row is not None
    assert row[0] > 2 * policy.TRUSTED_CACHE_PAGES


def cache_ops(cache: PostgresCache[Any], label: str) -> None:
    """What a graph with cached nodes sends (one key and several, set and get), a clear of one
    namespace and a sweep."""
    ns, other = ("node", label), ("node", label, "sub")
    cache.set({(ns, "a"): ({"out": 1}, 60)})
    cache.set({(ns, "b"): ({"out": 2}, 60), (other, "c"): ({"out": 3}, None)})
    assert cache.get([(ns, "a")])
    assert len(cache.get([(ns, "a"), (ns, "b"), (other, "c")])) == 3
    cache.clear([other])
    cache.sweep()


@pytest.fixture(
    params=[0, DEFAULT_PREPARE_THRESHOLD, None], ids=["prepare-0", "default", "unprepared"]
)
def cache_session(analyzed_empty: str, request: pytest.FixtureRequest) -> Iterator[Session]:
    with PostgresCache[Any].from_conn_string(
        analyzed_empty, min_size=1, max_size=1, prepare_threshold=request.param
    ) as cache:
        s = Session(cache)
        s.cache = cache  # type: ignore[attr-defined]
        s.threshold = request.param  # type: ignore[attr-defined]
        yield s


def test_the_node_cache_stays_on_its_indexes_after_statistics_of_empty_tables(
    cache_session: Session, analyzed_empty: str
) -> None:
    """The cache's get is prepared only once its table is large (a generic plan made on the
    analyzed empty table scans it: docs/performance.md, "Statistics of empty tables"); its clear
    and sweep are planned per call. After the growth, no statement scans the table, and none
    touches more buffers than it did on the small one (the sweep's expired entries aside: it
    deletes up to its batch of them)."""
    cache: PostgresCache[Any] = cache_session.cache  # type: ignore[attr-defined]
    _settle_grow_and_check(
        cache_session,
        analyzed_empty,
        lambda label: cache_ops(cache, label),
        grow_cache,
        walks="WITH lock AS MATERIALIZED",
    )


def _prepared(session: Session) -> list[str]:
    with session.pool.connection() as conn:
        rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    return [" ".join(str(r[0]).split()) for r in rows]


def test_a_connection_prepares_once_the_tables_are_large(
    analyzed_empty: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On small tables list() and get_tuple are not prepared (get_tuple calls its function);
    once the tables are large, the connection's next check (after STATS_RECHECK) lets them be
    prepared, and their generic plans, made on the large tables, are on the indexes."""
    monkeypatch.setattr(policy, "STATS_RECHECK", 3600.0)  # no recheck until the test says so
    with PostgresSaver.from_conn_string(
        analyzed_empty, min_size=1, max_size=1, prepare_threshold=0
    ) as saver:
        session = Session(saver)
        hot_path(saver, "small", 3)
        list_thread(saver, "small")
        small = _prepared(session)
        assert any("pgsaver_get_tuple(" in q for q in small), small
        assert not any("pgsaver_writes" in q and "pgsaver_blobs" in q for q in small), small
        grow(analyzed_empty)
        with psycopg.connect(analyzed_empty, autocommit=True) as conn:
            conn.execute("ANALYZE")
        list_thread(saver, "small")
        assert saver.get_tuple(config("small")) is not None
        # checked less than STATS_RECHECK seconds ago: still planned per call
        assert _prepared(session) == small
        monkeypatch.setattr(policy, "STATS_RECHECK", 0.0)
        list_thread(saver, "small")
        assert saver.get_tuple(config("small")) is not None
        grown = _prepared(session)
        new = [q for q in grown if q not in small]
        # read_tuples, read_tuples_per_ns, list_keys, read_tuples_keys, the walk, get_tuple
        assert len(new) >= 6, new
        get_tuple = " ".join(saver._q["get_tuple"].decode().split())[:60]
        assert any(q.startswith(get_tuple) for q in new), (get_tuple, new)
        generic = {q[:120]: s for q, (g, s) in session.generic_plans().items() if s}
    assert not generic, f"cached generic plans that scan: {generic}"


def test_the_check_is_per_schema(db_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pool serving savers of two schemas: what a connection found about one schema's tables
    decides nothing for the other's (each asks once on that connection)."""
    from psycopg_pool import ConnectionPool

    with ConnectionPool(
        db_dsn, min_size=1, max_size=1, kwargs={"autocommit": True, "prepare_threshold": 0}
    ) as pool:
        monkeypatch.setattr(policy, "STATS_RECHECK", 0.0)  # a connection asks at every use
        other = PostgresSaver(pool, schema="other")
        other.setup()  # the first check: "other"'s tables do not exist yet
        public = PostgresSaver(pool)
        monkeypatch.setattr(policy, "TRUSTED_PAGES", 0)  # "other"'s tables count as large
        hot_path(other, "t", 2)
        list_thread(other, "t")
        monkeypatch.setattr(policy, "TRUSTED_PAGES", 10**9)  # public's as small
        hot_path(public, "t", 2)
        list_thread(public, "t")
        with pool.connection() as conn:
            rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    lists = [str(r[0]) for r in rows if "ORDER BY" in str(r[0]) and "pgsaver_writes" in str(r[0])]
    assert any('"other".pgsaver_checkpoints' in q for q in lists), lists
    assert not any('"public".pgsaver_checkpoints' in q for q in lists), lists
