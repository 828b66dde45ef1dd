"""One-thread operations use indexes: EXPLAIN on a seeded, analyzed table shows no sequential scan of
our tables (DESIGN: tables of hundreds of millions of rows)."""

from __future__ import annotations

import json
import random
from typing import Any

import psycopg
import pytest
from histories import build

from langgraph_pg_saver import PostgresSaver

TABLES = ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes")


def plan_nodes(plan: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "Node Type" in node:
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(plan)
    return found


def seq_scans(plan: Any) -> list[str]:
    return [
        n["Relation Name"]
        for n in plan_nodes(plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in TABLES
    ]


@pytest.fixture
def seeded(db_dsn: str) -> tuple[str, PostgresSaver, Any]:
    saver = PostgresSaver.from_conn_string(db_dsn, max_size=2).open()
    rng = random.Random(1)
    target = None
    for i in range(150):
        hist = build(saver, f"thread-{i:04d}", 40, rng, fork_prob=0.0)
        if i == 75:
            target = hist
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgsaver_checkpoints SET run_id = 'run-' || checkpoint_id")
        conn.execute("UPDATE pgsaver_writes SET run_id = 'run-' || checkpoint_id")
        conn.execute("ANALYZE")
    yield db_dsn, saver, target
    saver.close()


@pytest.mark.slow
def test_one_thread_operations_use_indexes(seeded: tuple[str, PostgresSaver, Any]) -> None:
    dsn, saver, hist = seeded
    q = saver._q
    tid = hist.thread_id
    last = hist.nodes[-1].checkpoint_id
    cases: dict[str, tuple[bytes, dict[str, Any]]] = {
        "get_tuple latest": (
            q.get_tuple(("thread", "ns")),
            {"thread_id": tid, "checkpoint_ns": ""},
        ),
        "get_tuple by id": (
            q.get_tuple(("thread", "ns", "id")),
            {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": last},
        ),
        "list by id": (
            q.read_tuples(("thread", "ns", "id")),
            {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": last, "limit": 1},
        ),
        "list thread limit 20": (
            q.read_tuples(("thread", "ns", "before")),
            {"thread_id": tid, "checkpoint_ns": "", "before": last, "limit": 20},
        ),
        "list thread without namespace": (
            q.read_tuples(("thread", "before")),
            {"thread_id": tid, "before": last, "limit": 20},
        ),
        "delta history": (
            q.render("delta_history", where=("thread", "ns", "id")),
            {
                "thread_id": tid,
                "checkpoint_ns": "",
                "checkpoint_id": last,
                "channels": ["a", "b", "c"],
            },
        ),
        "prune keep latest batch": (
            q["prune_keep_last_batch"],
            {"thread_ids": [tid], "keep_last": 1, "batch": 1000},
        ),
        "prune plan": (q["prune_keep_last_plan"], {"thread_ids": [tid], "keep_last": 1}),
        "prune blobs": (q["prune_blobs"], {"thread_ids": [tid]}),
        "copy target used": (q["copy_target_used"], {"target": "new-thread"}),
        **{
            f"copy {table} batch{' after' if after else ''}": (
                q[f"copy_{table}_batch"],
                {"source": tid, "target": "new-thread", "batch": 1000, "after": after},
            )
            for table, key in (
                ("blobs", ["", "a", "1"]),
                ("writes", ["", "1", "task", "0"]),
                ("checkpoints", ["", "1"]),
            )
            for after in (None, key)
        },
        **{
            f"clear {table} batch{' after' if after else ''}": (
                q[f"clear_{table}_batch"],
                {"target": tid, "batch": 1000, "after": after},
            )
            for table, key in (
                ("blobs", ["", "a", "1"]),
                ("writes", ["", "1", "task", "0"]),
                ("checkpoints", ["", "1"]),
            )
            for after in (None, key)
        },
        "delete thread": (q["delete_thread"], {"thread_id": tid}),
        "delete threads": (q["delete_threads"], {"thread_ids": [tid], "idle_for": None}),
        "threads of runs": (q["runs_threads"], {"run_ids": [f"run-{last}"]}),
        "lock threads of runs": (q["lock_threads_of_runs"], {"run_ids": [f"run-{last}"]}),
        "delete for runs": (
            q["delete_for_runs"],
            {"run_ids": [f"run-{last}"], "thread_ids": [tid]},
        ),
        "delete for runs plan": (
            q["delete_for_runs_plan"],
            {"run_ids": [f"run-{last}"], "thread_ids": [tid]},
        ),
        "threads after": (q["threads_after"], {"after": tid, "limit": 100}),
        "idle threads": (q["idle_threads"], {"thread_ids": [tid], "idle_for": "1 day"}),
        "delete idle threads": (q["delete_threads"], {"thread_ids": [tid], "idle_for": "1 day"}),
    }
    bad: dict[str, list[str]] = {}
    with psycopg.connect(dsn) as conn:
        for name, (query, params) in cases.items():
            row = conn.execute(b"EXPLAIN (FORMAT JSON) " + query, params).fetchone()
            assert row is not None
            plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
            scans = seq_scans(plan)
            if scans:
                bad[name] = scans
        # the per-channel lookup of _x_stores_k
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) SELECT 1 FROM pgsaver_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = ''"
            " AND b.channel = 'a' AND b.version = 'x' AND b.type <> 'empty'",
            (tid,),
        ).fetchone()
        assert row is not None
        if seq_scans(row[0]):
            bad["_x_stores_k lookup"] = seq_scans(row[0])
    assert not bad, f"sequential scans: {bad}"


@pytest.mark.parametrize("plan_mode", ["auto", "force_generic_plan"])
def test_reads_stay_on_indexes_when_statistics_are_stale(db_dsn: str, plan_mode: str) -> None:
    """Tables never analyzed (autovacuum off), of the size where the planner once preferred to hash
    the whole writes table for list(None, filter): get_tuple and list must look values and writes
    up by key, and stay under jit_above_cost (JIT compiling costs more than the statement)."""
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        q = saver._q
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        conn.execute(
            "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type,"
            " checkpoint, channel_versions, metadata)"
            " SELECT 't-' || (i % 500), '', 'c-' || lpad(i::text, 6, '0'), 'msgpack', '\\x80',"
            " jsonb_build_object('a', i::text, 'b', '1', 'c', '1'),"
            " jsonb_build_object('user', 'u-' || (i % 100), 'step', i)"
            " FROM generate_series(1, 4000) AS i"
        )
        conn.execute(
            "INSERT INTO pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)"
            " SELECT thread_id, '', 'a', channel_versions->>'a', 'msgpack', '\\x80'"
            " FROM pgsaver_checkpoints"
        )
        conn.execute(
            "INSERT INTO pgsaver_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,"
            " task_path, idx, channel, type, blob)"
            " SELECT c.thread_id, '', c.checkpoint_id, 'task', '', w, 'a', 'msgpack', '\\x80'"
            " FROM pgsaver_checkpoints AS c, generate_series(0, 1) AS w"
        )
        cases: dict[str, tuple[bytes, dict[str, Any]]] = {
            "get_tuple latest": (
                q.get_tuple(("thread", "ns")),
                {"thread_id": "t-7", "checkpoint_ns": ""},
            ),
            "get_tuple by id": (
                q.get_tuple(("thread", "ns", "id")),
                {"thread_id": "t-7", "checkpoint_ns": "", "checkpoint_id": "c-000007"},
            ),
            "list by id": (
                q.read_tuples(("thread", "ns", "id")),
                {"thread_id": "t-7", "checkpoint_ns": "", "checkpoint_id": "c-000007", "limit": 1},
            ),
            "list thread limit 20": (
                q.read_tuples(("thread", "ns")),
                {"thread_id": "t-7", "checkpoint_ns": "", "limit": 20},
            ),
            "list thread before": (
                q.read_tuples(("thread", "ns", "before")),
                {"thread_id": "t-7", "checkpoint_ns": "", "before": "c-002000", "limit": 20},
            ),
            "list thread without namespace": (
                q.read_tuples(("thread",)),
                {"thread_id": "t-7", "limit": 20},
            ),
            "list filter": (
                q.read_tuples(("filter",)),
                {"filter": '{"user": "u-7", "step": 7}', "limit": None},
            ),
        }
        if plan_mode != "auto":
            conn.execute(f"SET plan_cache_mode = {plan_mode}")
        bad: dict[str, list[str]] = {}
        for name, (query, params) in cases.items():
            # prepared, so a generic plan is what EXPLAIN shows under force_generic_plan
            row = conn.execute(b"EXPLAIN (FORMAT JSON) " + query, params, prepare=True).fetchone()
            assert row is not None
            plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
            nodes = plan_nodes(plan)
            problems = [
                f"{n['Node Type']} on {n['Relation Name']}"
                for n in nodes
                if n["Node Type"] == "Seq Scan"
                and n.get("Relation Name") in TABLES
                # choosing a filter's checkpoints may scan a table this small (no GIN needed)
                and "metadata @>" not in n.get("Filter", "")
            ]
            problems += [
                f"Hash Join on {n['Hash Cond']}" for n in nodes if n["Node Type"] == "Hash Join"
            ]
            cost = plan[0]["Plan"]["Total Cost"]
            if cost >= 100_000:
                problems.append(f"total cost {cost} crosses jit_above_cost")
            if problems:
                bad[name] = problems
        assert not bad, bad


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
def test_writes_stay_on_their_key_when_statistics_saw_a_large_fan_out(
    db_dsn: str, plan_mode: str
) -> None:
    """Statistics taken while two checkpoints held thousands of writes each, then many ordinary
    checkpoints: the planner must still look a checkpoint's writes up by key (migration 0003). It
    used to scan the whole writes table for every get_tuple and list."""
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        q = saver._q
    writes = (
        "INSERT INTO pgsaver_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,"
        " task_path, idx, channel, type, blob)"
        " SELECT 't', '', 'c-' || lpad(c::text, 4, '0'), 'task-' || w, '', 0, 'a', 'msgpack',"
        " '\\x80' FROM generate_series(%s::int, %s::int) AS c, generate_series(1, %s::int) AS w"
    )
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE pgsaver_writes SET (autovacuum_enabled = false)")
        conn.execute(writes, (1, 2, 3000))  # a large fan-out
        conn.execute("ANALYZE pgsaver_writes")
        conn.execute(writes, (3, 400, 3))  # then ordinary checkpoints, under 10%: no new ANALYZE
        conn.execute(
            "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type,"
            " checkpoint, channel_versions, metadata)"
            " SELECT 't', '', 'c-' || lpad(c::text, 4, '0'), 'msgpack', '\\x80', '{}', '{}'"
            " FROM generate_series(1, 400) AS c"
        )
        conn.execute("ANALYZE pgsaver_checkpoints")
        conn.execute(f"SET plan_cache_mode = {plan_mode}")
        cases: dict[str, tuple[bytes, dict[str, Any]]] = {
            "get_tuple by id": (
                q.get_tuple(("thread", "ns", "id")),
                {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c-0200"},
            ),
            "list thread": (
                q.read_tuples(("thread", "ns")),
                {"thread_id": "t", "checkpoint_ns": "", "limit": 10},
            ),
        }
        bad = {}
        for name, (query, params) in cases.items():
            row = conn.execute(b"EXPLAIN (FORMAT JSON) " + query, params, prepare=True).fetchone()
            assert row is not None
            plan = row[0] if not isinstance(row[0], str) else json.loads(row[0])
            if seq_scans(plan):
                bad[name] = seq_scans(plan)
        assert not bad, f"sequential scans: {bad}"


def _scans_by_thread(plan: Any) -> list[str]:
    """The scans of our tables in a plan that do not select by thread_id (docs/scaling.md: each
    must, for a statement to stay on one shard of a table distributed by thread_id)."""
    wrong = []
    for n in plan_nodes(plan):
        if n.get("Relation Name") not in TABLES or "Scan" not in n["Node Type"]:
            continue
        conditions = " ".join(
            str(n.get(k, "")) for k in ("Index Cond", "Recheck Cond", "Filter", "Join Filter")
        )
        if "thread_id" not in conditions:
            wrong.append(f"{n['Node Type']} on {n['Relation Name']}")
    return wrong


def test_every_hot_path_statement_stays_on_its_thread(
    seeded: tuple[str, PostgresSaver, Any],
) -> None:
    """Every statement LangGraph runs per step reads and writes only rows of one thread, by its
    thread_id (the claim of docs/scaling.md about distributing the tables by thread_id)."""
    from helpers import checkpoint, config

    from langgraph_pg_saver.checkpoint import writing as _writing

    dsn, saver, hist = seeded
    q = saver._q
    tid = hist.thread_id
    last = hist.nodes[-1].checkpoint_id
    parent = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": last}}
    cp = checkpoint({"a": "x", "b": [1]})
    put = _writing.put_params(saver.serde, parent, cp, {"step": 1}, cp["channel_versions"])
    many = _writing.put_params(
        saver.serde, parent, cp, {"step": 1}, cp["channel_versions"], values_max=0
    )
    writes = _writing.put_writes_params(saver.serde, parent, [("a", 1), ("b", 2)], "task", "")
    special = _writing.put_writes_params(saver.serde, parent, [("__interrupt__", 1)], "task", "")
    assert writes is not None
    assert special is not None
    insert, upsert = saver._put_sql(put)
    insert_many, upsert_many = saver._put_sql(many)
    write_new, write_upsert = saver._put_writes_sql(writes)
    special_sql, _ = saver._put_writes_sql(special)
    assert write_upsert is not None
    cases: dict[str, tuple[bytes, dict[str, Any]]] = {
        "put": (insert, put.params),
        "put (upsert)": (upsert, put.params),
        "put, arrays": (insert_many, many.params),
        "put, arrays (upsert)": (upsert_many, many.params),
        "put (parent not stored)": (
            q.render("put_orphan", blob_rows=put.rows, claim=False, status=None, parts=False),
            put.params,
        ),
        "put_writes": (write_new, writes.params),
        "put_writes (upsert)": (write_upsert, writes.params),
        "put_writes, special": (special_sql, special.params),
        "get_tuple": (q.get_tuple(("thread", "ns")), {"thread_id": tid, "checkpoint_ns": ""}),
        "get_tuple by id": (
            q.get_tuple(("thread", "ns", "id")),
            {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": last},
        ),
        "list(thread)": (
            q.read_tuples(("thread", "ns", "before")),
            {"thread_id": tid, "checkpoint_ns": "", "before": last, "limit": 20},
        ),
        "list(thread) across namespaces": (
            q.read_tuples(("thread",)),
            {"thread_id": tid, "limit": 20},
        ),
        "delta history": (
            q.render("delta_history", where=("thread", "ns", "id")),
            {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": last, "channels": ["a"]},
        ),
        "delete_thread": (q["delete_thread"], {"thread_id": tid}),
    }
    assert config  # (helpers)
    bad: dict[str, list[str]] = {}
    with psycopg.connect(dsn) as conn:
        conn.execute("SET enable_seqscan = off")  # what remains a full scan has no thread key
        for name, (query, params) in cases.items():
            row = conn.execute(b"EXPLAIN (FORMAT JSON) " + query, params).fetchone()
            assert row is not None
            wrong = _scans_by_thread(row[0])
            if wrong:
                bad[name] = wrong
        # the check sees a statement that does fan out: list(None, filter=...)
        row = conn.execute(
            b"EXPLAIN (FORMAT JSON) " + q.read_tuples(("filter",)),
            {"filter": '{"step": 3}', "limit": 10},
        ).fetchone()
        assert row is not None
        assert _scans_by_thread(row[0])
    assert not bad, f"statements that leave their thread: {bad}"
