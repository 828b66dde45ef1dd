"""Real LangGraph graphs compiled with both savers, compared with the documented behaviour and with
LangGraph's InMemorySaver."""

from __future__ import annotations

import itertools
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from graphs import Flaky, approval, approval_in_subgraph, delta_chat, two_nodes, with_subgraph
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import StateGraph
from langgraph.types import Command, StateSnapshot

from langgraph_pg_saver import AsyncPostgresSaver, KeyringSerializer, PostgresSaver


@dataclass
class Runner:
    """Runs a graph with the sync or the async API, so each scenario is written once."""

    saver: BaseCheckpointSaver[Any]
    is_async: bool

    def compile(self, builder: StateGraph[Any]) -> Any:
        return builder.compile(checkpointer=self.saver)

    async def invoke(self, graph: Any, inp: Any, config: dict[str, Any]) -> Any:
        return await graph.ainvoke(inp, config) if self.is_async else graph.invoke(inp, config)

    async def state(self, graph: Any, config: dict[str, Any], **kw: Any) -> StateSnapshot:
        return (
            await graph.aget_state(config, **kw) if self.is_async else graph.get_state(config, **kw)
        )

    async def history(self, graph: Any, config: dict[str, Any]) -> list[StateSnapshot]:
        if self.is_async:
            return [s async for s in graph.aget_state_history(config)]
        return list(graph.get_state_history(config))

    async def update(
        self, graph: Any, config: dict[str, Any], values: Any, as_node: str | None = None
    ) -> Any:
        if self.is_async:
            return await graph.aupdate_state(config, values, as_node=as_node)
        return graph.update_state(config, values, as_node=as_node)


@pytest.fixture(
    params=[
        "sync",
        "async",
        "sync-pgbouncer",
        "async-pgbouncer",
        "sync-sealed",
        "async-sealed",
        "sync-elements",
        "async-pgbouncer-elements",
    ]
)
async def runner(request: pytest.FixtureRequest, db_dsn: str) -> AsyncIterator[Runner]:
    """Each scenario with each saver, direct and through a transaction-mode PgBouncer, with
    from_conn_string's defaults, direct with every value sealed by a KeyringSerializer, and with
    lists stored as their elements (direct, and through PgBouncer: the put function's form)."""
    dsn = db_dsn
    if "-pgbouncer" in request.param:
        dsn = request.getfixturevalue("bouncer").dsn(db_dsn)
    serde = KeyringSerializer({"k1": b"k" * 32}) if request.param.endswith("-sealed") else None
    lists: Any = "elements" if request.param.endswith("-elements") else "whole"
    if request.param.startswith("sync"):
        with PostgresSaver.from_conn_string(dsn, max_size=4, serde=serde, list_storage=lists) as s:
            yield Runner(s, False)
    else:
        async with AsyncPostgresSaver.from_conn_string(
            dsn, max_size=4, serde=serde, list_storage=lists
        ) as a:
            yield Runner(a, True)


def _cid(s: StateSnapshot) -> str:
    return str(s.config["configurable"]["checkpoint_id"])


def _shape(s: StateSnapshot) -> tuple[Any, ...]:
    """What must match a reference run: everything but ids and timestamps."""
    return (
        s.values,
        s.next,
        s.metadata.get("source") if s.metadata else None,
        s.metadata.get("step") if s.metadata else None,
        tuple((t.name, t.error is not None, len(t.interrupts)) for t in s.tasks),
        s.parent_config is None,
    )


async def _reference(
    build: Callable[[], StateGraph[Any]], steps: Callable[[Runner, Any], Any]
) -> list[Any]:
    ref = Runner(InMemorySaver(), False)
    graph = ref.compile(build())
    await steps(ref, graph)
    return [_shape(s) for s in await ref.history(graph, {"configurable": {"thread_id": "1"}})]


async def test_four_checkpoints_of_the_persistence_docs(runner: Runner) -> None:
    graph = runner.compile(two_nodes())
    config = {"configurable": {"thread_id": "1"}}
    result = await runner.invoke(graph, {"foo": "", "bar": []}, config)
    assert result == {"foo": "b", "bar": ["a", "b"]}

    history = await runner.history(graph, config)
    assert [s.values for s in history] == [
        {"foo": "b", "bar": ["a", "b"]},
        {"foo": "a", "bar": ["a"]},
        {"foo": "", "bar": []},
        {"bar": []},
    ]
    assert [s.next for s in history] == [(), ("node_b",), ("node_a",), ("__start__",)]
    assert [(s.metadata["source"], s.metadata["step"]) for s in history] == [  # type: ignore[index]
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    # newest first, each checkpoint's parent is the next one in the list
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert newer.parent_config["configurable"]["checkpoint_id"] == _cid(older)
        assert _cid(newer) > _cid(older)
    assert history[-1].parent_config is None
    assert [t.name for t in history[1].tasks] == ["node_b"]

    latest = await runner.state(graph, config)
    assert latest.values == {"foo": "b", "bar": ["a", "b"]}
    assert _cid(latest) == _cid(history[0])
    by_id = await runner.state(graph, history[2].config)
    assert by_id.values == {"foo": "", "bar": []}
    assert by_id.next == ("node_a",)

    async def steps(r: Runner, g: Any) -> None:
        await r.invoke(g, {"foo": "", "bar": []}, {"configurable": {"thread_id": "1"}})

    assert [_shape(s) for s in history] == await _reference(two_nodes, steps)


async def test_replay_from_an_earlier_checkpoint(runner: Runner) -> None:
    graph = runner.compile(two_nodes())
    config = {"configurable": {"thread_id": "replay"}}
    await runner.invoke(graph, {"foo": "", "bar": []}, config)
    history = await runner.history(graph, config)
    before_b = next(s for s in history if s.next == ("node_b",))

    result = await runner.invoke(graph, None, before_b.config)
    assert result == {"foo": "b", "bar": ["a", "b"]}
    after = await runner.history(graph, config)
    # the replay branches off before_b: walking the newest checkpoint's parents reaches it
    by_id = {_cid(s): s for s in after}
    walk, cursor = [], after[0]
    while cursor.parent_config is not None:
        walk.append(cursor)
        cursor = by_id[cursor.parent_config["configurable"]["checkpoint_id"]]
    assert _cid(before_b) in {_cid(s) for s in walk} | {_cid(cursor)}
    assert after[0].values == {"foo": "b", "bar": ["a", "b"]}
    # the original branch is untouched
    assert (await runner.state(graph, history[0].config)).values == history[0].values

    async def steps(r: Runner, g: Any) -> None:
        cfg = {"configurable": {"thread_id": "1"}}
        await r.invoke(g, {"foo": "", "bar": []}, cfg)
        hist = await r.history(g, cfg)
        await r.invoke(g, None, next(s for s in hist if s.next == ("node_b",)).config)

    assert [_shape(s) for s in after] == await _reference(two_nodes, steps)


async def test_update_state_forks(runner: Runner) -> None:
    graph = runner.compile(two_nodes())
    config = {"configurable": {"thread_id": "fork"}}
    await runner.invoke(graph, {"foo": "", "bar": []}, config)
    history = await runner.history(graph, config)
    before_b = next(s for s in history if s.next == ("node_b",))

    fork_config = await runner.update(graph, before_b.config, {"foo": "x", "bar": ["x"]})
    forked = await runner.state(graph, fork_config)
    assert forked.values == {"foo": "x", "bar": ["a", "x"]}
    assert forked.metadata is not None
    assert forked.metadata["source"] == "update"
    assert forked.parent_config is not None
    assert forked.parent_config["configurable"]["checkpoint_id"] == _cid(before_b)
    assert forked.next == ("node_b",)

    result = await runner.invoke(graph, None, fork_config)
    assert result == {"foo": "b", "bar": ["a", "x", "b"]}
    latest = await runner.state(graph, config)
    assert latest.values == {"foo": "b", "bar": ["a", "x", "b"]}


def needs_config_in_async_tasks(runner: Runner) -> None:
    """LangGraph's ``interrupt()`` finds the run's config through a context variable, which
    asyncio tasks carry from Python 3.11 on: before that, an async graph's interrupt raises
    "Called get_config outside of a runnable context", whatever the checkpointer."""
    if runner.is_async and sys.version_info < (3, 11):
        pytest.skip("interrupt() in an async graph needs Python 3.11+ (LangGraph)")


async def test_interrupt_and_resume(runner: Runner) -> None:
    needs_config_in_async_tasks(runner)
    graph = runner.compile(approval())
    config = {"configurable": {"thread_id": "hitl"}}
    out = await runner.invoke(graph, {"request": "refund", "answer": ""}, config)
    assert out["__interrupt__"][0].value == {"question": "approve refund?"}
    paused = await runner.state(graph, config)
    assert paused.next == ("ask",)
    assert paused.tasks[0].interrupts[0].value == {"question": "approve refund?"}

    out = await runner.invoke(graph, Command(resume="yes"), config)
    assert out == {"request": "refund", "answer": "yes"}
    done = await runner.state(graph, config)
    assert done.next == ()
    assert done.values == {"request": "refund", "answer": "yes"}


async def test_failed_node_resumes_without_rerunning_its_sibling(runner: Runner) -> None:
    flaky = Flaky()
    graph = runner.compile(flaky.graph())
    config = {"configurable": {"thread_id": "flaky"}}
    with pytest.raises(RuntimeError, match="bad node failed"):
        await runner.invoke(graph, {"log": []}, config)
    assert flaky.good_runs == 1
    failed = await runner.state(graph, config)
    # good's write is pending on the checkpoint, so only bad is left to run, with its error recorded
    assert failed.next == ("bad",)
    errors = {t.name: t.error for t in failed.tasks}
    assert errors["bad"] is not None

    flaky.bad_fails = False
    result = await runner.invoke(graph, None, config)
    assert flaky.good_runs == 1, "the successful sibling ran again: its pending write was lost"
    assert sorted(result["log"]) == ["bad", "good"]


async def test_subgraph_checkpoints_in_their_own_namespace(runner: Runner) -> None:
    graph = runner.compile(with_subgraph())
    config = {"configurable": {"thread_id": "sub"}}
    result = await runner.invoke(graph, {"foo": "x", "inner_log": []}, config)
    assert result == {"foo": "x|inner", "inner_log": ["ran"]}

    namespaces: set[str] = set()
    if runner.is_async:
        assert isinstance(runner.saver, AsyncPostgresSaver)
        async for t in runner.saver.alist({"configurable": {"thread_id": "sub"}}):
            namespaces.add(t.config["configurable"]["checkpoint_ns"])
    else:
        for t in runner.saver.list({"configurable": {"thread_id": "sub"}}):
            namespaces.add(t.config["configurable"]["checkpoint_ns"])
    child = [ns for ns in namespaces if ns]
    assert "" in namespaces
    assert child
    assert all(ns.startswith("child:") for ns in child)

    # the root namespace's history holds only root checkpoints
    root_history = await runner.history(graph, config)
    assert all(s.config["configurable"]["checkpoint_ns"] == "" for s in root_history)
    assert root_history[0].values == {"foo": "x|inner", "inner_log": ["ran"]}


async def test_subgraph_state_while_interrupted(runner: Runner) -> None:
    needs_config_in_async_tasks(runner)
    graph = runner.compile(approval_in_subgraph())
    config = {"configurable": {"thread_id": "sub-hitl"}}
    await runner.invoke(graph, {"request": "r", "answer": ""}, config)
    snap = await runner.state(graph, config, subgraphs=True)
    child_state = snap.tasks[0].state
    assert isinstance(child_state, StateSnapshot)
    assert child_state.next == ("ask",)
    assert str(child_state.config["configurable"]["checkpoint_ns"]).startswith("child:")
    out = await runner.invoke(graph, Command(resume="ok"), config)
    assert out == {"request": "r", "answer": "ok"}


async def test_state_survives_a_new_saver_instance(runner: Runner, db_dsn: str) -> None:
    graph = runner.compile(two_nodes())
    config = {"configurable": {"thread_id": "restart"}}
    await runner.invoke(graph, {"foo": "", "bar": []}, config)
    before = [_shape(s) for s in await runner.history(graph, config)]

    # as after a process restart: a brand-new saver and pool on the same database
    with PostgresSaver.from_conn_string(db_dsn, max_size=2, serde=runner.saver.serde) as fresh:
        g2 = two_nodes().compile(checkpointer=fresh)
        after = [_shape(s) for s in g2.get_state_history(config)]
        assert after == before
        g2.invoke({"foo": "", "bar": []}, config)
        assert g2.get_state(config).values == {"foo": "b", "bar": ["a", "b", "a", "b"]}


async def test_delta_channel_state_matches_in_memory_saver(runner: Runner) -> None:
    turns = 8  # snapshot_frequency=3: crosses several snapshots

    async def steps(r: Runner, g: Any) -> None:
        for _ in range(turns):
            await r.invoke(g, {"messages": ["hi"]}, {"configurable": {"thread_id": "1"}})

    graph = runner.compile(delta_chat())
    await steps(runner, graph)
    config = {"configurable": {"thread_id": "1"}}
    state = await runner.state(graph, config)
    assert state.values["turns"] == turns
    assert state.values["messages"] == [
        m for n in range(1, turns + 1) for m in ("hi", f"reply {n}")
    ]
    history = [_shape(s) for s in await runner.history(graph, config)]
    assert history == await _reference(delta_chat, steps)


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
async def test_every_durability_mode(runner: Runner, durability: str) -> None:
    """put() requires its parent to exist: every durability mode, subgraphs included, still writes."""
    from graphs import two_delta

    for build, inp in ((two_delta, {"a": ["x"]}), (with_subgraph, {"foo": "x", "inner_log": []})):
        graph = runner.compile(build())
        reference = build().compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": f"{durability}-{build.__name__}"}}
        for _ in range(3):
            if runner.is_async:
                await graph.ainvoke(inp, config, durability=durability)
            else:
                graph.invoke(inp, config, durability=durability)
            reference.invoke(inp, config, durability=durability)
        assert (await runner.state(graph, config)).values == reference.get_state(config).values
