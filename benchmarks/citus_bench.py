"""The hot operations on a Citus cluster, side by side with the same operations on one server.

Two databases on the same cluster (tests/citus.py makes them: citus on every node, the workers
added): one whose schema ``setup()`` distributed (tables by thread_id on the two workers), one set
up with ``setup(distribute=False)``, its tables local on the coordinator: one server, the same
machine, the same settings. Each operation alternates between the two, call by call; the figures
are medians over rounds, and the ratio is distributed/one server. Round trips are counted on the
wire (libpq trace) for one call of each.

    python -m benchmarks.citus_bench                 # the cluster tests/citus.py finds or starts
    LANGGRAPH_PG_SAVER_TEST_CITUS_DSN=... python -m benchmarks.citus_bench
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _ops(saver: Any, thread: str, parent: Any) -> dict[str, Callable[[int], object]]:
    from helpers import checkpoint, config

    state: dict[str, Any] = {"last": parent}

    def put(i: int) -> object:
        # new versions at every put, as LangGraph gives them (a version stored already takes
        # the upsert after a unique violation: a retry's path, not the usual one)
        cp = checkpoint({"a": f"v{i}", "b": list(range(5))}, {"a": i + 2, "b": i + 2})
        cp["v"] = 4
        state["last"] = saver.put(
            state["last"], cp, {"source": "loop", "step": i}, cp["channel_versions"]
        )
        return state["last"]

    return {
        "put": put,
        "put_writes": lambda i: saver.put_writes(
            state["last"], [("a", i), ("b", [i])], f"task-{i}", "path"
        ),
        "get_tuple (latest)": lambda i: saver.get_tuple(config(thread)),
        "list(thread, limit=10)": lambda i: list(saver.list(config(thread), limit=10)),
        "get_delta_channel_history": lambda i: saver.get_delta_channel_history(
            config=state["last"], channels=["a"]
        ),
    }


def run(rounds: int, calls: int) -> dict[str, Any]:
    import citus
    from helpers import checkpoint, config, traced

    from langgraph_pg_saver import PostgresSaver

    cluster = citus.find_cluster()
    if cluster is None:
        raise SystemExit(
            f"no Citus cluster: build it (bash ../shared/citus/build.sh) or set {citus.ENV_DSN}"
        )
    dsns = {"citus": cluster.create_db(), "one server": cluster.create_db()}
    try:
        savers = {}
        for who, dsn in dsns.items():
            s = PostgresSaver.from_conn_string(dsn, max_size=2).open()
            s.setup(distribute=who == "citus")
            savers[who] = s
        ops = {}
        for who, s in savers.items():
            cp = checkpoint({"a": "x", "b": []})
            cp["v"] = 4
            first = s.put(
                config("bench"), cp, {"source": "input", "step": -1}, cp["channel_versions"]
            )
            ops[who] = _ops(s, "bench", first)
            for op in ops[who].values():  # warm both up
                for i in range(5):
                    op(i)
        medians: dict[str, dict[str, list[float]]] = {
            n: {w: [] for w in dsns} for n in ops["citus"]
        }
        for r in range(rounds):
            for name in medians:
                took: dict[str, list[float]] = {w: [] for w in dsns}
                for i in range(calls):
                    for who in list(dsns) if i % 2 == 0 else list(dsns)[::-1]:
                        t0 = time.perf_counter()
                        ops[who][name](10_000 * (r + 1) + 10 * i)
                        took[who].append(time.perf_counter() - t0)
                for who in dsns:
                    medians[name][who].append(statistics.median(took[who]) * 1000)
        trips: dict[str, dict[str, int]] = {}
        import psycopg

        for who, dsn in dsns.items():
            with psycopg.connect(dsn, autocommit=True) as conn:
                s = PostgresSaver(conn)
                s.get_tuple(config("warm"))
                one = _ops(s, "bench", s.get_tuple(config("bench")).config)  # type: ignore[union-attr]
                trips[who] = {}
                for name, op in one.items():
                    with traced(conn.pgconn) as t:
                        op(9_999_999)
                    trips[who][name] = t.round_trips
        for s in savers.values():
            s.close()
    finally:
        for dsn in dsns.values():
            cluster.drop_db(dsn)
        if cluster.stop is not None:
            cluster.stop()
    rows = []
    for name, by in medians.items():
        a, b = statistics.median(by["citus"]), statistics.median(by["one server"])
        rows.append(
            {
                "operation": name,
                "citus_ms": round(a, 3),
                "one_server_ms": round(b, 3),
                "ratio": round(a / b, 2),
                "round_trips": {w: trips[w][name] for w in dsns},
            }
        )
    return {"rounds": rounds, "calls": calls, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.citus_bench", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "citus-latest.json"))
    args = parser.parse_args(argv)
    results = run(args.rounds, args.calls)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print("| operation | Citus [ms] | one server [ms] | Citus/one server | round trips |")
    print("|---|---:|---:|---:|---:|")
    for r in results["rows"]:
        t = r["round_trips"]
        print(
            f"| {r['operation']} | {r['citus_ms']:.3f} | {r['one_server_ms']:.3f} | "
            f"{r['ratio']:.2f} | {t['citus']} / {t['one server']} |"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
