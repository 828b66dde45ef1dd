"""Side-by-side benchmark: langgraph-pg-saver against the official langgraph-checkpoint-postgres.

    make bench                      # or: python benchmarks/bench.py [--rounds 5] [--quick]

Both savers run the same workloads in one process, on one Postgres server with default settings
(fsync on): a throwaway cluster from the local server binaries, or LANGGRAPH_PG_BENCH_DSN. Rounds
alternate which saver goes first. Each workload reports the median over rounds of each round's median
per-operation latency (or throughput), the min-max, and the ratio official/ours (>1: we are faster).
Results also go to benchmarks/results/latest.json. This is not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import random
import statistics
import string
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import psycopg
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as OfficialAsyncSaver
from langgraph.graph import END, START, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from typing_extensions import TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from graphs import _extend  # noqa: E402  (the tests' DeltaChannel reducer)
from helpers import traced  # noqa: E402
from pgserver import from_local_binaries  # noqa: E402

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver  # noqa: E402

IMPLS = ("ours", "official")
rng = random.Random(7)


def blob(n: int) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits, k=n))


# ---------------------------------------------------------------------------- saver factories


OURS_PREPARE: int | None = 5  # --ours-prepare: from_conn_string's default; "none" = pooler mode


def sync_saver(impl: str, dsn: str, stack: ExitStack) -> BaseCheckpointSaver[Any]:
    if impl == "ours":
        return stack.enter_context(
            PostgresSaver.from_conn_string(dsn, max_size=4, prepare_threshold=OURS_PREPARE)
        )
    return stack.enter_context(OfficialSaver.from_conn_string(dsn))


# ---------------------------------------------------------------------------- checkpoint helpers


def make_checkpoint(values: dict[str, Any], versions: dict[str, Any], step: int) -> Any:
    return {
        "v": 4,
        "id": str(uuid6(clock_seq=step)),
        "ts": "2026-11-30T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {"node": {k: v for k, v in list(versions.items())[:4]}},
        "updated_channels": None,
    }


def put_chain(
    saver: BaseCheckpointSaver[Any],
    thread: str,
    n: int,
    *,
    channels: int = 12,
    changed: int = 2,
    value_size: int = 2000,
    writes: int = 0,
    metadata: dict[str, Any] | None = None,
    timings: list[float] | None = None,
) -> list[Any]:
    """n checkpoints on one thread: the first stores every channel, each next one changes `changed`."""
    names = [f"ch{i}" for i in range(channels)]
    versions: dict[str, Any] = {}
    values: dict[str, Any] = {}
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    configs = []
    for step in range(n):
        touched = names if step == 0 else rng.sample(names, changed)
        new_versions = {}
        for ch in touched:
            versions[ch] = saver.get_next_version(versions.get(ch), None)
            values[ch] = blob(value_size)
            new_versions[ch] = versions[ch]
        cp = make_checkpoint(dict(values), dict(versions), step)
        md = {"source": "loop", "step": step, "parents": {}, **(metadata or {})}
        t0 = time.perf_counter()
        config = saver.put(config, cp, md, new_versions)
        if timings is not None:
            timings.append(time.perf_counter() - t0)
        configs.append(config)
        for w in range(writes):
            saver.put_writes(
                config, [("ch0", blob(1000)), ("ch1", blob(1000)), ("ch2", blob(1000))], f"task-{w}"
            )
    return configs


# ---------------------------------------------------------------------------- graphs


class Wide(TypedDict, total=False):
    k0: str
    k1: str
    k2: str
    k3: str
    k4: str
    k5: str
    k6: str
    k7: str
    k8: str
    k9: str
    k10: str
    k11: str
    log: Annotated[list[str], operator.add]


def eight_nodes() -> Any:
    g: Any = StateGraph(Wide)
    prev = START
    for i in range(8):

        def node(state: Wide, i: int = i) -> dict[str, Any]:
            return {f"k{i}": blob(2000), f"k{(i + 4) % 12}": blob(2000), "log": [f"n{i}"]}

        g.add_node(f"n{i}", node)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    return g


class Chat(TypedDict, total=False):
    messages: Annotated[list[str], DeltaChannel(_extend)]
    turns: int
    goal: int


def delta_loop() -> Any:
    """One invoke runs `goal` supersteps, each appending a message to a DeltaChannel."""
    g: Any = StateGraph(Chat)

    def talk(state: Chat) -> dict[str, Any]:
        t = state.get("turns", 0) + 1
        return {"messages": [f"message {t} " + "x" * 200], "turns": t}

    g.add_node("talk", talk)
    g.add_edge(START, "talk")
    g.add_conditional_edges("talk", lambda s: "talk" if s["turns"] < s["goal"] else END)
    return g


# ---------------------------------------------------------------------------- workloads


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


class Bench:
    def __init__(self, dsn: str, rounds: int, quick: bool) -> None:
        self.dsn = dsn
        self.rounds = rounds
        self.quick = quick
        self.samples: dict[str, dict[str, list[float]]] = {}
        self.units: dict[str, str] = {}
        self.higher_is_better: dict[str, bool] = {}
        self.fixtures: dict[str, dict[str, Any]] = {i: {} for i in IMPLS}
        # what no Postgres saver can beat: InMemorySaver for the graph workloads, one round trip or
        # one durable commit for the single operations (same units as the workload)
        self.floors: dict[str, list[float]] = {}
        self.memory = InMemorySaver()

    def floor(self, workload: str, value: float) -> None:
        self.floors.setdefault(workload, []).append(value)

    def build_memory_fixtures(self) -> None:
        graph = delta_loop().compile(checkpointer=self.memory)
        for steps in (300, 2000 if self.quick else 20_000):
            graph.invoke(
                {"messages": ["hi"], "goal": steps, "turns": 0},
                {
                    "configurable": {"thread_id": f"memory-delta-{steps}"},
                    "recursion_limit": steps + 10,
                },
            )

    def run_floors(self, r: int) -> None:
        """Per round: the physical floors next to which the savers' latencies are read."""
        with psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (k bigint PRIMARY KEY, v bytea)")
            timings = []
            for _ in range(150):
                t0 = time.perf_counter()
                conn.execute("SELECT 1").fetchone()
                timings.append(time.perf_counter() - t0)
            trip = median_ms(timings)
            timings = []
            for i in range(150):
                t0 = time.perf_counter()
                conn.execute("INSERT INTO bench_floor VALUES (%s, %s)", (r * 1000 + i, b"x" * 100))
                timings.append(time.perf_counter() - t0)
            commit = median_ms(timings)
        for w in ("put", "put_writes"):
            self.floor(w, commit)
        for w in (
            "get_tuple latest",
            "get_tuple by id",
            "list(thread, limit=20)",
            "list(None, filter)",
        ):
            self.floor(w, trip)
        saver = self.memory
        graph = eight_nodes().compile(checkpointer=saver)
        t0 = time.perf_counter()
        for i in range(8):
            graph.invoke({"log": []}, {"configurable": {"thread_id": f"memory-graph-{r}-{i}"}})
        self.floor("graph superstep (sync)", (time.perf_counter() - t0) / (8 * 9) * 1000)
        dgraph = delta_loop().compile(checkpointer=saver)
        for steps_ in (300, 2000 if self.quick else 20_000):
            timings = []
            for _ in range(5):
                t0 = time.perf_counter()
                dgraph.get_state({"configurable": {"thread_id": f"memory-delta-{steps_}"}})
                timings.append(time.perf_counter() - t0)
            self.floor(f"DeltaChannel get_state @{steps_}", median_ms(timings))

        async def concurrent() -> None:
            agraph = eight_nodes().compile(checkpointer=InMemorySaver())

            async def one(i: int) -> None:
                for _ in range(3):
                    await agraph.ainvoke(
                        {"log": []}, {"configurable": {"thread_id": f"memory-conc-{r}-{i}"}}
                    )

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(50)))
            self.floor("50 threads async, pool of 10", 50 * 3 * 9 / (time.perf_counter() - t0))

        asyncio.run(concurrent())

    def record(
        self, workload: str, impl: str, value: float, unit: str = "ms", higher: bool = False
    ) -> None:
        self.samples.setdefault(workload, {i: [] for i in IMPLS})[impl].append(value)
        self.units[workload] = unit
        self.higher_is_better[workload] = higher

    # fixtures built once per saver, outside the timed rounds
    def build_fixtures(self, impl: str, saver: BaseCheckpointSaver[Any]) -> None:
        fx = self.fixtures[impl]
        fx["t200"] = put_chain(saver, f"{impl}-t200", 200, writes=1)
        fx["t1000"] = put_chain(saver, f"{impl}-t1000", 1000, value_size=200)
        n_threads = 500 if self.quick else 2000
        for i in range(n_threads):
            put_chain(
                saver,
                f"{impl}-many-{i}",
                1,
                channels=2,
                value_size=100,
                metadata={"user": f"user-{i % 100}", "tenant": "acme"},
            )
        graph = delta_loop().compile(checkpointer=saver)
        for steps in (300, 2000 if self.quick else 20_000):
            t0 = time.perf_counter()
            graph.invoke(
                {"messages": ["hi"], "goal": steps, "turns": 0},
                {
                    "configurable": {"thread_id": f"{impl}-delta-{steps}"},
                    "recursion_limit": steps + 10,
                },
            )
            print(
                f"  [{impl}] DeltaChannel thread of {steps} supersteps built in {time.perf_counter() - t0:.1f}s",
                flush=True,
            )

    def run_sync(self, impl: str, saver: BaseCheckpointSaver[Any], r: int) -> None:
        fx = self.fixtures[impl]
        # put: 12 channels, 2 changed per put, ~2 KB values
        timings: list[float] = []
        put_chain(saver, f"{impl}-put-{r}", 150, timings=timings)
        self.record("put", impl, median_ms(timings[1:]))
        # put_writes: 3 writes of ~1 KB
        cfg = fx["t200"][-1]
        timings = []
        for i in range(150):
            writes = [("ch0", blob(1000)), ("ch1", blob(1000)), ("ch2", blob(1000))]
            t0 = time.perf_counter()
            saver.put_writes(cfg, writes, f"r{r}-task-{i}")
            timings.append(time.perf_counter() - t0)
        self.record("put_writes", impl, median_ms(timings))
        # get_tuple on a 200-checkpoint thread with pending writes
        thread = fx["t200"][0]["configurable"]["thread_id"]
        timings = []
        for _ in range(150):
            t0 = time.perf_counter()
            saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
            timings.append(time.perf_counter() - t0)
        self.record("get_tuple latest", impl, median_ms(timings))
        timings = []
        for _ in range(150):
            target = rng.choice(fx["t200"])
            t0 = time.perf_counter()
            saver.get_tuple(target)
            timings.append(time.perf_counter() - t0)
        self.record("get_tuple by id", impl, median_ms(timings))
        # list(thread, limit=20) on a 1,000-checkpoint thread
        thread = fx["t1000"][0]["configurable"]["thread_id"]
        timings = []
        for _ in range(40):
            t0 = time.perf_counter()
            got = list(saver.list({"configurable": {"thread_id": thread}}, limit=20))
            timings.append(time.perf_counter() - t0)
            assert len(got) == 20
        self.record("list(thread, limit=20)", impl, median_ms(timings))
        # list(None, filter) across threads
        timings = []
        for i in range(40):
            t0 = time.perf_counter()
            got = list(saver.list(None, filter={"user": f"user-{i % 100}", "tenant": "acme"}))
            timings.append(time.perf_counter() - t0)
        self.record("list(None, filter)", impl, median_ms(timings))
        # a real 8-node graph (ms per superstep)
        graph = eight_nodes().compile(checkpointer=saver)
        t0 = time.perf_counter()
        steps = 0
        for i in range(8):
            graph.invoke({"log": []}, {"configurable": {"thread_id": f"{impl}-graph-{r}-{i}"}})
            steps += 9  # input + 8 nodes
        self.record("graph superstep (sync)", impl, (time.perf_counter() - t0) / steps * 1000)
        # get_state of DeltaChannel threads
        dgraph = delta_loop().compile(checkpointer=saver)
        for steps_ in (300, 2000 if self.quick else 20_000):
            timings = []
            for _ in range(5):
                t0 = time.perf_counter()
                state = dgraph.get_state({"configurable": {"thread_id": f"{impl}-delta-{steps_}"}})
                timings.append(time.perf_counter() - t0)
            assert state.values["turns"] == steps_, state.values["turns"]
            self.record(f"DeltaChannel get_state @{steps_}", impl, median_ms(timings))

    async def run_async(self, impl: str, r: int) -> None:
        n_threads, invokes = 50, 3
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        if impl == "ours":
            ctx: Any = AsyncPostgresSaver.from_conn_string(
                self.dsn, min_size=10, max_size=10, prepare_threshold=OURS_PREPARE
            )
            saver = await ctx.__aenter__()
        else:
            pool = AsyncConnectionPool(
                self.dsn, min_size=10, max_size=10, kwargs=kwargs, open=False
            )
            await pool.open(wait=True)
            saver = OfficialAsyncSaver(pool)
        try:
            graph = eight_nodes().compile(checkpointer=saver)

            async def one(i: int) -> None:
                for _ in range(invokes):
                    await graph.ainvoke(
                        {"log": []}, {"configurable": {"thread_id": f"{impl}-conc-{r}-{i}"}}
                    )

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n_threads)))
            elapsed = time.perf_counter() - t0
            self.record(
                "50 threads async, pool of 10",
                impl,
                n_threads * invokes * 9 / elapsed,
                unit="supersteps/s",
                higher=True,
            )
        finally:
            if impl == "ours":
                await ctx.__aexit__(None, None, None)
            else:
                await pool.close()

    def round_trips(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for impl in IMPLS:
            with psycopg.connect(
                self.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
            ) as conn:
                saver: Any = PostgresSaver(conn) if impl == "ours" else OfficialSaver(conn)
                cfgs = put_chain(saver, f"{impl}-rt-{uuid.uuid4().hex[:6]}", 3)
                last, first = cfgs[-1], cfgs[0]
                ops: dict[str, Callable[[], Any]] = {
                    "put": lambda s=saver, i=impl: put_chain(
                        s, f"{i}-rt2-{uuid.uuid4().hex[:6]}", 1
                    ),
                    "put_writes": lambda s=saver, c=last: s.put_writes(
                        c, [("ch0", "x"), ("ch1", "y")], "t"
                    ),
                    "get_tuple": lambda s=saver, c=last: s.get_tuple(c),
                    "list(limit=20)": lambda s=saver, c=first: list(s.list(c, limit=20)),
                    "delete_thread": lambda s=saver, i=impl: s.delete_thread(f"{i}-nothing"),
                }
                for name, op in ops.items():
                    op()  # warm: the first execution of a statement also prepares it
                    with traced(conn.pgconn) as t:
                        op()
                    out.setdefault(name, {})[impl] = t.round_trips
        return out

    def storage(self) -> dict[str, dict[str, float]]:
        tables = {
            "ours": {
                "checkpoints": "pgsaver_checkpoints",
                "blobs": "pgsaver_blobs",
                "writes": "pgsaver_writes",
            },
            "official": {
                "checkpoints": "checkpoints",
                "blobs": "checkpoint_blobs",
                "writes": "checkpoint_writes",
            },
        }
        out: dict[str, dict[str, float]] = {}
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            for impl, names in tables.items():
                n = conn.execute(f"SELECT count(*) FROM {names['checkpoints']}").fetchone()[0]  # type: ignore[index]
                for kind, table in names.items():
                    size = conn.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()[0]  # type: ignore[index]
                    out.setdefault(kind, {})[impl] = size / n * 1000
        return out


def _floor_fields(bench: Bench, workload: str, official: float, higher: bool) -> dict[str, Any]:
    """The floor's median and the best speedup any saver could reach over the official one."""
    xs = bench.floors.get(workload)
    if not xs:
        return {}
    floor = statistics.median(xs)
    return {
        "floor": floor,
        "best_possible_speedup": floor / official if higher else official / floor,
    }


def summarize(bench: Bench) -> list[dict[str, Any]]:
    rows = []
    for workload, by_impl in bench.samples.items():
        higher = bench.higher_is_better[workload]
        med = {i: statistics.median(v) for i, v in by_impl.items()}
        ratio = med["ours"] / med["official"] if higher else med["official"] / med["ours"]
        rows.append(
            {
                "workload": workload,
                "unit": bench.units[workload],
                "ours_median": med["ours"],
                "ours_min": min(by_impl["ours"]),
                "ours_max": max(by_impl["ours"]),
                "official_median": med["official"],
                "official_min": min(by_impl["official"]),
                "official_max": max(by_impl["official"]),
                "speedup": ratio,
                "rounds": len(by_impl["ours"]),
                **_floor_fields(bench, workload, med["official"], higher),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--quick", action="store_true", help="smaller fixtures (2,000-step DeltaChannel thread)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "latest.json")
    parser.add_argument(
        "--ours-prepare",
        type=lambda v: None if v.lower() == "none" else int(v),
        default=5,
        help="prepare_threshold for our savers (default 5, from_conn_string's; 'none': pooler mode)",
    )
    args = parser.parse_args(argv)
    global OURS_PREPARE
    OURS_PREPARE = args.ours_prepare

    server = None
    dsn = os.environ.get("LANGGRAPH_PG_BENCH_DSN")
    if not dsn:
        server = from_local_binaries(
            settings="-c max_connections=200"
        )  # default durability: fsync on
        if server is None:
            sys.exit("no Postgres server binaries found; set LANGGRAPH_PG_BENCH_DSN")
        admin = server.dsn
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        dsn = server.dsn_for("bench")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            settings = dict(
                conn.execute(
                    "SELECT name, setting FROM pg_settings WHERE name IN "
                    "('fsync', 'synchronous_commit', 'server_version', 'shared_buffers')"
                ).fetchall()
            )
        print(f"server: {settings}", flush=True)
        bench = Bench(dsn, args.rounds, args.quick)
        with ExitStack() as stack:
            savers = {impl: sync_saver(impl, dsn, stack) for impl in IMPLS}
            for saver in savers.values():
                saver.setup()  # type: ignore[attr-defined]
            for impl in IMPLS:
                print(f"building fixtures for {impl}...", flush=True)
                bench.build_fixtures(impl, savers[impl])
            bench.build_memory_fixtures()
            for r in range(args.rounds):
                order = IMPLS if r % 2 == 0 else IMPLS[::-1]
                for impl in order:
                    bench.run_sync(impl, savers[impl], r)
                    asyncio.run(bench.run_async(impl, r))
                bench.run_floors(r)
                print(f"round {r + 1}/{args.rounds} done", flush=True)
        rows = summarize(bench)
        trips = bench.round_trips()
        storage = bench.storage()
    finally:
        if server is not None:
            server.stop()

    print(
        f"\n{'workload':<34} {'ours':>22} {'official':>22} {'speedup':>8} {'floor':>9} {'best':>7}"
    )
    for row in rows:
        u = row["unit"]
        ours = f"{row['ours_median']:.3f} ({row['ours_min']:.2f}-{row['ours_max']:.2f})"
        off = f"{row['official_median']:.3f} ({row['official_min']:.2f}-{row['official_max']:.2f})"
        floor = (
            f"{row['floor']:9.3f} {row['best_possible_speedup']:6.2f}x" if "floor" in row else ""
        )
        print(
            f"{row['workload'] + ' [' + u + ']':<34} {ours:>22} {off:>22} {row['speedup']:>7.2f}x {floor}"
        )
    print(
        "floor: one round trip (reads), one durable 1-row commit (writes), InMemorySaver (graphs);"
        " best: official / floor"
    )
    print("\nround trips per operation (ours / official):")
    for op, by in trips.items():
        print(f"  {op:<16} {by['ours']} / {by['official']}")
    print("\nstorage, bytes per 1,000 checkpoints (ours / official, ratio):")
    for kind, by in storage.items():
        print(
            f"  {kind:<12} {by['ours']:>12,.0f} / {by['official']:>12,.0f}  {by['ours'] / by['official']:.2f}"
        )
    total = {i: sum(by[i] for by in storage.values()) for i in IMPLS}
    print(
        f"  {'total':<12} {total['ours']:>12,.0f} / {total['official']:>12,.0f}  {total['ours'] / total['official']:.2f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "server": settings,
                "rounds": args.rounds,
                "quick": args.quick,
                "ours_prepare_threshold": args.ours_prepare,
                "workloads": rows,
                "round_trips": trips,
                "storage": storage,
            },
            indent=2,
        )
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
