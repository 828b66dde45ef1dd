"""list() across namespaces and with shared values, and which statements become prepared statements."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config
from langgraph.checkpoint.base.id import uuid6
from psycopg_pool import ConnectionPool

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver
from langgraph_pg_saver.db import policy


def _history(saver: PostgresSaver, thread: str, namespaces: list[str], n: int) -> list[str]:
    """n checkpoints spread at random over namespaces (ids increase in put order); returns ids."""
    rng = random.Random(n)
    parents: dict[str, str | None] = {ns: None for ns in namespaces}
    ids = []
    for step in range(n):
        ns = rng.choice(namespaces)
        cp = checkpoint({"v": f"{ns}-{step}", "same": "shared"}, {"v": step + 1, "same": 1})
        cp["id"] = str(uuid6(clock_seq=step))
        cfg = config(thread, parents[ns], ns=ns)
        new = {"v": step + 1} if parents[ns] else {"v": step + 1, "same": 1}
        stored = saver.put(cfg, cp, {"step": step, "even": step % 2 == 0}, new)
        parents[ns] = stored["configurable"]["checkpoint_id"]
        ids.append(cp["id"])
    return ids


def _ids(tuples: Any) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in tuples]


def test_list_of_a_thread_without_namespace_merges_every_namespace(saver: PostgresSaver) -> None:
    namespaces = ["", "child:1", "child:2|grand:3"]
    ids = _history(saver, "t", namespaces, 60)
    _history(saver, "other", namespaces, 10)  # a neighbour thread never leaks in
    newest_first = sorted(ids, reverse=True)
    thread = {"configurable": {"thread_id": "t"}}
    assert _ids(saver.list(thread)) == newest_first
    for limit in (0, 1, 7, 59, 60, 100):
        assert _ids(saver.list(thread, limit=limit)) == newest_first[:limit]
    before = {"configurable": {"checkpoint_id": newest_first[10]}}
    assert _ids(saver.list(thread, before=before, limit=5)) == newest_first[11:16]
    even = [t for t in saver.list(thread, filter={"even": True}, limit=4)]
    assert [t.metadata["step"] % 2 for t in even] == [0, 0, 0, 0]
    assert _ids(even) == [i for i in newest_first if i in set(_ids(even))][:4]
    for t in saver.list(thread, limit=10):
        ns = t.config["configurable"]["checkpoint_ns"]
        step = t.metadata["step"]
        assert t.checkpoint["channel_values"] == {"v": f"{ns}-{step}", "same": "shared"}
    assert list(saver.list({"configurable": {"thread_id": "missing"}})) == []


def test_listed_checkpoints_do_not_share_value_objects(saver: PostgresSaver) -> None:
    cfg = config("t")
    shared = {"items": ["a", "b"], "map": {"k": [1]}, "text": "same", "blob": b"\x00b"}
    for step in range(3):
        cp = checkpoint({**shared, "step": step}, {**dict.fromkeys(shared, 1), "step": step + 1})
        new = dict.fromkeys(shared, 1) if step == 0 else {}
        cfg = saver.put(cfg, cp, {}, {**new, "step": step + 1})
    first, second, third = saver.list(config("t"))
    assert first.checkpoint["channel_values"]["items"] == ["a", "b"]
    first.checkpoint["channel_values"]["items"].append("mutated")
    first.checkpoint["channel_values"]["map"]["k"].append(2)
    for other in (second, third):
        assert other.checkpoint["channel_values"]["items"] == ["a", "b"]
        assert other.checkpoint["channel_values"]["map"] == {"k": [1]}
        # immutable values may be one object: nothing can change them
        assert other.checkpoint["channel_values"]["text"] == "same"
        assert other.checkpoint["channel_values"]["blob"] == b"\x00b"
    assert [t.checkpoint["channel_values"]["step"] for t in (first, second, third)] == [2, 1, 0]


def _prepared(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT statement FROM pg_prepared_statements", prepare=False).fetchall()
    return [r[0] for r in rows]


def _exercise(saver: PostgresSaver, thread: str) -> None:
    cfg = config(thread)
    for step in range(8):
        cp = checkpoint({"v": step}, {"v": step + 1})
        cfg = saver.put(cfg, cp, {"step": step}, {"v": step + 1})
        saver.put_writes(cfg, [("v", step)], f"task-{step}")
        saver.get_tuple(cfg)
        saver.get_tuple(config(thread))
        list(saver.list(config(thread), limit=3))
    saver.prune([thread], strategy="keep_latest")
    saver.copy_thread(thread, thread + "-copy")
    saver.retention(keep_last=1, idle_for=timedelta(days=1), thread_ids=[thread])
    saver.delete_for_runs(["no-such-run"])
    saver.setup()


def test_hot_statements_are_prepared_and_lifecycle_statements_never(db_dsn: str) -> None:
    # a pool set up as the official saver's users do: every statement prepared on first use
    kwargs = {"autocommit": True, "prepare_threshold": 0}
    with ConnectionPool(db_dsn, min_size=1, max_size=1, kwargs=kwargs) as pool:
        saver = PostgresSaver(pool)
        _exercise(saver, "t")
        with pool.connection() as conn:
            prepared = _prepared(conn)
    joined = "\n".join(prepared)
    assert "pgsaver_checkpoints" in joined, prepared
    assert "pgsaver_writes" in joined, prepared
    for marker in ("pg_advisory_xact_lock(", "pgsaver_migrations", "DELETE", "lock_timeout"):
        assert marker not in joined, (marker, prepared)


def test_prepare_threshold_none_never_prepares(db_dsn: str) -> None:
    """What a transaction-mode pooler without prepared-statement support needs."""
    with PostgresSaver.from_conn_string(
        db_dsn, min_size=1, max_size=1, prepare_threshold=None
    ) as saver:
        _exercise(saver, "t")
        assert saver._pool is not None
        with saver._pool.connection() as conn:
            assert _prepared(conn) == []


def test_from_conn_string_prepares_by_default(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, min_size=1, max_size=1) as saver:
        _exercise(saver, "t")
        assert saver._pool is not None
        with saver._pool.connection() as conn:
            assert conn.prepare_threshold == 5
            assert _prepared(conn) != []


async def test_async_from_conn_string_prepare_threshold(db_dsn: str) -> None:
    for threshold, expected in ((None, None), (2, 2)):
        async with AsyncPostgresSaver.from_conn_string(
            db_dsn, min_size=1, max_size=1, prepare_threshold=threshold
        ) as saver:
            assert saver._pool is not None
            async with saver._pool.connection() as conn:
                assert conn.prepare_threshold == expected
    async with AsyncPostgresSaver.from_conn_string(db_dsn, min_size=1, max_size=1) as saver:
        assert saver._pool is not None
        async with saver._pool.connection() as conn:
            assert conn.prepare_threshold == 5


@pytest.mark.parametrize("plan_cache_mode", ["force_generic_plan", "force_custom_plan"])
def test_results_do_not_depend_on_generic_or_custom_plans(
    db_dsn: str, plan_cache_mode: str
) -> None:
    options = {"options": f"-c plan_cache_mode={plan_cache_mode}"}
    with PostgresSaver.from_conn_string(
        db_dsn, min_size=1, max_size=1, prepare_threshold=0, connect_kwargs=options
    ) as saver:
        ids = _history(saver, "t", ["", "child:1"], 30)
        for _ in range(3):  # prepared from the first use on; generic or custom as configured
            assert (
                _ids(saver.list({"configurable": {"thread_id": "t"}}, limit=5))
                == sorted(ids, reverse=True)[:5]
            )
            tup = saver.get_tuple(config("t"))
            assert tup is not None
            assert tup.metadata["step"] in range(30)


def test_hot_statements_settle_on_one_generic_plan(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepared statement helps only if Postgres stops planning it: after its five custom plans it
    must choose the generic one. delta_history once never did (the channel array's length made
    each custom plan look cheaper) and was planned anew on every call."""
    # tables this small are planned per call (db/sql.PLANNED_BY_STATS): count them as large
    monkeypatch.setattr(policy, "TRUSTED_PAGES", 0)
    with psycopg.connect(db_dsn, autocommit=True, prepare_threshold=0) as conn:
        if conn.info.server_version < 140000:
            pytest.skip("pg_prepared_statements counts plans from PostgreSQL 14")
        saver = PostgresSaver(conn)
        cfg = config("t")
        for step in range(20):
            cp = checkpoint({"v": step, "w": [step]}, {"v": step + 1, "w": step + 1})
            cfg = saver.put(cfg, cp, {"step": step, "user": f"u{step % 3}"}, {"v": step + 1})
            saver.put_writes(cfg, [("v", step), ("w", [step])], f"task-{step}")
        for _ in range(12):
            saver.get_tuple(cfg)
            saver.get_tuple(config("t"))
            list(saver.list(config("t"), limit=5))
            list(saver.list({"configurable": {"thread_id": "t"}}, limit=5))
            list(saver.list(None, filter={"user": "u1"}))
            saver.get_delta_channel_history(config=cfg, channels=["v"])
            saver.get_delta_channel_history(config=config("t"), channels=["v", "w"])
            saver.delete_thread("no-such-thread")
        rows = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements",
            prepare=False,
        ).fetchall()
    hot = [r for r in rows if "pgsaver_" in r[0]]
    # put_new, put_writes_new, the calls of pgsaver_get_tuple and pgsaver_delta_history (each for
    # both forms), list's two, list(None)'s walk; delete_thread is planned per call
    assert len(hot) >= 7, [r[0][:60] for r in rows]
    replanned = [" ".join(r[0].split())[:80] for r in hot if r[1] == 0]
    assert not replanned, replanned


def test_reads_settle_on_a_generic_plan_when_statistics_favour_custom_plans(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Postgres keeps planning a prepared statement anew while its custom plans look cheaper than
    the generic one. A value the planner can see (a thread's row count in the statistics, a limit of
    20) made every custom plan of list() look cheaper on a table of a few long threads: a plan on
    every call. The reads hide such values, so custom and generic plans cost alike."""
    monkeypatch.setattr(policy, "TRUSTED_PAGES", 0)  # as above
    with psycopg.connect(db_dsn, autocommit=True, prepare_threshold=0) as conn:
        if conn.info.server_version < 140000:
            pytest.skip("pg_prepared_statements counts plans from PostgreSQL 14")
        saver = PostgresSaver(conn)
        for thread, n in (("long", 400), ("mid", 60), ("short", 3)):
            cfg = config(thread)
            for step in range(n):
                cp = checkpoint({"v": step}, {"v": step + 1})
                cfg = saver.put(cfg, cp, {"step": step}, {"v": step + 1})
        conn.execute("ANALYZE")
        for _ in range(12):
            for thread in ("long", "short"):
                list(saver.list({"configurable": {"thread_id": thread}}, limit=20))
                list(saver.list(config(thread), limit=20))
                list(saver.list(config(thread), before=cfg, limit=20))
                saver.get_tuple(config(thread))
                list(saver.list(None, filter={"step": 2}, limit=20))
        rows = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements",
            prepare=False,
        ).fetchall()
    hot = [r for r in rows if "pgsaver_" in r[0] and "SELECT" in r[0]]
    assert len(hot) >= 4, [r[0][:60] for r in rows]
    replanned = [(" ".join(r[0].split())[:80], r[2]) for r in hot if r[2] > 5]
    assert not replanned, replanned
