"""A worker process for tests/test_cache.py (imported as ``cache_worker``, then ``main()``): runs a graph whose "slow" node is cached by a
PostgresCache on the DSN given, for the input given, and prints the graph's output. The node counts
its runs in the table cache_runs, so the test sees which process ran it."""

from __future__ import annotations

import json
import sys
from typing import Any, TypedDict

import psycopg
from langgraph.graph import START, StateGraph
from langgraph.types import CachePolicy

from langgraph_pg_saver import PostgresCache


class State(TypedDict):
    x: int
    y: int


def graph(dsn: str, cache: PostgresCache[Any], ttl: int | None) -> Any:
    def slow(state: State) -> dict[str, int]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO cache_runs (x) VALUES (%s)", (state["x"],))
        return {"y": state["x"] * 10}

    g = StateGraph(State)
    g.add_node("slow", slow, cache_policy=CachePolicy(ttl=ttl))
    g.add_edge(START, "slow")
    return g.compile(cache=cache)


def main() -> None:
    dsn, x, ttl = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with PostgresCache.from_conn_string(dsn) as cache:
        out = graph(dsn, cache, None if ttl == "none" else int(ttl)).invoke({"x": x, "y": 0})
    print(json.dumps(out))
