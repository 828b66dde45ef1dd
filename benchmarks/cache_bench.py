"""The node cache side by side: ``python -m benchmarks.cache_bench``.

PostgresCache (on a fresh cluster with fsync on, or ``LANGGRAPH_PG_BENCH_DSN``) against LangGraph's
RedisCache (on ``--redis``, the machine's Redis server by default) and InMemoryCache, as a graph
uses them: ``get`` of one key that holds an entry (a hit), ``get`` of one that does not (a miss),
``set`` of one entry with a TTL, and a cached graph's superstep: ``invoke`` of a one-node graph
whose node is cached (a hit each time), beside the same graph without a cache (the floor: what
LangGraph itself costs). Values are what a node returns: a small dict of text (``--value-bytes``).
Medians of ``--calls`` calls in each of ``--rounds`` rounds, the parties interleaved call by call;
the median of the rounds' medians is printed, with ratios to Redis's.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from langgraph.cache.base import BaseCache
from langgraph.cache.memory import InMemoryCache
from langgraph.cache.redis import RedisCache
from langgraph.graph import START, StateGraph
from langgraph.types import CachePolicy
from typing_extensions import TypedDict

from benchmarks.payloads import text
from benchmarks.report import interleaved as measure
from benchmarks.server import bench_database
from langgraph_pg_saver import PostgresCache

PARTIES = ("postgres", "redis", "memory")


class State(TypedDict):
    question: str
    answer: str


def app(cache: BaseCache[Any] | None, size: int) -> Any:
    answer = text(size)

    def node(state: State) -> dict[str, str]:
        return {"answer": answer}

    g = StateGraph(State)
    g.add_node("node", node, cache_policy=CachePolicy(ttl=3600) if cache is not None else None)
    g.add_edge(START, "node")
    return g.compile(cache=cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--value-bytes", type=int, default=2000)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--json", dest="json_file")
    args = parser.parse_args()
    import redis

    client = redis.Redis.from_url(args.redis)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        raise SystemExit(
            f"cache_bench: no Redis server at {args.redis} ({exc}): pass --redis URL"
        ) from None
    client.flushdb()
    with (
        bench_database("lgps_cache_bench") as dsn,
        PostgresCache.from_conn_string(dsn, max_size=4) as pg,
    ):
        pg.setup()
        caches: dict[str, BaseCache[Any]] = {
            "postgres": pg,
            "redis": RedisCache(client),
            "memory": InMemoryCache(),
        }
        value = {"answer": text(args.value_bytes)}
        hit, miss = (("bench", "node"), "hit"), (("bench", "node"), "miss")
        for cache in caches.values():
            cache.clear()
            cache.set({hit: (value, 3600)})
        counter = iter(range(10**9))
        graphs = {p: app(c, args.value_bytes) for p, c in caches.items()}
        floor = app(None, args.value_bytes)
        inputs = {"question": "what is cached?", "answer": ""}
        ops: dict[str, dict[str, Callable[[], Any]]] = {
            "get, a hit": {p: (lambda c=c: c.get([hit])) for p, c in caches.items()},
            "get, a miss": {p: (lambda c=c: c.get([miss])) for p, c in caches.items()},
            "set": {
                p: (lambda c=c: c.set({(("bench", "set"), str(next(counter))): (value, 3600)}))
                for p, c in caches.items()
            },
            "cached graph invoke (a hit)": {
                **{p: (lambda g=g: g.invoke(inputs)) for p, g in graphs.items()},
                "no cache": lambda: floor.invoke(inputs),
            },
        }
        results = measure(ops, args.calls, args.rounds)
    print(
        f"\nnode cache: medians of {args.rounds} rounds x {args.calls} calls, "
        f"values of {args.value_bytes} characters"
    )
    print("| | postgres | redis | memory | no cache | postgres / redis |")
    print("|---|---|---|---|---|---|")
    for op, by in results.items():
        none = f"{by['no cache']:.3f} ms" if "no cache" in by else ""
        print(
            f"| {op} | {by['postgres']:.3f} ms | {by['redis']:.3f} ms | {by['memory']:.3f} ms "
            f"| {none} | {by['postgres'] / by['redis']:.2f}x |"
        )
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(results, f, indent=2)
    client.flushdb()


if __name__ == "__main__":
    main()
