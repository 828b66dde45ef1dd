"""Side-by-side benchmark: langgraph-pg-saver against the official langgraph-checkpoint-postgres.

    make bench                      # or: python benchmarks/bench.py [--rounds 5] [--quick]

Both savers run the same workloads in one process, on one Postgres server with default settings
(fsync on): a throwaway cluster from the local server binaries, or LANGGRAPH_PG_BENCH_DSN. Single
operations (put, put_writes, get_tuple, list, get_state) and the sync graph's invokes alternate
between the savers and the floor call by call, so all see the same moments of a noisy shared
machine; the async workload runs as blocks, and rounds rotate which of the two savers and the floor
goes first. Each workload reports the median over rounds of each round's median per-operation
latency (or the block's throughput), the min-max, and the ratio official/ours (>1: we are
faster), next to a floor measured in the same rounds (see FLOORS). "get_tuple by id, stale
statistics" reads from tables of their own (schema bench_stale) whose statistics were taken while two
checkpoints held thousands of writes each. Results also go to benchmarks/results/latest.json. This is
not a test: it asserts nothing.
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
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as OfficialAsyncSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
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


_VALUES: dict[int, list[str]] = {}


def blob(n: int) -> str:
    """A random n-character string, drawn from 256 pre-generated ones: generating 2 KB of random
    text costs ~0.3 ms of Python, which would otherwise be timed inside every graph superstep."""
    pool = _VALUES.get(n)
    if pool is None:
        chars = string.ascii_letters + string.digits
        pool = _VALUES[n] = ["".join(rng.choices(chars, k=n)) for _ in range(256)]
    return rng.choice(pool)


def three_writes() -> list[tuple[str, Any]]:
    return [("ch0", blob(1000)), ("ch1", blob(1000)), ("ch2", blob(1000))]


# ---------------------------------------------------------------------------- saver factories


OURS_PREPARE: int | None = 5  # --ours-prepare: from_conn_string's default; "none" = pooler mode
# --official-prepare: the official from_conn_string prepares every statement (0); "none" is what its
# users must pass behind a pooler without prepared statements
OFFICIAL_PREPARE: int | None = 0


STALE_TABLES = {
    "ours": ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes"),
    "official": ("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
}


def sync_saver(
    impl: str, dsn: str, stack: ExitStack, schema: str | None = None
) -> BaseCheckpointSaver[Any]:
    """A saver as its users make it; with ``schema``, its tables live there (ours: the schema
    option; the official saver's tables follow the connection's search_path)."""
    if impl == "ours":
        return stack.enter_context(
            PostgresSaver.from_conn_string(
                dsn, max_size=4, prepare_threshold=OURS_PREPARE, schema=schema or "public"
            )
        )
    if OFFICIAL_PREPARE == 0 and schema is None:
        return stack.enter_context(OfficialSaver.from_conn_string(dsn))
    options = {"options": f"-c search_path={schema}"} if schema else {}
    conn = stack.enter_context(
        psycopg.connect(
            dsn,
            autocommit=True,
            prepare_threshold=OFFICIAL_PREPARE,
            row_factory=dict_row,
            **options,
        )
    )
    return OfficialSaver(conn)


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


class Chain:
    """Checkpoints of one thread, one put at a time: the first stores every channel, each next one
    changes `changed` of them (so two savers' puts can be timed alternately)."""

    def __init__(
        self,
        saver: BaseCheckpointSaver[Any],
        thread: str,
        *,
        channels: int = 12,
        changed: int = 2,
        value_size: int = 2000,
        writes: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.saver, self.changed, self.value_size, self.writes = saver, changed, value_size, writes
        self.names = [f"ch{i}" for i in range(channels)]
        self.metadata = metadata or {}
        self.versions: dict[str, Any] = {}
        self.values: dict[str, Any] = {}
        self.config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        self.configs: list[Any] = []

    def step(self) -> float:
        """One put (plus the fixture's writes); returns the seconds the put took."""
        step = len(self.configs)
        touched = self.names if step == 0 else rng.sample(self.names, self.changed)
        new_versions = {}
        for ch in touched:
            self.versions[ch] = self.saver.get_next_version(self.versions.get(ch), None)
            self.values[ch] = blob(self.value_size)
            new_versions[ch] = self.versions[ch]
        cp = make_checkpoint(dict(self.values), dict(self.versions), step)
        md = {"source": "loop", "step": step, "parents": {}, **self.metadata}
        t0 = time.perf_counter()
        self.config = self.saver.put(self.config, cp, md, new_versions)
        elapsed = time.perf_counter() - t0
        self.configs.append(self.config)
        for w in range(self.writes):
            self.saver.put_writes(self.config, three_writes(), f"task-{w}")
        return elapsed


def put_chain(saver: BaseCheckpointSaver[Any], thread: str, n: int, **kwargs: Any) -> list[Any]:
    """n checkpoints on one thread (see Chain); returns their configs."""
    chain = Chain(saver, thread, **kwargs)
    for _ in range(n):
        chain.step()
    return chain.configs


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


# ---------------------------------------------------------------------------- floors

FLOORS = (
    "floor: put/put_writes: one durable INSERT of the same payload (3 rows) in one statement;"
    " get_tuple: the same rows read by primary key in one prepared statement and deserialized;"
    " list(thread): its 20 checkpoint rows, their distinct values and writes, the same way;"
    " list(None, filter): one round trip; graphs: LangGraph over InMemorySaver plus one durable 1-row"
    " INSERT of the serialized payload per put and put_writes over the same driver; get_state: LangGraph"
    " with InMemorySaver."
    " Single-operation and sync graph floors run interleaved with the savers' calls. best: official / floor"
)


def _floor_writes_of(alias: str) -> str:
    """The floors' last part: the pending writes of the checkpoints in CTE ``alias``, by key."""
    return f"""UNION ALL
SELECT NULL, NULL, w.type, w.blob
FROM {alias} CROSS JOIN LATERAL (
    SELECT w.type, w.blob FROM pgsaver_writes AS w
    WHERE w.thread_id = {alias}.thread_id AND w.checkpoint_ns = {alias}.checkpoint_ns
      AND w.checkpoint_id = {alias}.checkpoint_id
    OFFSET 0
) AS w
"""


ROWS_FLOOR_SQL = """
WITH c AS (
    SELECT * FROM pgsaver_checkpoints
    WHERE thread_id = %(t)s AND checkpoint_ns = '' {and_id}
    ORDER BY checkpoint_id DESC LIMIT 1
)
SELECT c.metadata, c.channel_versions, c.type, c.checkpoint FROM c
UNION ALL
SELECT NULL, NULL, b.type, b.blob
FROM c CROSS JOIN LATERAL jsonb_each_text(c.channel_versions) AS e
CROSS JOIN LATERAL (
    SELECT b.type, b.blob FROM pgsaver_blobs AS b
    WHERE b.thread_id = c.thread_id AND b.checkpoint_ns = c.checkpoint_ns
      AND b.channel = e.key AND b.version = e.value
    OFFSET 0  -- by primary key, whatever the statistics say (a hash join would read every blob)
) AS b
""" + _floor_writes_of("c")

LIST_FLOOR_SQL = """
WITH k AS (
    SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint, channel_versions, metadata
    FROM pgsaver_checkpoints
    WHERE thread_id = %(t)s AND checkpoint_ns = ''
    -- a hidden limit: with a plain LIMIT 20 the generic plan expected a dozen rows per thread and
    -- read and sorted the whole 1,000-checkpoint thread (1.3 ms instead of 0.7 ms)
    ORDER BY checkpoint_id DESC LIMIT (SELECT 20::bigint)
), v AS (
    SELECT DISTINCT e.key, e.value FROM k CROSS JOIN LATERAL jsonb_each_text(k.channel_versions) AS e
)
SELECT k.channel_versions, k.metadata, k.type, k.checkpoint FROM k
UNION ALL
SELECT NULL, NULL, b.type, b.blob
FROM v CROSS JOIN LATERAL (
    SELECT b.type, b.blob FROM pgsaver_blobs AS b
    WHERE b.thread_id = %(t)s AND b.checkpoint_ns = '' AND b.channel = v.key AND b.version = v.value
    OFFSET 0
) AS b
""" + _floor_writes_of("k")

FLOOR_TABLE = (
    "CREATE TABLE IF NOT EXISTS bench_floor (k bigint PRIMARY KEY, v bytea)",
    "ALTER TABLE bench_floor ALTER v SET STORAGE MAIN",  # kept whole in its row, as ours
)
FLOOR_INSERT = "INSERT INTO bench_floor VALUES (%s, %s)"


def make_floor_table(conn: psycopg.Connection[Any]) -> None:
    for statement in FLOOR_TABLE:
        conn.execute(statement)


_FLOOR_SERDE = JsonPlusSerializer()


def decoded(rows: list[Any]) -> list[Any]:
    """What any saver must do with the rows it read: deserialize each value, write and checkpoint
    (the last two columns are a serde type and its bytes; the JSONB columns arrive parsed). The
    list floor reads each distinct value once, so it decodes it once, as the saver does for values
    that decode to immutable objects (the bench's strings)."""
    loads = _FLOOR_SERDE.loads_typed
    return [loads((row[-2], row[-1])) for row in rows if row[-2] != "empty"]


def floor_key() -> int:
    return uuid.uuid4().int >> 65


class _PayloadFloor(InMemorySaver):
    """InMemorySaver that can tell the bytes a put or put_writes must make durable: what it
    serialized for the call (the new channel values, the checkpoint and its metadata, or the
    writes)."""

    def put_payload(self, stored: Any, new_versions: Any) -> bytes:
        c = stored["configurable"]
        thread, ns = c["thread_id"], c["checkpoint_ns"]
        parts = [self.blobs[(thread, ns, k, v)][1] for k, v in new_versions.items()]
        body, meta, _ = self.storage[thread][ns][c["checkpoint_id"]]
        return b"".join((*parts, body[1], meta[1]))

    def writes_payload(self, config: Any, writes: Any, task_id: str) -> bytes:
        c = config["configurable"]
        stored = self.writes[(c["thread_id"], c.get("checkpoint_ns", ""), c["checkpoint_id"])]
        return b"".join(
            stored[(task_id, WRITES_IDX_MAP.get(ch, idx))][2][1]
            for idx, (ch, _) in enumerate(writes)
        )


class DriverFloor(_PayloadFloor):
    """InMemorySaver that also pays the least any Postgres saver pays over psycopg: one durable
    single-row INSERT per put and per put_writes, carrying the bytes the call must make durable
    (see _PayloadFloor), and one round trip per get_tuple."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        super().__init__()
        self.conn = conn

    def get_tuple(self, config: Any) -> Any:
        self.conn.execute("SELECT 1").fetchone()
        return super().get_tuple(config)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        self.conn.execute(FLOOR_INSERT, (floor_key(), self.put_payload(stored, new_versions)))
        return stored

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        self.conn.execute(FLOOR_INSERT, (floor_key(), self.writes_payload(config, writes, task_id)))


class AsyncDriverFloor(_PayloadFloor):
    """DriverFloor for the async workload, over its own pool of 10."""

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        super().__init__()
        self.pool = pool

    async def _statement(self, query: str, params: Any = None) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(query, params)

    async def aget_tuple(self, config: Any) -> Any:
        await self._statement("SELECT 1")
        return self.get_tuple(config)

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = self.put(config, checkpoint, metadata, new_versions)
        await self._statement(FLOOR_INSERT, (floor_key(), self.put_payload(stored, new_versions)))
        return stored

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)
        payload = self.writes_payload(config, writes, task_id)
        await self._statement(FLOOR_INSERT, (floor_key(), payload))


# ---------------------------------------------------------------------------- workloads


GET_STATE_CALLS = {True: 20, False: 3}  # per saver and round: at 300 supersteps, at 20,000
GRAPH_INVOKES = 24  # per saver and round, of the 8-node graph (9 supersteps each)
PW_CHECKPOINTS = 300  # checkpoints the put_writes workload spreads its tasks over
STALE_SCHEMA = "bench_stale"  # both savers' tables for the stale-statistics workload
FAN_OUT = 1000  # put_writes calls (3 writes each) on each of the two fan-out checkpoints


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
        self.floor_ops: dict[str, Callable[[int], Any]] = {}  # set by run_single_ops
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
        """Per round: the async workload's floor (see FLOORS); the other floors run interleaved with
        the savers' calls (single_op_floors, run_graphs)."""
        with psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0) as conn:
            make_floor_table(conn)

        async def concurrent() -> None:
            pool = AsyncConnectionPool(
                self.dsn,
                min_size=10,
                max_size=10,
                kwargs={"autocommit": True, "prepare_threshold": 0},
                open=False,
            )
            await pool.open(wait=True)
            try:
                agraph = eight_nodes().compile(checkpointer=AsyncDriverFloor(pool))

                async def one(i: int) -> None:
                    for _ in range(3):
                        await agraph.ainvoke(
                            {"log": []}, {"configurable": {"thread_id": f"floor-conc-{r}-{i}"}}
                        )

                t0 = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(50)))
                self.floor("50 threads async, pool of 10", 50 * 3 * 9 / (time.perf_counter() - t0))
            finally:
                await pool.close()

        asyncio.run(concurrent())

    def single_op_floors(self, conn: psycopg.Connection[Any]) -> dict[str, Callable[[int], Any]]:
        """The single-operation floors (see FLOORS), as ops that alternate with the savers' calls."""
        make_floor_table(conn)

        def insert(sizes: tuple[int, ...]) -> Callable[[int], Any]:
            rows = ", ".join(["(%s, %s)"] * len(sizes))

            def op(i: int) -> Any:
                args: list[Any] = []
                for size in sizes:
                    args += [uuid.uuid4().int >> 65, os.urandom(size)]
                return conn.execute(f"INSERT INTO bench_floor VALUES {rows}", args)

            return op

        rows = self.rows_floor(conn)
        ids = [c["configurable"]["checkpoint_id"] for c in self.fixtures["ours"]["t200"]]
        picks = [rng.choice(ids) for _ in range(1000)]
        trip: Callable[[int], Any] = lambda i: conn.execute("SELECT 1").fetchone()  # noqa: E731
        memory_graph = delta_loop().compile(checkpointer=self.memory)
        floors: dict[str, Callable[[int], Any]] = {
            "put": insert((2000, 2000, 700)),
            "put_writes": insert((1000, 1000, 1000)),
            "get_tuple latest": lambda i: rows(None),
            "get_tuple by id": lambda i: rows(picks[i % len(picks)]),
            "list(thread, limit=20)": self.list_floor(conn),
            "list(None, filter)": trip,
        }
        for steps in (300, 2000 if self.quick else 20_000):
            config = {"configurable": {"thread_id": f"memory-delta-{steps}"}}
            floors[f"DeltaChannel get_state @{steps}"] = (
                lambda i, config=config: memory_graph.get_state(config)  # type: ignore[misc]
            )
        return floors

    def rows_floor(self, conn: psycopg.Connection[Any]) -> Callable[[str | None], Any]:
        """The rows get_tuple must read, in one prepared statement: the checkpoint row, one
        primary-key lookup per channel value, and its pending writes (on our tables, the t200
        fixture), decoded (see decoded) but not assembled into a tuple."""
        thread = self.fixtures["ours"]["t200"][0]["configurable"]["thread_id"]

        latest = ROWS_FLOOR_SQL.format(and_id="")
        by_id = ROWS_FLOOR_SQL.format(and_id="AND checkpoint_id = %(id)s")

        def rows(checkpoint_id: str | None) -> Any:
            query = latest if checkpoint_id is None else by_id
            with conn.cursor(binary=True) as cur:
                return decoded(cur.execute(query, {"t": thread, "id": checkpoint_id}).fetchall())

        return rows

    def list_floor(self, conn: psycopg.Connection[Any]) -> Callable[[int], Any]:
        """The rows list(thread, limit=20) must read (on our tables, the t1000 fixture), in one
        prepared statement, decoded (see decoded) but not assembled: its known single namespace, no
        order among them."""
        thread = self.fixtures["ours"]["t1000"][0]["configurable"]["thread_id"]

        def rows(i: int) -> Any:
            with conn.cursor(binary=True) as cur:
                return decoded(cur.execute(LIST_FLOOR_SQL, {"t": thread}).fetchall())

        return rows

    def record(
        self, workload: str, impl: str, value: float, unit: str = "ms", higher: bool = False
    ) -> None:
        self.samples.setdefault(workload, {i: [] for i in IMPLS})[impl].append(value)
        self.units[workload] = unit
        self.higher_is_better[workload] = higher

    def build_stale(
        self, impl: str, saver: BaseCheckpointSaver[Any], tables: tuple[str, ...]
    ) -> None:
        """The stale-statistics fixture, in STALE_SCHEMA: two checkpoints with FAN_OUT tasks of 3
        writes each, ANALYZE with autovacuum off, then a 200-checkpoint thread with 3 pending writes
        per checkpoint that the statistics never see. The planner then believes a checkpoint has
        thousands of writes."""
        fan = put_chain(saver, f"{impl}-fan", 2)
        for cfg in fan:
            for t in range(FAN_OUT):
                saver.put_writes(cfg, [("a", "x" * 100), ("b", "y" * 100), ("c", "z")], f"t{t}")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for table in tables:
                conn.execute(f"ALTER TABLE {STALE_SCHEMA}.{table} SET (autovacuum_enabled = false)")
                conn.execute(f"ANALYZE {STALE_SCHEMA}.{table}")
        self.fixtures[impl]["stale"] = put_chain(saver, f"{impl}-stale", 200, writes=1)

    def run_stale(self, savers: dict[str, BaseCheckpointSaver[Any]]) -> None:
        picks = [rng.randrange(200) for _ in range(300)]
        self.alternate(
            "get_tuple by id, stale statistics",
            300,
            lambda impl, i: savers[impl].get_tuple(self.fixtures[impl]["stale"][picks[i]]),
        )

    # fixtures built once per saver, outside the timed rounds
    def build_fixtures(self, impl: str, saver: BaseCheckpointSaver[Any]) -> None:
        fx = self.fixtures[impl]
        fx["t200"] = put_chain(saver, f"{impl}-t200", 200, writes=1)
        # put_writes goes round these: 15 writes per checkpoint over 5 rounds, not thousands on one
        # (a fan-out that large skews the writes table's statistics for every other workload)
        fx["pw"] = put_chain(saver, f"{impl}-pw", PW_CHECKPOINTS)
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

    def alternate(
        self,
        workload: str,
        n: int,
        op: Callable[[str, int], Any],
        unit: str = "ms",
        floor: Callable[[int], Any] | None = None,
    ) -> None:
        """n calls of op for each saver, and of the workload's floor, interleaved call by call (who
        goes first rotates), so all see the same moments of a noisy machine and the same cache
        state: a call that follows another backend's call runs on colder CPU caches, and a floor
        timed on its own looked 2x cheaper than the same statement timed between the savers' calls.
        Records each saver's median and the floor's. An op that returns a float reports its own
        timing (Chain.step times the put alone)."""
        floor = floor or self.floor_ops.get(workload)
        parties: tuple[str, ...] = IMPLS + (("floor",) if floor is not None else ())
        timings: dict[str, list[float]] = {p: [] for p in parties}
        for i in range(n):
            k = i % len(parties)
            for who in parties[k:] + parties[:k]:
                t0 = time.perf_counter()
                took = floor(i) if who == "floor" else op(who, i)  # type: ignore[misc]
                timings[who].append(took if isinstance(took, float) else time.perf_counter() - t0)
        for impl in IMPLS:
            self.record(workload, impl, median_ms(timings[impl]), unit)
        if floor is not None:
            self.floor(workload, median_ms(timings["floor"]))

    def run_single_ops(self, savers: dict[str, BaseCheckpointSaver[Any]], r: int) -> None:
        """The single operations, each interleaved with its floor (single_op_floors)."""
        with psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0) as conn:
            self.floor_ops = self.single_op_floors(conn)
            try:
                self._run_single_ops(savers, r)
            finally:
                self.floor_ops = {}

    def _run_single_ops(self, savers: dict[str, BaseCheckpointSaver[Any]], r: int) -> None:
        fx = self.fixtures
        # put: 12 channels, 2 changed per put, ~2 KB values (the first put, of all 12, is not timed)
        chains = {impl: Chain(savers[impl], f"{impl}-put-{r}") for impl in IMPLS}
        for chain in chains.values():
            chain.step()
        self.alternate("put", 300, lambda impl, i: chains[impl].step())
        # put_writes: 3 writes of ~1 KB, to checkpoints of their own (the get_tuple fixtures keep
        # the same pending writes in every round)
        self.alternate(
            "put_writes",
            300,
            lambda impl, i: savers[impl].put_writes(
                fx[impl]["pw"][i % PW_CHECKPOINTS], three_writes(), f"r{r}-task-{i}"
            ),
        )
        # get_tuple on a 200-checkpoint thread whose checkpoints have 3 pending writes each
        latest = {
            impl: {
                "configurable": {
                    "thread_id": fx[impl]["t200"][0]["configurable"]["thread_id"],
                    "checkpoint_ns": "",
                }
            }
            for impl in IMPLS
        }
        self.alternate(
            "get_tuple latest", 300, lambda impl, i: savers[impl].get_tuple(latest[impl])
        )
        picks = [rng.randrange(200) for _ in range(300)]
        self.alternate(
            "get_tuple by id",
            300,
            lambda impl, i: savers[impl].get_tuple(fx[impl]["t200"][picks[i]]),
        )

        # list(thread, limit=20) on a 1,000-checkpoint thread
        def list_thread(impl: str, i: int) -> None:
            thread = fx[impl]["t1000"][0]["configurable"]["thread_id"]
            got = list(savers[impl].list({"configurable": {"thread_id": thread}}, limit=20))
            assert len(got) == 20

        self.alternate("list(thread, limit=20)", 60, list_thread)
        # list(None, filter) across 2,000 single-checkpoint threads
        self.alternate(
            "list(None, filter)",
            60,
            lambda impl, i: list(
                savers[impl].list(None, filter={"user": f"user-{i % 100}", "tenant": "acme"})
            ),
        )

        # get_state of DeltaChannel threads
        dgraphs = {impl: delta_loop().compile(checkpointer=savers[impl]) for impl in IMPLS}
        for steps in (300, 2000 if self.quick else 20_000):

            def get_state(impl: str, i: int, steps: int = steps) -> None:
                config = {"configurable": {"thread_id": f"{impl}-delta-{steps}"}}
                state = dgraphs[impl].get_state(config)
                assert state.values["turns"] == steps, state.values["turns"]

            self.alternate(
                f"DeltaChannel get_state @{steps}", 2 * GET_STATE_CALLS[steps == 300], get_state
            )

    def run_graphs(self, savers: dict[str, BaseCheckpointSaver[Any]], r: int) -> None:
        """A real 8-node graph (ms per superstep): each saver's graph and the floor's are invoked in
        turn (see alternate), GRAPH_INVOKES times each; an invoke is 9 supersteps (input + 8
        nodes). Invoking them in turn, rather than timing a block of invokes per saver, keeps a
        moment of machine noise from landing on one saver only."""
        graphs = {impl: eight_nodes().compile(checkpointer=savers[impl]) for impl in IMPLS}

        def invoke(graph: Any, thread: str) -> float:
            t0 = time.perf_counter()
            graph.invoke({"log": []}, {"configurable": {"thread_id": thread}})
            return (time.perf_counter() - t0) / 9

        with psycopg.connect(self.dsn, autocommit=True, prepare_threshold=0) as conn:
            make_floor_table(conn)
            floor_graph = eight_nodes().compile(checkpointer=DriverFloor(conn))
            self.alternate(
                "graph superstep (sync)",
                GRAPH_INVOKES,
                lambda impl, i: invoke(graphs[impl], f"{impl}-graph-{r}-{i}"),
                floor=lambda i: invoke(floor_graph, f"floor-graph-{r}-{i}"),
            )

    async def run_async(self, impl: str, r: int) -> None:
        n_threads, invokes = 50, 3
        kwargs = {
            "autocommit": True,
            "prepare_threshold": OFFICIAL_PREPARE,
            "row_factory": dict_row,
        }
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
    parser.add_argument(
        "--official-prepare",
        type=lambda v: None if v.lower() == "none" else int(v),
        default=0,
        help="prepare_threshold for the official savers (default 0, its from_conn_string's; 'none'"
        " with --ours-prepare none compares the two behind a pooler without prepared statements)",
    )
    args = parser.parse_args(argv)
    global OURS_PREPARE, OFFICIAL_PREPARE
    OURS_PREPARE = args.ours_prepare
    OFFICIAL_PREPARE = args.official_prepare

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
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("ANALYZE")  # every run starts from the same statistics
                conn.execute(f"DROP SCHEMA IF EXISTS {STALE_SCHEMA} CASCADE")
                conn.execute(f"CREATE SCHEMA {STALE_SCHEMA}")
            stale = {impl: sync_saver(impl, dsn, stack, STALE_SCHEMA) for impl in IMPLS}
            for impl in IMPLS:
                stale[impl].setup()  # type: ignore[attr-defined]
                bench.build_stale(impl, stale[impl], STALE_TABLES[impl])
            parties = (*IMPLS, "floor")
            for r in range(args.rounds):
                bench.run_single_ops(savers, r)
                bench.run_stale(stale)
                bench.run_graphs(savers, r)
                # the async workload and its floor run as blocks; who goes first rotates, so the
                # floor is measured in the same positions as the savers
                k = r % len(parties)
                for who in parties[k:] + parties[:k]:
                    if who == "floor":
                        bench.run_floors(r)
                    else:
                        asyncio.run(bench.run_async(who, r))
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
    print(FLOORS)
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
                "official_prepare_threshold": args.official_prepare,
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
