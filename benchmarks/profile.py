"""Where a hot operation's time goes, per call, for both savers and the floor, on the bench's
realistic payloads: ``python -m benchmarks.profile`` (``make profile``).

For each operation and party it runs ``--calls`` calls (after a warm-up) and reads, for just those
calls:

- the client's wall time and its CPU time (``time.process_time``: Python, serde, psycopg and libpq);
- the serializer's share, measured apart: the same values serialized (or, for reads, decoded) alone;
- the server's execution and planning time (``pg_stat_statements``, ``track_planning`` on), and how
  many statements ran;
- the WAL written: bytes and records by resource manager (``pg_walinspect`` over the calls' LSN
  range): heap records are rows written, B-tree records index entries, "other" mostly GIN entries
  (the metadata index), Transaction records commits;
- what remains: the mean wall time minus client CPU minus server time, which is the round trip,
  the commit's WAL flush, and waiting to be scheduled.

It starts a throwaway cluster (fsync on) with ``pg_stat_statements`` preloaded, or uses
``LANGGRAPH_PG_BENCH_DSN`` (which must have both extensions available). Nothing else should run on
that server meanwhile: the WAL range is the whole cluster's. Each saver uses its own
``from_conn_string`` defaults (the bench's *defaults* configuration); ``--pooler`` turns prepared
statements off for both, as behind a transaction-mode pooler.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver import PostgresSaver

from . import floors, payloads
from .payloads import Chain, put_chain
from .server import bench_database

SETTINGS = (
    "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all "
    "-c pg_stat_statements.track_planning=on -c track_io_timing=on"
)
SERDE = JsonPlusSerializer()
PARTIES = ("ours", "official", "floor")


class Meter:
    """Server-side counters around a run of calls."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        self.lsn: Any = None

    def start(self) -> None:
        self.conn.execute("SELECT pg_stat_statements_reset()")
        row = self.conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        assert row is not None
        self.lsn = row[0]

    def stop(self, calls: int) -> dict[str, float]:
        row = self.conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        assert row is not None
        end = row[0]
        stmts = self.conn.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0),"
            " coalesce(sum(total_plan_time), 0), coalesce(sum(plans), 0)"
            " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
            " WHERE datname = current_database())"
            " AND query !~* 'pg_stat_statements|pg_current_wal|pg_get_wal'"
            " AND query !~* '^(BEGIN|COMMIT|ROLLBACK)'"
        ).fetchone()
        assert stmts is not None
        wal = dict.fromkeys(("heap", "btree", "xact", "other"), 0.0)
        wal_bytes = 0.0
        if end != self.lsn:
            for rmgr, count, size in self.conn.execute(
                'SELECT "resource_manager/record_type", count, combined_size'
                " FROM pg_get_wal_stats(%s, %s) WHERE count > 0",
                (self.lsn, end),
            ).fetchall():
                key = {"Heap": "heap", "Heap2": "heap", "Btree": "btree", "Transaction": "xact"}
                wal[key.get(rmgr, "other")] += count
                wal_bytes += size
        return {
            "statements": float(stmts[0]) / calls,
            "server_exec_ms": float(stmts[1]) / calls,
            "server_plan_ms": float(stmts[2]) / calls,
            "plans": float(stmts[3]) / calls,
            "wal_bytes": wal_bytes / calls,
            "wal_heap_records": wal["heap"] / calls,
            "wal_btree_records": wal["btree"] / calls,
            "wal_commits": wal["xact"] / calls,
            "wal_other_records": wal["other"] / calls,
        }


def measure(
    meter: Meter, calls: int, op: Callable[[], Any], serde_op: Callable[[], Any]
) -> dict[str, float]:
    for _ in range(10):  # warm-up: cursors, prepared statements, caches
        op()
    walls: list[float] = []
    meter.start()
    cpu0 = time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter()
        op()
        walls.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / calls * 1000
    out = meter.stop(calls)
    t0 = time.perf_counter()
    for _ in range(calls):
        serde_op()
    serde_ms = (time.perf_counter() - t0) / calls * 1000
    mean = statistics.fmean(walls) * 1000  # the accounting adds means; the median is shown too
    out.update(
        wall_ms=statistics.median(walls) * 1000,
        mean_wall_ms=mean,
        client_cpu_ms=cpu,
        serde_ms=serde_ms,
        remainder_ms=mean - cpu - out["server_exec_ms"] - out["server_plan_ms"],
    )
    return out


def put_serde(chain: Chain) -> Callable[[], Any]:
    """What a put must serialize: the changed channels' values, the body, the metadata."""
    values = [payloads.channel_value(i) for i in range(chain.changed)]
    body = payloads.make_checkpoint({}, dict(chain.versions), 0)

    def run() -> None:
        for v in values:
            SERDE.dumps_typed(v)
        SERDE.dumps_typed(body)
        json.dumps({"source": "loop", "step": 1, "parents": {}})

    return run


def write_serde() -> Callable[[], Any]:
    writes = payloads.three_writes()
    return lambda: [SERDE.dumps_typed(v) for _, v in writes]


def read_serde(saver: Any, config: Any) -> Callable[[], Any]:
    """What a get_tuple must decode: every channel value and pending write of the checkpoint."""
    tup = saver.get_tuple(config)
    dumped = [SERDE.dumps_typed(v) for v in tup.checkpoint["channel_values"].values()]
    dumped += [SERDE.dumps_typed(w[2]) for w in tup.pending_writes or []]
    return lambda: [SERDE.loads_typed(d) for d in dumped]


def run(dsn: str, calls: int, pooler: bool) -> dict[str, dict[str, dict[str, float]]]:
    meter = Meter(dsn)
    results: dict[str, dict[str, dict[str, float]]] = {}
    payloads.warm()
    prepare = None if pooler else 0
    with ExitStack() as stack:
        ours_kwargs: dict[str, Any] = {"prepare_threshold": None} if pooler else {}
        ours = stack.enter_context(PostgresSaver.from_conn_string(dsn, **ours_kwargs))
        official = stack.enter_context(OfficialSaver.from_conn_string(dsn))
        if pooler:
            official.conn.prepare_threshold = None
        ours.setup()
        official.setup()
        floors.make_tables(dsn)
        floor_conn = stack.enter_context(
            psycopg.connect(dsn, autocommit=True, prepare_threshold=prepare)
        )
        floor = floors.InsertFloor(floor_conn)
        savers: dict[str, Any] = {"ours": ours, "official": official}
        for party in PARTIES:
            saver = savers.get(party, floor)
            print(f"  {party}: put, put_writes", flush=True)
            chain = Chain(saver, f"{party}-put")
            chain.step()
            results.setdefault("put", {})[party] = measure(
                meter, calls, chain.step, put_serde(chain)
            )
            configs = put_chain(saver, f"{party}-pw", 20)
            counter = iter(range(10**9))

            def put_writes(
                configs: list[Any] = configs, saver: Any = saver, counter: Any = counter
            ) -> None:
                n = next(counter)
                saver.put_writes(configs[n % len(configs)], payloads.three_writes(), f"task-{n}")

            results.setdefault("put_writes", {})[party] = measure(
                meter, calls, put_writes, write_serde()
            )
        for party, saver in savers.items():
            print(f"  {party}: get_tuple, list", flush=True)
            configs = put_chain(saver, f"{party}-t200", 200, writes=1)
            latest = {"configurable": {"thread_id": f"{party}-t200", "checkpoint_ns": ""}}
            middle = configs[100]
            results.setdefault("get_tuple latest", {})[party] = measure(
                meter, calls, lambda s=saver, c=latest: s.get_tuple(c), read_serde(saver, latest)
            )
            results.setdefault("get_tuple by id", {})[party] = measure(
                meter, calls, lambda s=saver, c=middle: s.get_tuple(c), read_serde(saver, middle)
            )
            results.setdefault("list(thread, limit=20)", {})[party] = measure(
                meter,
                max(calls // 4, 20),
                lambda s=saver, c=latest: list(s.list(c, limit=20)),
                lambda: None,
            )
    meter.conn.close()
    return results


def decompose_put(dsn: str, calls: int, pooler: bool) -> dict[str, float]:
    """Our put taken apart, interleaved call by call on one warm thread (medians, ms): building
    its statement and parameters in Python, its statement alone on a plain connection, the floor's
    INSERT of the same bytes, a durable one-row INSERT (round trip + commit flush) and
    ``SELECT 1`` (the round trip)."""
    from langgraph_pg_saver.checkpoint import writing as _writing

    prepare = None if pooler else 0
    keys = (
        "full put",
        "build (Python)",
        "statement (raw)",
        "floor INSERT",
        "tiny INSERT",
        "SELECT 1",
    )
    times: dict[str, list[float]] = {k: [] for k in keys}
    kwargs: dict[str, Any] = {"prepare_threshold": None} if pooler else {}
    with (
        PostgresSaver.from_conn_string(dsn, **kwargs) as saver,
        psycopg.connect(dsn, autocommit=True, prepare_threshold=prepare) as raw,
    ):
        raw.execute("CREATE TABLE IF NOT EXISTS bench_tiny (k bigint)")
        floor = floors.InsertFloor(raw)
        real_put = saver.put
        n = 0

        def put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            nonlocal n
            n += 1
            if n % 2:  # every other put as the saver runs it, the others taken apart
                t0 = time.perf_counter()
                out = real_put(config, checkpoint, metadata, new_versions)
                times["full put"].append(time.perf_counter() - t0)
                return out
            t0 = time.perf_counter()
            built = _writing.put_params(saver.serde, config, checkpoint, metadata, new_versions)
            insert, _ = saver._put_sql(built)
            t1 = time.perf_counter()
            row = raw.execute(insert, built.params).fetchone()
            t2 = time.perf_counter()
            assert row is not None, "the statement stored nothing"
            times["build (Python)"].append(t1 - t0)
            times["statement (raw)"].append(t2 - t1)
            t0 = time.perf_counter()
            floor.put(config, checkpoint, metadata, new_versions)
            t1 = time.perf_counter()
            raw.execute("INSERT INTO bench_tiny VALUES (1)")
            t2 = time.perf_counter()
            raw.execute("SELECT 1").fetchone()
            t3 = time.perf_counter()
            times["floor INSERT"].append(t1 - t0)
            times["tiny INSERT"].append(t2 - t1)
            times["SELECT 1"].append(t3 - t2)
            return _writing.put_result(built.params)

        saver.put = put  # type: ignore[method-assign]
        chain = Chain(saver, "decompose")
        for _ in range(2 * calls + 20):
            chain.step()
    return {k: statistics.median(v[10:]) * 1000 for k, v in times.items()}


COLUMNS = (
    ("wall_ms", "median ms", 3),
    ("mean_wall_ms", "mean ms", 3),
    ("client_cpu_ms", "client CPU ms", 3),
    ("serde_ms", "of it serde ms", 3),
    ("server_exec_ms", "server exec ms", 3),
    ("server_plan_ms", "plan ms", 3),
    ("remainder_ms", "round trip + flush ms", 3),
    ("statements", "statements", 2),
    ("wal_bytes", "WAL bytes", 0),
    ("wal_heap_records", "heap recs", 2),
    ("wal_btree_records", "btree recs", 2),
    ("wal_other_records", "other recs", 2),
    ("wal_commits", "commits", 2),
)


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = []
    for op, parties in results.items():
        lines.append(f"\n{op}\n")
        lines.append("| party | " + " | ".join(c[1] for c in COLUMNS) + " |")
        lines.append("|---|" + "---:|" * len(COLUMNS))
        for party, row in parties.items():
            cells = [f"{row[key]:,.{digits}f}" for key, _, digits in COLUMNS]
            lines.append(f"| {party} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400, help="calls per operation and party")
    parser.add_argument("--pooler", action="store_true", help="prepared statements off for both")
    parser.add_argument("--json", dest="json_path", help="also write the results here")
    args = parser.parse_args(argv)
    with bench_database("lgps_profile", settings=SETTINGS) as dsn:
        results = run(dsn, args.calls, args.pooler)
        parts = decompose_put(dsn, args.calls, args.pooler)
    print(table(results))
    print("\nput, taken apart (medians, ms; the floor INSERT includes serializing its bytes)\n")
    print("| " + " | ".join(parts) + " |")
    print("|" + "---:|" * len(parts))
    print("| " + " | ".join(f"{v:.3f}" for v in parts.values()) + " |")
    if args.json_path:
        with open(args.json_path, "w") as f:
            out = {"calls": args.calls, "pooler": args.pooler, "results": results, "put": parts}
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
