"""The fixtures and the timed workloads.

Single operations (put, put_writes, get_tuple, list, get_state) and the sync graph's invokes
alternate between the two savers and the workload's floor call by call, and who goes first
rotates: all three see the same moments of a noisy shared machine and the same cache state (a call
that follows another backend's call runs on colder CPU caches, and a floor timed on its own looked
2x cheaper than the same statement timed between the savers' calls). The async workload runs as
blocks, in an order that rotates with the round. Each round records each party's median.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from psycopg import pq
from psycopg_pool import AsyncConnectionPool

from langgraph_pg_saver import KeyringSerializer, PostgresSaver

from . import floors, payloads
from .configs import ASYNC_POOL_SIZE, IMPLS, Config, pool_kwargs
from .payloads import GRAPH_SUPERSTEPS, Chain, put_chain, rng

PW_CHECKPOINTS = 300  # checkpoints the put_writes workload spreads its tasks over
STALE_SCHEMA = "bench_stale"  # both savers' tables for the stale-statistics workload
FAN_OUT = 1000  # put_writes calls (3 writes each) on each of the two fan-out checkpoints
ASYNC_THREADS, ASYNC_INVOKES = 50, 3
GROW_COPIES = 20  # fresh-stats: copies of each round's threads added after the round
GROWN_TABLES = {
    "ours": ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes"),
    "official": ("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
}


@dataclass(frozen=True)
class Sizes:
    """What --quick shrinks."""

    delta_steps: int  # the long DeltaChannel thread
    filter_threads: int  # the threads list(None, filter) searches
    calls: int  # calls per party and round of put, put_writes and get_tuple
    list_calls: int  # of list(...)
    global_calls: int  # of list(None, filter, limit=10), which the official saver runs as a scan
    graph_invokes: int  # of the sync graph
    # at 300 supersteps, on the long thread: a call there decodes thousands of messages, and a
    # cyclic GC pass that lands in one call adds 60-100 ms to it, so a median needs several
    get_state_calls: tuple[int, int]


FULL = Sizes(20_000, 2000, 300, 60, 20, 24, (20, 5))
QUICK = Sizes(2000, 500, 150, 30, 10, 12, (12, 5))
BACKGROUND_CHAIN = 100  # checkpoints of the template thread that --scale copies


@dataclass(frozen=True)
class Workload:
    key: str  # for --workloads
    rows: tuple[str, ...]  # the table rows it produces (see Bench.names)
    fixtures: tuple[str, ...] = ()


# in the order they run and are reported
WORKLOADS: dict[str, Workload] = {
    w.key: w
    for w in (
        Workload("put", ("put",)),
        Workload("put-strings", ("put, plain-string values",)),
        Workload("put-guarded", ("put, single_writer=True",)),
        Workload("encrypted", ("put, encrypted", "get_tuple, encrypted")),
        Workload("put_writes", ("put_writes",), ("pw",)),
        Workload("get_tuple", ("get_tuple latest", "get_tuple by id"), ("t200",)),
        Workload("stale", ("get_tuple by id, stale statistics",), ("stale",)),
        Workload("list", ("list(thread, limit=20)",), ("t1000",)),
        Workload("list-filter", ("list(None, filter)",), ("many",)),
        Workload(
            "list-global",
            (
                "list(None, dense filter, limit=10)",
                "list(None, sparse filter, limit=10)",
                "list(None, filter of old checkpoints, limit=10)",
            ),
            ("many",),
        ),
        Workload(
            "get_state", ("DeltaChannel get_state @300", "DeltaChannel get_state @long"), ("delta",)
        ),
        Workload("graph", ("8-node graph, sync, per superstep",)),
        Workload("async", ("50 threads async, 3 invokes each",)),
    )
}


def parse_workloads(value: str) -> list[str]:
    keys = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [k for k in keys if k not in WORKLOADS]
    if unknown or not keys:
        raise ValueError(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    return [k for k in WORKLOADS if k in keys]


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def _thread(configs: list[Any]) -> str:
    return str(configs[0]["configurable"]["thread_id"])


class Bench:
    def __init__(self, dsn: str, sizes: Sizes, selected: list[str], scale: int = 0) -> None:
        self.dsn = dsn
        self.scale = scale  # --scale: the checkpoints of background threads added per saver
        self.sizes = sizes
        self.selected = selected
        # samples[config][row][party]: one value per round (the round's median, or throughput)
        self.samples: dict[str, dict[str, dict[str, list[float]]]] = {}
        self.units: dict[str, str] = {}
        self.higher_is_better: dict[str, bool] = {}
        self.fixtures: dict[str, dict[str, Any]] = {i: {} for i in (*IMPLS, "floor")}
        self.memory = InMemorySaver()  # the get_state floor's threads
        self.seconds: dict[str, float] = {}  # wall time per workload, all rounds and configurations

    # ------------------------------------------------------------------ naming

    def names(self) -> dict[str, str]:
        """Each row's name in the tables, with what it stores."""
        long = f"{self.sizes.delta_steps:,}"
        return {
            "put": "put (12 channels: message lists and dicts, 2 changed)",
            "put, plain-string values": "put, plain-string values (12 channels of 2 KB, 2 changed)",
            "put, single_writer=True": "put as in the put row, ours with single_writer=True",
            "put_writes": "put_writes (3 writes: messages and a dict, ~1 KB each)",
            "get_tuple latest": "get_tuple latest (200 checkpoints, 3 pending writes each)",
            "get_tuple by id": "get_tuple by id (same thread)",
            "get_tuple by id, stale statistics": "get_tuple by id, stale statistics",
            "list(thread, limit=20)": "list(thread, limit=20), 1,000 checkpoints",
            "list(None, filter)": f"list(None, filter), {self.sizes.filter_threads:,} threads",
            "list(None, dense filter, limit=10)": "list(None, filter matching almost every"
            " checkpoint, limit=10)",
            "list(None, sparse filter, limit=10)": "list(None, filter matching"
            f" {self.sizes.filter_threads // 100} checkpoints, limit=10)",
            "list(None, filter of old checkpoints, limit=10)": "list(None, filter matching"
            " many checkpoints, none of the newest, limit=10)",
            "DeltaChannel get_state @300": "DeltaChannel get_state @300 supersteps",
            "DeltaChannel get_state @long": f"DeltaChannel get_state @{long} supersteps",
            "8-node graph, sync, per superstep": "8-node graph, sync, per superstep",
            "50 threads async, 3 invokes each": "50 threads async, 3 invokes each (8-node graph)",
        }

    def record(self, config: str, row: str, party: str, value: float, unit: str = "ms") -> None:
        by_row = self.samples.setdefault(config, {}).setdefault(row, {})
        by_row.setdefault(party, []).append(value)
        self.units[row] = unit
        self.higher_is_better[row] = unit.endswith("/s")

    # ------------------------------------------------------------------ fixtures

    def needs(self, fixture: str) -> bool:
        return any(fixture in WORKLOADS[k].fixtures for k in self.selected)

    def build_fixtures(self, savers: dict[str, BaseCheckpointSaver[Any]]) -> None:
        """Fixtures for the selected workloads, built once, outside the timed rounds, and read by
        every configuration (they differ only in how they connect)."""
        payloads.warm()
        if self.scale:
            self.build_background(savers)
        for impl, saver in savers.items():
            fx = self.fixtures[impl]
            t0 = time.perf_counter()
            if self.needs("t200"):
                fx["t200"] = put_chain(saver, f"{impl}-t200", 200, writes=1)
            if self.needs("pw"):
                # put_writes goes round these: tens of writes per checkpoint over a run, not
                # thousands on one (that would skew the writes table's statistics for every
                # other workload)
                fx["pw"] = put_chain(saver, f"{impl}-pw", PW_CHECKPOINTS)
            if self.needs("t1000"):
                fx["t1000"] = put_chain(saver, f"{impl}-t1000", 1000)
            if self.needs("many"):
                for i in range(self.sizes.filter_threads):
                    put_chain(
                        saver,
                        f"{impl}-many-{i}",
                        1,
                        channels=2,
                        value=payloads.small_value,
                        metadata={"user": f"user-{i % 100}", "tenant": "acme"},
                    )
            print(f"  [{impl}] fixtures built in {time.perf_counter() - t0:.1f}s", flush=True)
            if self.needs("delta"):
                self._build_delta(saver, impl)
        if self.needs("delta"):
            self._build_delta(self.memory, "memory")
        floors.make_tables(self.dsn)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            store = floors.TableFloor(conn)
            if self.needs("t200"):
                self.fixtures["floor"]["t200"] = put_chain(store, "floor-t200", 200, writes=1)
            if self.needs("t1000"):
                self.fixtures["floor"]["t1000"] = put_chain(store, "floor-t1000", 1000)

    def build_background(self, savers: dict[str, BaseCheckpointSaver[Any]]) -> None:
        """--scale N: N checkpoints of other threads in each saver's tables, stored as each saver
        stores them. One template thread of BACKGROUND_CHAIN checkpoints (the put workload's
        payloads, 3 writes each, metadata {"user": "bg", "tenant": "acme"}) is put through the
        saver, then its rows are copied in SQL under N / BACKGROUND_CHAIN thread ids. Built
        before the other fixtures, so their checkpoints are the newest."""
        copies = max(self.scale // BACKGROUND_CHAIN - 1, 0)
        tables = {
            "ours": ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes"),
            "official": ("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
        }
        for impl, saver in savers.items():
            t0 = time.perf_counter()
            template = f"{impl}-bg"
            put_chain(
                saver,
                template,
                BACKGROUND_CHAIN,
                writes=1,
                metadata={"user": "bg", "tenant": "acme"},
            )
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                for table in tables[impl]:
                    cols = [
                        r[0]
                        for r in conn.execute(
                            "SELECT column_name FROM information_schema.columns WHERE"
                            " table_schema = 'public' AND table_name = %s ORDER BY ordinal_position",
                            (table,),
                        ).fetchall()
                    ]
                    picked = ", ".join(
                        "t.thread_id || '-' || g" if c == "thread_id" else f't."{c}"' for c in cols
                    )
                    names = ", ".join(f'"{c}"' for c in cols)
                    conn.execute(
                        f'INSERT INTO "{table}" ({names}) SELECT {picked} FROM "{table}" AS t'  # type: ignore[arg-type]
                        " CROSS JOIN generate_series(1, %s) AS g WHERE t.thread_id = %s",
                        (copies, template),
                    )
                conn.execute("CHECKPOINT")
            print(
                f"  [{impl}] {(copies + 1) * BACKGROUND_CHAIN:,} background checkpoints in"
                f" {time.perf_counter() - t0:.0f}s",
                flush=True,
            )

    def _build_delta(self, saver: BaseCheckpointSaver[Any], who: str) -> None:
        graph = payloads.delta_loop().compile(checkpointer=saver)
        for steps in (300, self.sizes.delta_steps):
            t0 = time.perf_counter()
            graph.invoke(
                payloads.delta_input(steps),
                {
                    "configurable": {"thread_id": f"{who}-delta-{steps}"},
                    "recursion_limit": steps + 10,
                },
            )
            print(
                f"  [{who}] DeltaChannel thread of {steps:,} supersteps built in"
                f" {time.perf_counter() - t0:.1f}s",
                flush=True,
            )

    def build_stale(self, savers: dict[str, BaseCheckpointSaver[Any]]) -> None:
        """The stale-statistics fixture, in STALE_SCHEMA (created empty by the caller): two
        checkpoints with FAN_OUT tasks of 3 writes each, ANALYZE with autovacuum off, then a
        200-checkpoint thread with 3 pending writes per checkpoint that the statistics never see.
        The planner then believes a checkpoint has thousands of writes."""
        for impl, saver in savers.items():
            fan = put_chain(saver, f"{impl}-fan", 2, value=payloads.small_value)
            for cfg in fan:
                for t in range(FAN_OUT):
                    saver.put_writes(cfg, payloads.three_writes(), f"t{t}")
        self.autovacuum_off(STALE_SCHEMA, analyze=True)
        for impl, saver in savers.items():
            self.fixtures[impl]["stale"] = put_chain(saver, f"{impl}-stale", 200, writes=1)

    def autovacuum_off(self, schema: str, analyze: bool = False) -> None:
        """Autovacuum off on every table of ``schema`` (its statistics stay what they are), and
        with ``analyze`` each analyzed now."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
            for (table,) in tables:
                conn.execute(f'ALTER TABLE {schema}."{table}" SET (autovacuum_enabled = false)')
                if analyze:
                    conn.execute(f'ANALYZE {schema}."{table}"')

    # ------------------------------------------------------------------ the rounds

    def alternate(
        self,
        config: str,
        row: str,
        n: int,
        op: Callable[[str, int], Any],
        floor: Callable[[int], Any] | None = None,
    ) -> None:
        """n calls of op for each saver, and of the floor, interleaved call by call (who goes first
        rotates). Records each party's median. An op that returns a float reports its own timing
        (Chain.step times the put alone)."""
        parties: tuple[str, ...] = IMPLS + (("floor",) if floor is not None else ())
        timings: dict[str, list[float]] = {p: [] for p in parties}
        for i in range(n):
            k = i % len(parties)
            for who in parties[k:] + parties[:k]:
                t0 = time.perf_counter()
                took = floor(i) if who == "floor" else op(who, i)  # type: ignore[misc]
                timings[who].append(took if isinstance(took, float) else time.perf_counter() - t0)
        for party in parties:
            self.record(config, row, party, median_ms(timings[party]))

    def run_round(
        self,
        cfg: Config,
        savers: dict[str, BaseCheckpointSaver[Any]],
        stale: dict[str, BaseCheckpointSaver[Any]] | None,
        r: int,
    ) -> None:
        """One round of every selected workload in one configuration."""
        with psycopg.connect(
            self.dsn, autocommit=True, prepare_threshold=cfg.floor_prepare
        ) as conn:
            for key in self.selected:
                if cfg.fresh and (WORKLOADS[key].fixtures or key == "async"):
                    continue  # fresh-stats: only what needs no fixtures (and its own schema)
                t0 = time.perf_counter()
                self._run(key, cfg, savers, stale, conn, r)
                self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - t0
        if cfg.fresh and cfg.schema is not None:
            self.grow(cfg.schema, f"%-{cfg.name}-%-{r}")

    def grow(self, schema: str, threads: str) -> None:
        """The tables of ``schema`` grow as a deployment's do, without a new ANALYZE: the rows of
        the threads matching the LIKE pattern ``threads`` (this round's), copied GROW_COPIES times
        under new thread ids, in SQL, into each saver's tables."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for tables in GROWN_TABLES.values():
                for table in tables:
                    cols = [
                        r[0]
                        for r in conn.execute(
                            "SELECT column_name FROM information_schema.columns WHERE"
                            " table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                            (schema, table),
                        ).fetchall()
                    ]
                    picked = ", ".join(
                        "t.thread_id || '-copy-' || g" if c == "thread_id" else f't."{c}"'
                        for c in cols
                    )
                    names = ", ".join(f'"{c}"' for c in cols)
                    conn.execute(
                        f'INSERT INTO {schema}."{table}" ({names}) SELECT {picked}'  # type: ignore[arg-type]
                        f' FROM {schema}."{table}" AS t CROSS JOIN generate_series(1, %s) AS g'
                        " WHERE t.thread_id LIKE %s AND t.thread_id NOT LIKE '%%-copy-%%'",
                        (GROW_COPIES, threads),
                    )

    def _run(
        self,
        key: str,
        cfg: Config,
        savers: dict[str, BaseCheckpointSaver[Any]],
        stale: dict[str, BaseCheckpointSaver[Any]] | None,
        conn: psycopg.Connection[Any],
        r: int,
    ) -> None:
        if key == "async":
            self.run_async(cfg, r)
        elif key == "stale":
            assert stale is not None
            self.run_stale(cfg, stale)
        else:
            getattr(self, "run_" + key.replace("-", "_"))(cfg, savers, conn, r)

    def run_put(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        self._put(cfg, savers, conn, r, "put", payloads.channel_value)

    def run_put_strings(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        self._put(cfg, savers, conn, r, "put, plain-string values", payloads.string_value)

    def run_put_guarded(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """The put row with our one-writer-per-thread guard on (the official saver has none):
        against the put row, what the guard costs."""
        ours = savers["ours"]
        ours.single_writer = True
        try:
            self._put(cfg, savers, conn, r, "put, single_writer=True", payloads.channel_value)
        finally:
            ours.single_writer = False

    def run_encrypted(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """put and get_tuple with every value encrypted: ours with KeyringSerializer (bound to
        its place, metadata outside LangGraph's own keys sealed too), the official saver with
        LangGraph's EncryptedSerializer (AES, metadata in clear). The metadata carries a key
        LangGraph copies from configurable, as a user id passed in the config is."""
        key = b"bench-key-0123456789abcdef012345"
        serdes = {
            "ours": KeyringSerializer({"k1": key}),
            "official": EncryptedSerializer.from_pycryptodome_aes(key=key),
        }
        kept = {impl: savers[impl].serde for impl in IMPLS}
        self._last_chains = {}
        try:
            for impl in IMPLS:
                savers[impl].serde = serdes[impl]
            self._put(
                cfg,
                savers,
                conn,
                r,
                "put, encrypted",
                payloads.channel_value,
                metadata={"user_id": "user-4242"},
            )
            chains = self._last_chains
            self.alternate(
                cfg.name,
                "get_tuple, encrypted",
                self.sizes.calls,
                lambda impl, i: savers[impl].get_tuple(chains[impl].configs[-1 - i % 20]),
            )
        finally:
            for impl in IMPLS:
                savers[impl].serde = kept[impl]
            # the sealed threads go: every other workload's saver reads with the plain serializer,
            # and list() across threads would meet them (a user seals all threads or none)
            for impl, chain in getattr(self, "_last_chains", {}).items():
                savers[impl].delete_thread(chain.config["configurable"]["thread_id"])

    def _put(
        self,
        cfg: Config,
        savers: Any,
        conn: Any,
        r: int,
        row: str,
        value: Callable[[int], Any],
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """12 channels, 2 changed per put (the first put, of all 12, is not timed)."""
        tag = f"{cfg.name}-{row[:8]}-{r}"
        chains = {
            impl: Chain(savers[impl], f"{impl}-put-{tag}", value=value, metadata=metadata)
            for impl in IMPLS
        }
        self._last_chains = chains
        floor = Chain(floors.InsertFloor(conn), f"floor-put-{tag}", value=value, metadata=metadata)
        for chain in (*chains.values(), floor):
            chain.step()
        self.alternate(
            cfg.name,
            row,
            self.sizes.calls,
            lambda impl, i: chains[impl].step(),
            floor=lambda i: floor.step(),
        )

    def run_put_writes(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """3 writes of ~1 KB, to checkpoints of their own (the get_tuple fixtures keep the same
        pending writes in every round)."""
        fx = self.fixtures
        sink = floors.InsertFloor(conn)
        self.alternate(
            cfg.name,
            "put_writes",
            self.sizes.calls,
            lambda impl, i: savers[impl].put_writes(
                fx[impl]["pw"][i % PW_CHECKPOINTS],
                payloads.three_writes(),
                f"{cfg.name}-r{r}-task-{i}",
            ),
            floor=lambda i: sink.put_writes({}, payloads.three_writes(), "t"),
        )

    def run_get_tuple(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """get_tuple on a 200-checkpoint thread whose checkpoints have 3 pending writes each."""
        fx = self.fixtures
        latest = {
            impl: {"configurable": {"thread_id": _thread(fx[impl]["t200"]), "checkpoint_ns": ""}}
            for impl in IMPLS
        }
        rows = floors.read_floor(conn, _thread(fx["floor"]["t200"]), listing=False)
        self.alternate(
            cfg.name,
            "get_tuple latest",
            self.sizes.calls,
            lambda impl, i: savers[impl].get_tuple(latest[impl]),
            floor=lambda i: rows(None),
        )
        picks = [rng.randrange(200) for _ in range(self.sizes.calls)]
        floor_ids = [c["configurable"]["checkpoint_id"] for c in fx["floor"]["t200"]]
        self.alternate(
            cfg.name,
            "get_tuple by id",
            self.sizes.calls,
            lambda impl, i: savers[impl].get_tuple(fx[impl]["t200"][picks[i]]),
            floor=lambda i: rows(floor_ids[picks[i]]),
        )

    def run_stale(self, cfg: Config, savers: dict[str, BaseCheckpointSaver[Any]]) -> None:
        picks = [rng.randrange(200) for _ in range(self.sizes.calls)]
        self.alternate(
            cfg.name,
            "get_tuple by id, stale statistics",
            self.sizes.calls,
            lambda impl, i: savers[impl].get_tuple(self.fixtures[impl]["stale"][picks[i]]),
        )

    def run_list(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """list(thread, limit=20) on a 1,000-checkpoint thread."""
        fx = self.fixtures

        def list_thread(impl: str, i: int) -> None:
            config = {"configurable": {"thread_id": _thread(fx[impl]["t1000"])}}
            got = list(savers[impl].list(config, limit=20))
            assert len(got) == 20

        rows = floors.read_floor(conn, _thread(fx["floor"]["t1000"]), listing=True)
        self.alternate(
            cfg.name,
            "list(thread, limit=20)",
            self.sizes.list_calls,
            list_thread,
            floor=lambda i: rows(None),
        )

    def run_list_filter(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """list(None, filter) across the single-checkpoint threads (20 per user)."""
        self.alternate(
            cfg.name,
            "list(None, filter)",
            self.sizes.list_calls,
            lambda impl, i: list(
                savers[impl].list(None, filter={"user": f"user-{i % 100}", "tenant": "acme"})
            ),
            floor=lambda i: conn.execute("SELECT 1").fetchone(),
        )

    def run_list_global(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """list(None, filter, limit=10) across every thread, in the shapes a plan must fit: a
        filter almost every checkpoint matches ({"source": "loop"}: the newest ten are the
        answer), one that matches 20 (the "many" fixture's user-N), and one that matches many
        checkpoints but none of the newest ({"tenant": "acme"}: the "many" fixture and --scale's
        background, older than the DeltaChannel and graph threads), however large the table."""
        calls = self.sizes.global_calls
        for row, make in (
            ("list(None, dense filter, limit=10)", lambda i: {"source": "loop"}),
            ("list(None, sparse filter, limit=10)", lambda i: {"user": f"user-{i % 100}"}),
            ("list(None, filter of old checkpoints, limit=10)", lambda i: {"tenant": "acme"}),
        ):
            # the sparse filter's user has filter_threads / 100 checkpoints (20; 5 with --quick)
            want = min(10, self.sizes.filter_threads // 100) if "sparse" in row else 10

            def op(impl: str, i: int, make: Any = make, want: int = want) -> None:
                got = list(savers[impl].list(None, filter=make(i), limit=10))
                assert len(got) == want, (len(got), want)

            self.alternate(
                cfg.name, row, calls, op, floor=lambda i: conn.execute("SELECT 1").fetchone()
            )

    def run_get_state(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """get_state of DeltaChannel threads; the floor: the same over InMemorySaver."""
        graphs = {impl: payloads.delta_loop().compile(checkpointer=savers[impl]) for impl in IMPLS}
        memory = payloads.delta_loop().compile(checkpointer=self.memory)
        for steps, calls, row in (
            (300, self.sizes.get_state_calls[0], "DeltaChannel get_state @300"),
            (self.sizes.delta_steps, self.sizes.get_state_calls[1], "DeltaChannel get_state @long"),
        ):

            def get_state(impl: str, i: int, steps: int = steps) -> None:
                state = graphs[impl].get_state(
                    {"configurable": {"thread_id": f"{impl}-delta-{steps}"}}
                )
                assert state.values["turns"] == steps, state.values["turns"]

            config = {"configurable": {"thread_id": f"memory-delta-{steps}"}}
            self.alternate(
                cfg.name,
                row,
                calls,
                get_state,
                floor=lambda i, config=config: memory.get_state(config),  # type: ignore[misc]
            )

    def run_graph(self, cfg: Config, savers: Any, conn: Any, r: int) -> None:
        """The 8-node graph (ms per superstep), each saver's and the floor's invoked in turn (see
        alternate): a moment of machine noise does not land on one saver only."""
        graphs = {impl: payloads.eight_nodes().compile(checkpointer=savers[impl]) for impl in IMPLS}
        floor_graph = payloads.eight_nodes().compile(checkpointer=floors.DriverFloor(conn))

        def invoke(graph: Any, thread: str) -> float:
            t0 = time.perf_counter()
            graph.invoke(payloads.graph_input(), {"configurable": {"thread_id": thread}})
            return (time.perf_counter() - t0) / GRAPH_SUPERSTEPS

        tag = f"{cfg.name}-{r}"
        self.alternate(
            cfg.name,
            "8-node graph, sync, per superstep",
            self.sizes.graph_invokes,
            lambda impl, i: invoke(graphs[impl], f"{impl}-graph-{tag}-{i}"),
            floor=lambda i: invoke(floor_graph, f"floor-graph-{tag}-{i}"),
        )

    def run_async(self, cfg: Config, r: int) -> None:
        """50 threads of 3 invokes each of the 8-node graph, concurrently (supersteps/s): the two
        savers and the floor as blocks, who goes first rotating with the round."""
        parties = (*IMPLS, "floor")
        k = r % len(parties)
        for who in parties[k:] + parties[:k]:
            rate = asyncio.run(self._async_block(cfg, who, r))
            self.record(cfg.name, "50 threads async, 3 invokes each", who, rate, "supersteps/s")

    async def _async_block(self, cfg: Config, who: str, r: int) -> float:
        async def run(saver: Any) -> float:
            graph = payloads.eight_nodes().compile(checkpointer=saver)

            async def one(i: int) -> None:
                thread = f"{who}-conc-{cfg.name}-{r}-{i}"
                for _ in range(ASYNC_INVOKES):
                    await graph.ainvoke(
                        payloads.graph_input(), {"configurable": {"thread_id": thread}}
                    )

            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(ASYNC_THREADS)))
            return ASYNC_THREADS * ASYNC_INVOKES * GRAPH_SUPERSTEPS / (time.perf_counter() - t0)

        if who != "floor":
            async with cfg.async_saver(who, self.dsn) as saver:
                return await run(saver)
        kwargs = {"autocommit": True, "prepare_threshold": cfg.floor_prepare}
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.dsn, min_size=ASYNC_POOL_SIZE, max_size=ASYNC_POOL_SIZE, kwargs=kwargs, open=False
        )
        await pool.open(wait=True)
        try:
            return await run(floors.AsyncDriverFloor(pool))
        finally:
            await pool.close()

    # ------------------------------------------------------------------ once per run

    def round_trips(self) -> dict[str, dict[str, int]]:
        """Round trips per operation on the wire, after a warm-up, each saver on one connection of
        the docs' configuration."""
        out: dict[str, dict[str, int]] = {}
        for impl in IMPLS:
            with psycopg.connect(self.dsn, **pool_kwargs(0)) as conn:
                saver: Any = PostgresSaver(conn) if impl == "ours" else OfficialSaver(conn)
                cfgs = put_chain(saver, f"{impl}-rt-{uuid.uuid4().hex[:6]}", 3)
                last, first = cfgs[-1], cfgs[0]
                ops: dict[str, Callable[[], Any]] = {
                    "put": lambda s=saver, i=impl: put_chain(
                        s, f"{i}-rt2-{uuid.uuid4().hex[:6]}", 1
                    ),
                    "put_writes": lambda s=saver, c=last: s.put_writes(
                        c, payloads.three_writes(), "t"
                    ),
                    "get_tuple": lambda s=saver, c=last: s.get_tuple(c),
                    "list(limit=20)": lambda s=saver, c=first: list(s.list(c, limit=20)),
                    "delete_thread": lambda s=saver, i=impl: s.delete_thread(f"{i}-nothing"),
                }
                for name, op in ops.items():
                    op()  # warm: the first execution of a statement also prepares it
                    out.setdefault(name, {})[impl] = count_round_trips(conn, op)
        return out

    def storage(self) -> dict[str, Any]:
        """Bytes per 1,000 checkpoints of each saver's tables in the public schema (ours: named
        pgsaver_*), after VACUUM ANALYZE."""
        official_tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
                ).fetchall()
            ]
            ours = [n for n in names if n.startswith("pgsaver_") and "migration" not in n]
            tables = {"ours": ours, "official": [n for n in official_tables if n in names]}
            count = {
                impl: _count(conn, next((t for t in ts if t.endswith("checkpoints")), None))
                for impl, ts in tables.items()
            }
            out: dict[str, Any] = {"tables": {}, "total": {}}
            for impl, ts in tables.items():
                n = count[impl] or count["official"]
                if not n:
                    continue
                total = 0.0
                for table in ts:
                    size = conn.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()
                    per = size[0] / n * 1000  # type: ignore[index]
                    out["tables"].setdefault(impl, {})[table] = per
                    total += per
                out["total"][impl] = total
        return out


def _count(conn: psycopg.Connection[Any], table: str | None) -> int:
    if table is None:
        return 0
    row = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    return int(row[0]) if row else 0


def count_round_trips(conn: psycopg.Connection[Any], op: Callable[[], Any]) -> int:
    """Round trips op makes on conn: the server's ReadyForQuery messages in libpq's trace."""
    fd, path = tempfile.mkstemp(prefix="lgps-bench-trace-")
    try:
        conn.pgconn.trace(fd)
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            op()
        finally:
            conn.pgconn.untrace()
        with open(path, encoding="utf-8", errors="replace") as f:
            return sum(1 for m in f if m.startswith("B") and "\tReadyForQuery" in m)
    finally:
        os.close(fd)
        os.unlink(path)
