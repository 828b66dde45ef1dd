"""Moving history over from langgraph-checkpoint-postgres: tables built by the official saver
itself from real graphs, imported, and read back as the official saver reads them."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from graphs import approval, delta_chat, two_nodes, with_subgraph
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.graph import END, START, StateGraph

from langgraph_pg_saver import PgSaverError, PostgresSaver, Report


class FanState(TypedDict):
    log: Annotated[list[str], operator.add]


def fan_out() -> StateGraph[Any]:
    """Parallel branches writing one channel: the order of their writes is the state."""
    g: StateGraph[Any] = StateGraph(FanState)
    for name in ("zeta", "alpha", "mid"):
        g.add_node(name, lambda s, name=name: {"log": [name]})
        g.add_edge(START, name)
        g.add_edge(name, END)
    return g


GRAPHS = {
    "plain": two_nodes,
    "delta": delta_chat,
    "approval": approval,
    "sub": with_subgraph,
    "fan": fan_out,
}


def _run(saver: Any) -> None:
    for name, builder in GRAPHS.items():
        graph = builder().compile(checkpointer=saver)
        for t in range(3):
            cfg = {"configurable": {"thread_id": f"{name}-{t}", "user": "u\u00e9"}}
            inp: Any = {"foo": "x", "bar": [f"v{t}", 1.5, None]} if name in ("plain", "sub") else {}
            if name == "approval":
                inp = {"request": f"r{t}"}
            if name == "fan":
                inp = {"log": [f"start{t}"]}
            for _ in range(2 if name != "approval" else 1):
                graph.invoke(inp, cfg)


def _history(saver: Any, name: str, thread: str) -> list[Any]:
    graph = GRAPHS[name]().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": thread}}
    return [
        (s.values, s.next, s.metadata, s.config, s.parent_config, [t.id for t in s.tasks])
        for s in graph.get_state_history(cfg)
    ]


def test_import_gives_the_official_savers_state_and_history(db_dsn: str) -> None:
    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        _run(official)
        want = {
            (name, f"{name}-{t}"): _history(official, name, f"{name}-{t}")
            for name in GRAPHS
            for t in range(3)
        }
        tuples = {
            key: [
                (t.config, t.checkpoint, t.metadata, t.pending_writes)
                for t in official.list({"configurable": {"thread_id": key[1]}})
            ]
            for key in want
        }
        states = {
            key: GRAPHS[key[0]]()
            .compile(checkpointer=official)
            .get_state({"configurable": {"thread_id": key[1]}}, subgraphs=True)
            for key in want
        }
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        plan = saver.import_official(dry_run=True)
        with psycopg.connect(db_dsn) as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM checkpoint_writes),"
                " (SELECT count(*) FROM checkpoint_blobs), (SELECT count(*) FROM pgsaver_checkpoints)"
            ).fetchone()
        assert counts is not None
        assert (plan.checkpoints, plan.writes, plan.blobs) == counts[:3]
        assert counts[3] == 0  # a dry run writes nothing
        seen: list[Report] = []
        report = saver.import_official(thread_batch=5, progress=seen.append)
        assert report.threads == len(want)
        assert report.checkpoints == plan.checkpoints
        assert report.writes == plan.writes
        assert report.blobs >= plan.blobs  # plus the inline values, as blobs here
        assert len(seen) == 3  # 15 threads, 5 a batch
        for (name, thread), history in want.items():
            assert _history(saver, name, thread) == history, thread
            state = (
                GRAPHS[name]()
                .compile(checkpointer=saver)
                .get_state({"configurable": {"thread_id": thread}}, subgraphs=True)
            )
            assert state == states[(name, thread)], thread
            ours = [
                (t.config, t.checkpoint, t.metadata, t.pending_writes)
                for t in saver.list({"configurable": {"thread_id": thread}})
            ]
            assert ours == tuples[(name, thread)], thread  # pending writes in the same order
        # again: nothing is imported twice
        again = saver.import_official()
        assert (again.checkpoints, again.writes, again.blobs) == (0, 0, 0)
        assert again.threads == len(want)
        # resumed from a thread id: only the later ones are looked at
        later = saver.import_official(start_after="plain-0", dry_run=True)
        assert later.threads == sum(1 for _, t in want if t > "plain-0")
        # the imported threads go on as ours
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({"foo": "x", "bar": ["more"]}, {"configurable": {"thread_id": "plain-0"}})
        last = graph.get_state({"configurable": {"thread_id": "plain-0"}})
        assert last.values["bar"][-3:] == ["more", "a", "b"]
        with pytest.raises(PgSaverError, match="no tables of langgraph-checkpoint-postgres"):
            saver.import_official(source_schema="nowhere")
