"""A worker process for tests/test_deleted_threads.py: runs a graph on the thread given with a
PostgresSaver on the DSN given. Its node records that it started (table deleted_runs) and waits
until the test says go (a row in deleted_go), so that the test deletes the thread while the run is
in flight; in the "subgraph" shape the node then runs a subgraph, whose first checkpoint (no
parent) is stored after the delete. Prints the outcome as JSON: the graph's output, or the
error's type and attributes."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TypedDict

import psycopg
from langgraph.graph import START, StateGraph

from langgraph_pg_saver import PostgresSaver


class State(TypedDict):
    text: str
    turns: int


def subgraph() -> Any:
    """Two steps, each a checkpoint in the subgraph's namespace (the parent's checkpointer)."""
    g = StateGraph(State)
    g.add_node("one", lambda s: {"text": s["text"] + "a", "turns": s["turns"] + 1})
    g.add_node("two", lambda s: {"text": s["text"] + "b", "turns": s["turns"] + 1})
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    return g.compile()


def graph(dsn: str, saver: PostgresSaver, shape: str = "flat", thread: str = "") -> Any:
    inner = subgraph()

    def answer(state: State) -> dict[str, Any]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO deleted_runs (text) VALUES (%s)", (state["text"],))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if conn.execute("SELECT 1 FROM deleted_go").fetchone():
                    break
                time.sleep(0.05)
        if shape == "subgraph":
            out: dict[str, Any] = inner.invoke(state)
            with psycopg.connect(dsn, autocommit=True) as conn:  # what the subgraph stored
                conn.execute(
                    "INSERT INTO deleted_runs (text) SELECT 'subgraph rows: ' || count(*)"
                    " FROM pgsaver_checkpoints WHERE thread_id = %s AND checkpoint_ns <> ''",
                    (thread,),
                )
            return out
        return {"text": state["text"] + "!", "turns": state["turns"] + 1}

    def again(state: State) -> dict[str, Any]:
        return {"text": state["text"] + "?", "turns": state["turns"] + 1}

    g = StateGraph(State)
    g.add_node("answer", answer)
    g.add_node("again", again)
    g.add_edge(START, "answer")
    g.add_edge("answer", "again")
    return g.compile(checkpointer=saver)


def main() -> None:
    dsn, thread, text, durability, shape = sys.argv[1:6]
    with PostgresSaver.from_conn_string(dsn) as saver:
        cfg = {"configurable": {"thread_id": thread}}
        try:
            out = graph(dsn, saver, shape, thread).invoke(
                {"text": text, "turns": 0},
                cfg,
                durability=durability,  # type: ignore[arg-type]
            )
        except Exception as exc:
            print(
                json.dumps(
                    {
                        "error": type(exc).__name__,
                        "operation": getattr(exc, "operation", None),
                        "thread_id": getattr(exc, "thread_id", None),
                        "message": str(exc),
                    }
                )
            )
            return
    print(json.dumps({"output": out}))


if __name__ == "__main__":
    main()
