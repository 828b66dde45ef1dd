"""Throughput against pool size: 50 concurrent async threads of the 8-node graph, on pools of 1 to 16.

    python -m benchmarks.pool_curve                  # pools 1,2,4,8,16; 3 rounds
    python -m benchmarks.pool_curve --pools 1,4,16 --rounds 5

Each saver (and the floor: LangGraph over InMemorySaver plus one durable one-row INSERT per put
and per put_writes) gets an AsyncConnectionPool of that size with the official docs' kwargs
(autocommit, prepare_threshold=0, dict_row), as in make bench's "same pool" async workload;
within a round the three parties run in rotating order at each size. Reports supersteps/s (median
over rounds, min-max) and ours / official. Writes benchmarks/results/<label>.json. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from datetime import datetime, timezone
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as OfficialAsyncSaver
from psycopg_pool import AsyncConnectionPool

from langgraph_pg_saver import AsyncPostgresSaver

from . import floors, payloads
from .bench import RESULTS, package_info
from .configs import pool_kwargs
from .payloads import GRAPH_SUPERSTEPS
from .workloads import ASYNC_INVOKES, ASYNC_THREADS

PARTIES = ("ours", "official", "floor")


async def block(dsn: str, who: str, size: int, tag: str) -> float:
    """Supersteps/s of ASYNC_THREADS threads × ASYNC_INVOKES invokes on a pool of ``size``."""
    kwargs = pool_kwargs(0) if who != "floor" else {"autocommit": True, "prepare_threshold": 0}
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=size, max_size=size, kwargs=kwargs, open=False
    )
    await pool.open(wait=True)
    try:
        saver: Any = (
            AsyncPostgresSaver(pool)
            if who == "ours"
            else OfficialAsyncSaver(pool)
            if who == "official"
            else floors.AsyncDriverFloor(pool)
        )
        graph = payloads.eight_nodes().compile(checkpointer=saver)

        async def one(i: int) -> None:
            config = {"configurable": {"thread_id": f"{who}-{tag}-{i}"}}
            for _ in range(ASYNC_INVOKES):
                await graph.ainvoke(payloads.graph_input(), config)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(ASYNC_THREADS)))
        return ASYNC_THREADS * ASYNC_INVOKES * GRAPH_SUPERSTEPS / (time.perf_counter() - t0)
    finally:
        await pool.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pool_curve", description=__doc__)
    parser.add_argument("--pools", default="1,2,4,8,16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="pool-curve")
    args = parser.parse_args(argv)
    sizes = [int(p) for p in args.pools.split(",")]

    from .server import bench_database

    payloads.warm()
    rates: dict[int, dict[str, list[float]]] = {s: {p: [] for p in PARTIES} for s in sizes}
    started = time.perf_counter()
    with bench_database("bench", settings="-c max_connections=200") as dsn:
        for impl in ("ours", "official"):
            asyncio.run(_setup(dsn, impl))
        floors.make_tables(dsn)
        for r in range(args.rounds):
            for size in sizes:
                k = (r + size) % len(PARTIES)
                for who in PARTIES[k:] + PARTIES[:k]:
                    rate = asyncio.run(block(dsn, who, size, f"{r}-{size}"))
                    rates[size][who].append(rate)
            print(f"round {r + 1}/{args.rounds} after {time.perf_counter() - started:.0f}s")
    rows = []
    print("\n| pool | ours | official | ours / official | floor |")
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        med = {p: statistics.median(rates[size][p]) for p in PARTIES}
        rng = {p: (min(rates[size][p]), max(rates[size][p])) for p in PARTIES}
        rows.append({"pool": size, "median": med, "range": rng})
        print(
            f"| {size} | {med['ours']:.0f} ({rng['ours'][0]:.0f}–{rng['ours'][1]:.0f}) |"
            f" {med['official']:.0f} ({rng['official'][0]:.0f}–{rng['official'][1]:.0f}) |"
            f" {med['ours'] / med['official']:.2f}x | {med['floor']:.0f} |"
        )
    out = RESULTS / f"{args.label}.json"
    out.write_text(
        json.dumps(
            {
                "label": args.label,
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "package": package_info(),
                "rounds": args.rounds,
                "threads": ASYNC_THREADS,
                "invokes": ASYNC_INVOKES,
                "unit": "supersteps/s",
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"\nwrote {out}")
    return 0


async def _setup(dsn: str, impl: str) -> None:
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=1, max_size=1, kwargs=pool_kwargs(0), open=False
    )
    await pool.open(wait=True)
    try:
        if impl == "ours":
            await AsyncPostgresSaver(pool).setup()
        else:
            async with pool.connection() as conn:
                await OfficialAsyncSaver(conn).setup()
    finally:
        await pool.close()


if __name__ == "__main__":
    raise SystemExit(main())
