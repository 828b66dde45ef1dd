"""What the record of deletes (migration 0018) costs: ``python -m benchmarks.deleted_bench``.

Two schemas in one database on a fresh cluster (fsync on), or ``LANGGRAPH_PG_BENCH_DSN``: one
migrated to 0017 (this release before its setup(): no record, writes check nothing) and one to the
head (put_writes checks the record after the thread's lock). The same calls on each, interleaved
call by call: ``put_writes`` of one write and of ten, and ``put`` (its statement is unchanged: only
its rare second try reads the record), on a direct connection (prepared statements) and on one
that prepares nothing (as behind a pooler: the functions of migrations 0013 and 0018). The record
table holds ``--records`` deleted threads, none of them the threads written. Medians of ``--calls``
calls in each of ``--rounds`` rounds; the median of the rounds' medians, and the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

import psycopg
from langgraph.checkpoint.base import empty_checkpoint

from benchmarks.report import interleaved as measure
from benchmarks.server import bench_database
from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.db import migrate

SCHEMAS = {"before 0018": "before18", "with 0018": "public"}


def prepare_schemas(dsn: str, records: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        script = migrate.script("before18", distribute=False)
        conn.execute((script[: script.index("\n-- 0018_")] + "\nCOMMIT;\n").encode())
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO public.pgsaver_deleted_threads (thread_id, last_checkpoint_id) "
            "SELECT 'deleted-' || i, 'ffffffff' FROM generate_series(1, %s) AS i",
            (records,),
        )
        conn.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--json", dest="json_file")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with bench_database("lgps_deleted_bench") as dsn:
        prepare_schemas(dsn, args.records)
        for mode, threshold in (("prepared", 0), ("nothing prepared", None)):
            with contextlib.ExitStack() as stack:
                savers = {
                    label: stack.enter_context(
                        PostgresSaver.from_conn_string(
                            dsn, schema=schema, max_size=1, prepare_threshold=threshold
                        )
                    )
                    for label, schema in SCHEMAS.items()
                }
                configs = {}
                for label, saver in savers.items():
                    cfg = {"configurable": {"thread_id": f"t-{mode}", "checkpoint_ns": ""}}
                    configs[label] = saver.put(cfg, empty_checkpoint(), {}, {})
                counter = itertools.count()
                one = [("a", "x" * 200)]
                ten = [(f"c{i}", "x" * 200) for i in range(10)]
                ops: dict[str, dict[str, Callable[[], Any]]] = {
                    "put_writes, 1 write": {
                        label: (
                            lambda s=s, c=configs[label], w=one, n=counter: s.put_writes(
                                c, w, f"task-{next(n)}"
                            )
                        )
                        for label, s in savers.items()
                    },
                    "put_writes, 10 writes": {
                        label: (
                            lambda s=s, c=configs[label], w=ten, n=counter: s.put_writes(
                                c, w, f"task-{next(n)}"
                            )
                        )
                        for label, s in savers.items()
                    },
                    "put": {
                        label: (lambda s=s, c=configs[label]: s.put(c, empty_checkpoint(), {}, {}))
                        for label, s in savers.items()
                    },
                }
                # the cache benchmark's loop: interleaved call by call, medians of medians (ms)
                for op, by in measure(ops, args.calls, args.rounds).items():
                    results[f"{op} ({mode})"] = {p: ms * 1000 for p, ms in by.items()}
    print(
        f"\nthe record of deletes: medians of {args.rounds} rounds x {args.calls} calls, "
        f"{args.records:,} records"
    )
    print("| call | before 0018 | with 0018 | ratio |")
    print("|---|---|---|---|")
    for op, by in results.items():
        before, after = by["before 0018"], by["with 0018"]
        print(f"| {op} | {before:.0f} µs | {after:.0f} µs | {after / before:.2f}x |")
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
