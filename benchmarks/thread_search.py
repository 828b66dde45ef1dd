"""search_threads on many threads: ``python -m benchmarks.thread_search --threads 1000000``.

Builds, in a new database of the server at ``--dsn`` (default: the local one), ``--threads``
threads of two root checkpoints each (copies of a real graph's rows, made in SQL), of which 0.9%
wait on an interrupt and 0.1% failed, their status rows as put keeps them, and one thread of
``--long`` checkpoints; takes statistics; then times each search (median of ``--rounds``) and
prints a table (``--json``: the numbers). The database is dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_pg_saver import PostgresSaver


def _build(dsn: str, threads: int, long: int) -> None:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt
    from typing_extensions import TypedDict

    class S(TypedDict):
        x: str

    def ask(state: S) -> dict[str, Any]:
        return {"x": str(interrupt("approve?"))}

    g = StateGraph(S)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        g.compile(checkpointer=saver).invoke({"x": "a"}, {"configurable": {"thread_id": "seed"}})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                parent_checkpoint_id, type, checkpoint, channel_versions, metadata, created_at)
            SELECT 't' || t, '', '1f1' || lpad(to_hex(t * 2 + k), 13, '0'), NULL, c.type,
                   c.checkpoint, '{}'::jsonb, jsonb_build_object('tenant', 't' || t %% 1000),
                   now() - make_interval(secs => (%(n)s - t) * 2)
            FROM generate_series(1, %(n)s) AS t, generate_series(0, 1) AS k,
                 (SELECT type, checkpoint FROM pgsaver_checkpoints LIMIT 1) AS c
            """,
            {"n": threads},
        )
        for every, channel in ((111, "__interrupt__"), (997, "__error__")):
            conn.execute(
                """
                INSERT INTO pgsaver_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,
                    idx, channel, type, blob)
                SELECT 't' || t, '', '1f1' || lpad(to_hex(t * 2 + 1), 13, '0'), 'task', -3,
                       %(channel)s, w.type, w.blob
                FROM generate_series(1, %(n)s, %(every)s) AS t,
                     (SELECT type, blob FROM pgsaver_writes
                      WHERE channel = '__interrupt__' LIMIT 1) AS w
                ON CONFLICT DO NOTHING
                """,
                {"n": threads, "every": every, "channel": channel},
            )
        # the rows put keeps: each thread's status at its newest root checkpoint
        conn.execute(
            """
            INSERT INTO pgsaver_thread_status (thread_id, status, checkpoint_id)
            SELECT 't' || t,
                   CASE WHEN t %% 997 = 1 THEN 'error' WHEN t %% 111 = 1 THEN 'interrupted'
                        ELSE 'idle' END,
                   '1f1' || lpad(to_hex(t * 2 + 1), 13, '0')
            FROM generate_series(1, %(n)s) AS t
            ON CONFLICT (thread_id) DO UPDATE SET status = EXCLUDED.status
            """,
            {"n": threads},
        )
        if long:
            conn.execute(
                """
                INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                    parent_checkpoint_id, type, checkpoint, channel_versions, metadata)
                SELECT 'long', '', '1f0' || lpad(to_hex(i), 13, '0'), NULL, c.type,
                       c.checkpoint, c.channel_versions, c.metadata
                FROM generate_series(1, %(n)s) AS i,
                     (SELECT * FROM pgsaver_checkpoints WHERE thread_id = 'seed'
                      ORDER BY checkpoint_id DESC LIMIT 1) AS c
                """,
                {"n": long},
            )
            conn.execute("SELECT pgsaver_refresh_status('long')")
        conn.execute("VACUUM ANALYZE")


def _time(op: Callable[[], Any], rounds: int) -> float:
    op()  # warm
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        op()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="host=127.0.0.1 user=postgres dbname=postgres")
    parser.add_argument("--threads", type=int, default=1_000_000)
    parser.add_argument("--long", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    name = f"lgps_search_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(args.dsn)
    params["dbname"] = name
    dsn = make_conninfo(**params)  # type: ignore[arg-type]
    try:
        start = time.perf_counter()
        _build(dsn, args.threads, args.long)
        built = time.perf_counter() - start
        out: dict[str, float] = {}
        with PostgresSaver.from_conn_string(dsn) as saver:
            cases: dict[str, Callable[[], Any]] = {
                "every thread, 50": lambda: saver.search_threads(sizes=False),
                "status='idle', 50": lambda: saver.search_threads(status="idle", sizes=False),
                "status='interrupted', 50": lambda: saver.search_threads(
                    status="interrupted", sizes=False
                ),
                "status='error', 50": lambda: saver.search_threads(status="error", sizes=False),
                "status='pending' (the long thread)": lambda: saver.search_threads(
                    status="pending", sizes=False
                ),
                "metadata tenant (0.1% of threads), 50": lambda: saver.search_threads(
                    metadata={"tenant": "t7"}, sizes=False
                ),
                "status='interrupted', tenant, 50": lambda: saver.search_threads(
                    status="interrupted", metadata={"tenant": "t7"}, sizes=False
                ),
                "every thread, 50, with sizes": lambda: saver.search_threads(),
                "idle_for=1 day (matches none: every row read)": lambda: saver.search_threads(
                    idle_for=timedelta(days=1), sizes=False
                ),
            }
            for label, op in cases.items():
                out[label] = _time(op, args.rounds)
        if args.json:
            print(json.dumps({"threads": args.threads, "long": args.long, "ms": out}, indent=2))
        else:
            print(
                f"{args.threads:,} threads + one of {args.long:,} checkpoints, built in "
                f"{built:.0f} s; medians of {args.rounds}"
            )
            for label, ms in out.items():
                print(f"| {label} | {ms:.1f} ms |")
    finally:
        if not args.keep:
            with psycopg.connect(args.dsn, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
