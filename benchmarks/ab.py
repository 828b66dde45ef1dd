"""A/B of the hot path's optimisations on the bench's payloads: is each still worth its code?

    python -m benchmarks.ab [--calls 1500]      # on a throwaway cluster, or LANGGRAPH_PG_BENCH_DSN

Unlike ``benchmarks.bench`` this reaches into the package's internals, on purpose: each variant
turns one optimisation off in the running process and the variants take turns call by call (in a
shuffled order each time), on threads of their own, through one ``from_conn_string`` saver:

- ``current``: as shipped;
- ``arrays``: put and put_writes send their rows as arrays (psycopg's list dumpers) instead of
  scalar parameters of a VALUES list;
- ``upsert only``: no plain INSERT tried first: always the ``ON CONFLICT`` statement;
- ``no kept cursor``: a new cursor per statement instead of the connection's kept one;
- ``no thread status``: put's statement without the upkeep of migration 0014's status row (its
  RETURNING holds ``true`` instead of the call of ``pgsaver_put_status``), what the threads by
  status cost each put. The checkpoints schedule a node (a ``branch:to:`` channel holds a value),
  as in the middle of a run: the upkeep's usual case, a probe that writes nothing.

It prints the median put and put_writes latency of each variant. It asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.checkpoint.base import SaverBase
from langgraph_pg_saver.db import driver as _driver_sync

from . import payloads
from .server import bench_database

VARIANTS = ("current", "arrays", "upsert only", "no kept cursor", "no thread status")
_STATUS_CALL = re.compile(rb"\S+\.pgsaver_put_status\(.*?%\(status\)s::text\)", re.S)
_PUT_SQL = SaverBase._put_sql
_WRITES_SQL = SaverBase._put_writes_sql
_VALUES_MAX = _writing.VALUES_MAX_ROWS
_KEEP_MAX = _driver_sync.KEEP_CURSOR_MAX_BYTES


_WITHOUT: dict[bytes, bytes] = {}


def _without_status(query: bytes) -> bytes:
    """put's statement with ``true`` for the status upkeep (made once per statement: the
    substitution is not part of what is measured)."""
    done = _WITHOUT.get(query)
    if done is None:
        done = _WITHOUT[query] = type(query)(_STATUS_CALL.sub(b"true", query))
    return done


def configure(variant: str) -> None:
    _writing.VALUES_MAX_ROWS = 0 if variant == "arrays" else _VALUES_MAX
    _driver_sync.KEEP_CURSOR_MAX_BYTES = -1 if variant == "no kept cursor" else _KEEP_MAX
    if variant == "no thread status":
        SaverBase._put_sql = lambda self, put: tuple(  # type: ignore[method-assign,assignment,return-value]
            _without_status(q) for q in _PUT_SQL(self, put)
        )
        SaverBase._put_writes_sql = _WRITES_SQL  # type: ignore[method-assign]
    elif variant == "upsert only":
        SaverBase._put_sql = lambda self, put: (_PUT_SQL(self, put)[1], None)  # type: ignore[method-assign,assignment,return-value]
        SaverBase._put_writes_sql = lambda self, w: (_WRITES_SQL(self, w)[1], None)  # type: ignore[method-assign]
    else:
        SaverBase._put_sql = _PUT_SQL  # type: ignore[method-assign]
        SaverBase._put_writes_sql = _WRITES_SQL  # type: ignore[method-assign]


def run(dsn: str, calls: int) -> dict[str, dict[str, float]]:
    rng = random.Random(13)
    channels = [f"ch{i}" for i in range(12)]
    values = {c: payloads.channel_value(i) for i, c in enumerate(channels)}
    channels.append("branch:to:agent")  # a node scheduled: the thread is pending
    values["branch:to:agent"] = None
    times: dict[str, dict[str, list[float]]] = {v: {"put": [], "put_writes": []} for v in VARIANTS}
    with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
        saver.setup()
        configs: dict[str, Any] = {
            v: {"configurable": {"thread_id": f"ab-{uuid.uuid4().hex}", "checkpoint_ns": ""}}
            for v in VARIANTS
        }
        for i in range(calls):
            order = list(VARIANTS)
            rng.shuffle(order)
            changed = rng.sample(channels, 2)
            for variant in order:
                configure(variant)
                cp = empty_checkpoint()
                cp["channel_values"] = dict(values)
                cp["channel_versions"] = {c: saver.get_next_version(None, None) for c in channels}
                new_versions = {c: cp["channel_versions"][c] for c in changed}
                t0 = time.perf_counter()
                stored = saver.put(configs[variant], cp, {"step": i}, new_versions)
                t1 = time.perf_counter()
                saver.put_writes(stored, payloads.three_writes(), f"task-{i}")
                t2 = time.perf_counter()
                configs[variant] = stored
                if i >= calls // 10:  # warm-up left out
                    times[variant]["put"].append(t1 - t0)
                    times[variant]["put_writes"].append(t2 - t1)
        configure("current")
    return {
        v: {op: statistics.median(xs) * 1e3 for op, xs in ops.items()} for v, ops in times.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=1500, help="calls per variant")
    args = parser.parse_args(argv)
    with bench_database("bench_ab") as dsn:
        result = run(dsn, args.calls)
    base = result["current"]
    print("| variant | put [ms] | vs current | put_writes [ms] | vs current |")
    print("|---|---:|---:|---:|---:|")
    for variant, ops in result.items():
        print(
            f"| {variant} | {ops['put']:.3f} | {ops['put'] / base['put']:.2f}x"
            f" | {ops['put_writes']:.3f} | {ops['put_writes'] / base['put_writes']:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
