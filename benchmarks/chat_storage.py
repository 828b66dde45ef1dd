"""What a conversation costs each saver as it grows: ``python -m benchmarks.chat_storage``.

Realistic chats, run as users run them: a compiled graph whose state is
``messages: Annotated[list, add_messages]``, on a pool with the official docs' settings, on a
fresh cluster with fsync on (``LANGGRAPH_PG_BENCH_DSN`` to use another server). Two graphs:

- ``chat``: one node; each turn a human message (~300 characters) in and an AI message (~800)
  out, with the metadata a chat model returns;
- ``tools``: an agent that calls a tool, the tool's answer (~1,500 characters), then the
  agent's reply: four messages a turn.

For each graph, thread length (``--turns``) and saver, one party at a time (nothing else writes),
it measures: table bytes per turn after VACUUM (each saver's own tables), WAL bytes per turn
(``pg_current_wal_lsn`` before and after), the median ``put`` of the last tenth of the turns, and
``get_tuple`` / ``get_state`` at the end (medians of ``--reads``, the two parties' calls
interleaved). The serialized messages' own
size is printed beside them. ``--json FILE`` keeps the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import psycopg
from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool
from typing_extensions import TypedDict

from benchmarks.payloads import _id, ai_message, text
from benchmarks.server import bench_database

#: ours as installed (lists stored whole), ours with list_storage="elements", the official saver
IMPLS = ("ours", "elements", "official")
_OURS = (
    "tablename LIKE 'pgsaver\\_%%' AND tablename NOT LIKE '%%migrations' "
    "AND tablename NOT LIKE 'pgsaver\\_store%%'"
)
TABLES = {
    "ours": _OURS,
    "elements": _OURS,
    "official": "tablename IN ('checkpoints', 'checkpoint_blobs', 'checkpoint_writes')",
}
#: each party's schema (ours twice, in two schemas)
SCHEMAS = {"ours": "public", "elements": "lists", "official": "public"}


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def chat_graph() -> StateGraph[Any]:
    g = StateGraph(Chat)
    g.add_node("model", lambda s: {"messages": [ai_message(800)]})
    g.add_edge(START, "model")
    g.add_edge("model", END)
    return g


def tools_graph() -> StateGraph[Any]:
    def agent(state: Chat) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [ai_message(600)]}
        call = {"name": "search", "args": {"query": text(60)}, "id": f"call_{_id()[:24]}"}
        return {"messages": [ai_message(80, tool_calls=[call])]}

    def tool(state: Chat) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        return {"messages": [ToolMessage(content=text(1500), tool_call_id=call["id"])]}

    def route(state: Chat) -> str:
        last = state["messages"][-1]
        return "tool" if getattr(last, "tool_calls", None) else END

    g = StateGraph(Chat)
    g.add_node("agent", agent)
    g.add_node("tool", tool)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tool", END])
    g.add_edge("tool", "agent")
    return g


GRAPHS: dict[str, Callable[[], StateGraph[Any]]] = {"chat": chat_graph, "tools": tools_graph}


@contextmanager
def _saver(impl: str, dsn: str) -> Iterator[Any]:
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(dsn, max_size=20, kwargs=kwargs, open=True) as pool:
        if impl in ("ours", "elements"):
            from langgraph_pg_saver import PostgresSaver

            lists = "elements" if impl == "elements" else "whole"
            saver: Any = PostgresSaver(pool, schema=SCHEMAS[impl], list_storage=lists)
        else:
            from langgraph.checkpoint.postgres import PostgresSaver as Official

            saver = Official(pool)  # type: ignore[arg-type]
        saver.setup()
        yield saver


def _scalar(dsn: str, sql: str) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
        return row[0] if row else None


def _table_bytes(dsn: str, impl: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM")
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size("
            "quote_ident(schemaname) || '.' || quote_ident(tablename))), 0) "
            f"FROM pg_tables WHERE schemaname = '{SCHEMAS[impl]}' AND {TABLES[impl]}"
        ).fetchone()
    return int(row[0]) if row else 0


def _clear(dsn: str, impl: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                f"SELECT tablename FROM pg_tables WHERE schemaname = '{SCHEMAS[impl]}'"
                f" AND {TABLES[impl]}"
            ).fetchall()
        ]
        for name in names:
            conn.execute(f'TRUNCATE "{SCHEMAS[impl]}"."{name}"')
        conn.execute("VACUUM FULL")


def _median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000 if times else float("nan")


def run_one(dsn: str, impl: str, graph: str, turns: int, threads: int) -> dict[str, Any]:
    """One party's run of ``threads`` conversations of ``turns`` turns on its cleared tables
    (the other party's stay, for the reads that follow)."""
    _clear(dsn, impl)
    with _saver(impl, dsn) as saver:
        app = GRAPHS[graph]().compile(checkpointer=saver)
        put = saver.put
        timed: list[tuple[int, float]] = []
        turn = [0]  # the turn being run (what timed_put files each put under)

        def timed_put(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return put(*args, **kwargs)
            finally:
                timed.append((turn[0], time.perf_counter() - start))

        saver.put = timed_put
        wal_start = _scalar(dsn, "SELECT pg_current_wal_lsn()")
        for t in range(threads):
            cfg = {"configurable": {"thread_id": f"{graph}-{t}"}}
            for i in range(turns):
                turn[0] = i
                app.invoke({"messages": [HumanMessage(content=text(300), id=_id())]}, cfg)
        wal = _scalar(dsn, f"SELECT pg_current_wal_lsn() - '{wal_start}'::pg_lsn")
        saver.put = put
        final = app.get_state({"configurable": {"thread_id": f"{graph}-0"}}).values["messages"]
        content = sum(len(saver.serde.dumps_typed(m)[1]) for m in final)
    tail = [s for n, s in timed if n >= turns - max(1, turns // 10)]
    table = _table_bytes(dsn, impl)
    per_turn = turns * threads
    return {
        "table_bytes_per_turn": table / per_turn,
        "wal_bytes_per_turn": float(wal) / per_turn,
        "content_bytes_per_turn": content / turns,
        "messages": len(final),
        "put_ms_last_tenth": _median_ms(tail),
    }


def read_both(dsn: str, graph: str, reads: int) -> dict[str, dict[str, float]]:
    """get_tuple and get_state of each party's first thread, the parties' calls interleaved (a
    shared machine's noise falls on both alike)."""
    times: dict[str, dict[str, list[float]]] = {
        impl: {"get_tuple_ms": [], "get_state_ms": []} for impl in IMPLS
    }
    cfg = {"configurable": {"thread_id": f"{graph}-0"}}
    with (
        _saver("ours", dsn) as ours,
        _saver("elements", dsn) as elements,
        _saver("official", dsn) as official,
    ):
        parties = {"ours": ours, "elements": elements, "official": official}
        apps = {k: GRAPHS[graph]().compile(checkpointer=v) for k, v in parties.items()}
        for i in range(reads + 5):  # the first five warm each pool and its statements
            for impl, saver in parties.items():
                start = time.perf_counter()
                saver.get_tuple(cfg)
                if i >= 5:
                    times[impl]["get_tuple_ms"].append(time.perf_counter() - start)
                start = time.perf_counter()
                apps[impl].get_state(cfg)
                if i >= 5:
                    times[impl]["get_state_ms"].append(time.perf_counter() - start)
    return {impl: {k: _median_ms(v) for k, v in t.items()} for impl, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="chat,tools")
    parser.add_argument("--turns", default="20,100", help="thread lengths, e.g. 20,100,500")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--json", dest="json_file")
    args = parser.parse_args()
    graphs = [g for g in args.graphs.split(",") if g]
    lengths = [int(t) for t in args.turns.split(",") if t]
    results: list[dict[str, Any]] = []
    with bench_database("lgps_chat_storage") as dsn:
        for graph in graphs:
            for turns in lengths:
                # long threads: one conversation (the official saver's writes grow with the
                # square of its length)
                threads = args.threads if turns <= 100 else 1
                row: dict[str, Any] = {"graph": graph, "turns": turns, "threads": threads}
                for impl in IMPLS:
                    row[impl] = run_one(dsn, impl, graph, turns, threads)
                for impl, measured in read_both(dsn, graph, args.reads).items():
                    row[impl].update(measured)
                results.append(row)
                _print(row)
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(results, f, indent=2)


def _print(row: dict[str, Any]) -> None:
    ours, lists, off = row["ours"], row["elements"], row["official"]
    print(
        f"\n{row['graph']}, {row['turns']} turns x {row['threads']} threads "
        f"({ours['messages']} messages; {ours['content_bytes_per_turn'] / 1024:.1f} kB of "
        "serialized messages a turn)"
    )
    print("| | ours | ours, elements | official | ours / official | elements / official |")
    print("|---|---|---|---|---|---|")
    for key, label, scale, unit in (
        ("table_bytes_per_turn", "table bytes per turn", 1024, "kB"),
        ("wal_bytes_per_turn", "WAL bytes per turn", 1024, "kB"),
        ("put_ms_last_tenth", "put, last tenth of the turns", 1, "ms"),
        ("get_tuple_ms", "get_tuple at the end", 1, "ms"),
        ("get_state_ms", "get_state at the end", 1, "ms"),
    ):
        a, e, b = ours[key] / scale, lists[key] / scale, off[key] / scale
        print(
            f"| {label} | {a:.2f} {unit} | {e:.2f} {unit} | {b:.2f} {unit} "
            f"| {a / b:.2f}x | {e / b:.2f}x |"
        )


if __name__ == "__main__":
    main()
