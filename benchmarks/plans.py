"""The plans of ``list(None, filter=..., limit=n)``'s three phases on a database of ours:
``python -m benchmarks.plans DSN [--filter JSON] [--limit N] [--out FILE]``.

Each phase's statement (``read_tuples_recent``, ``read_tuples_capped``, ``read_tuples_global``,
rendered by the saver for that filter) runs under ``EXPLAIN (ANALYZE, BUFFERS, TIMING OFF)``
with the saver's own parameters, unprepared, twice; the second run's plan and wall time are
printed. Point it at a table you want to understand, such as the bench's during a
``--scale 1000000`` run (its cluster's DSN is in the process list; the database is ``bench``).
It reads only.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import psycopg

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.checkpoint import reading as _reading


def explain(dsn: str, filter: dict[str, Any], limit: int) -> str:
    lines: list[str] = []
    with (
        PostgresSaver.from_conn_string(dsn) as saver,
        psycopg.connect(dsn, autocommit=True) as conn,
    ):
        sel = _reading.list_select(None, filter, None, limit, saver._visible_metadata)
        q = saver._q
        phases = {
            "first phase (read_tuples_recent)": q.recent("read_tuples", sel.predicates, limit),
            "second phase (read_tuples_capped)": q.capped("read_tuples", sel.predicates),
            "third phase (read_tuples_global)": q.read_tuples(sel.predicates),
        }
        for name, statement in phases.items():
            if statement is None:
                lines.append(f"== {name}: not used for this filter")
                continue
            query = b"EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) " + bytes(statement)
            elapsed = 0.0
            rows: list[Any] = []
            for _ in range(2):
                t0 = time.perf_counter()
                rows = conn.execute(query, sel.params, prepare=False).fetchall()
                elapsed = time.perf_counter() - t0
            lines.append(f"== {name}: {elapsed * 1000:.1f} ms")
            lines += [str(r[0]) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dsn")
    parser.add_argument("--filter", default='{"tenant": "acme"}', help="a JSON object")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--out", help="also write the plans here")
    args = parser.parse_args(argv)
    text = explain(args.dsn, json.loads(args.filter), args.limit)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
