"""The small client-side costs that docs/performance.md names when it takes put and put_writes apart:
``python -m benchmarks.overheads [--calls N] [--json FILE]``.

- **the driver**: ``SELECT 1`` through a saver's driver (the pool's checkout and return, the look
  at the idle socket, the retry wrapper, the kept cursor) against ``SELECT 1`` on a raw psycopg
  cursor kept open on its own connection, the two taking turns call by call;
- **building put_writes**: ``_writing.put_writes_params`` for the bench's three writes with compression
  on and off, against serializing the three values alone (LangGraph's serializer), taking turns;
- **building put**: ``_writing.put_params`` for the put workload's checkpoint (12 channels, 2 changed)
  with compression on and off, against serializing its two changed values alone.

Medians in microseconds. It starts a throwaway cluster (fsync on), or uses
``LANGGRAPH_PG_BENCH_DSN``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.checkpoint import writing as _writing

from . import payloads
from .payloads import make_checkpoint
from .server import bench_database

SERDE = JsonPlusSerializer()


def alternate(calls: int, ops: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Each op once per turn, ``calls`` turns after a tenth as warm-up; medians in µs."""
    times: dict[str, list[float]] = {name: [] for name in ops}
    warm = calls // 10
    for i in range(calls + warm):
        for name, op in ops.items():
            t0 = time.perf_counter()
            op()
            elapsed = time.perf_counter() - t0
            if i >= warm:
                times[name].append(elapsed)
    return {name: round(statistics.median(v) * 1e6, 1) for name, v in times.items()}


def driver(dsn: str, calls: int) -> dict[str, float]:
    query = b"SELECT 1"
    with (
        PostgresSaver.from_conn_string(dsn) as saver,
        psycopg.connect(dsn, autocommit=True) as raw,
    ):
        cur = raw.cursor(binary=True)

        def plain() -> None:
            cur.execute(query)
            cur.fetchone()

        return alternate(
            calls,
            {
                "SELECT 1 through the driver": lambda: saver._driver.fetch_one(query, {}),
                "SELECT 1 on a raw kept cursor": plain,
            },
        )


def builds(calls: int) -> dict[str, Any]:
    payloads.warm()
    writes = payloads.three_writes()
    cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "1"}}
    values = {f"ch{i}": payloads.channel_value(i) for i in range(12)}
    versions = {ch: f"{1:032}.{i}" for i, ch in enumerate(values)}
    checkpoint = make_checkpoint(values, versions, 1)
    changed = {ch: versions[ch] for ch in ("ch3", "ch7")}
    metadata: Any = {"source": "loop", "step": 1, "parents": {}}
    put_cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "0"}}
    out: dict[str, Any] = {
        "write sizes (bytes, serialized)": [len(SERDE.dumps_typed(v)[1]) for _, v in writes],
        "changed value sizes (bytes, serialized)": [
            len(SERDE.dumps_typed(values[ch])[1]) for ch in changed
        ],
    }
    out.update(
        alternate(
            calls,
            {
                "put_writes_params, compressed": lambda: _writing.put_writes_params(
                    SERDE, cfg, writes, "task", "", compress=True
                ),
                "put_writes_params, not compressed": lambda: _writing.put_writes_params(
                    SERDE, cfg, writes, "task", "", compress=False
                ),
                "the three writes serialized alone": lambda: [
                    SERDE.dumps_typed(v) for _, v in writes
                ],
                "put_params, compressed": lambda: _writing.put_params(
                    SERDE, put_cfg, checkpoint, metadata, changed, compress=True
                ),
                "put_params, not compressed": lambda: _writing.put_params(
                    SERDE, put_cfg, checkpoint, metadata, changed, compress=False
                ),
                "the two changed values serialized alone": lambda: [
                    SERDE.dumps_typed(values[ch]) for ch in changed
                ],
            },
        )
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=5000, help="turns per measurement")
    parser.add_argument("--json", dest="json_path", help="also write the results here")
    args = parser.parse_args(argv)
    with bench_database("lgps_overheads") as dsn:
        results = {"calls": args.calls, "driver": driver(dsn, args.calls)}
    results["build"] = builds(args.calls)
    for section in ("driver", "build"):
        print(f"\n{section} (medians, µs)\n")
        for name, value in results[section].items():
            print(f"- {name}: {value}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
