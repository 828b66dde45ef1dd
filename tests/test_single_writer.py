"""One writer per thread (single_writer=True): a second writer that would fork a thread raises
ConcurrentUpdateError instead of silently losing inputs; replays and update_state still fork."""

from __future__ import annotations

import multiprocessing
import operator
import threading
from typing import Annotated, Any

import psycopg
import pytest
from helpers import checkpoint, config
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_pg_saver import ConcurrentUpdateError, PostgresSaver


class LogState(TypedDict):
    log: Annotated[list[str], operator.add]


def _seen(state: LogState) -> dict[str, Any]:
    return {"log": [f"{state['log'][-1]}-seen"]}


def _echo(state: LogState) -> dict[str, Any]:
    return {"log": [f"{state['log'][-2]}-echo"]}


def log_graph() -> StateGraph[Any]:
    g: StateGraph[Any] = StateGraph(LogState)
    g.add_node("seen", _seen)
    g.add_node("echo", _echo)
    g.add_edge(START, "seen")
    g.add_edge("seen", "echo")
    g.add_edge("echo", END)
    return g


def _writer(dsn: str, name: str, n: int, start: Any, out: Any, guard: bool = True) -> None:
    """A process that invokes the shared thread n times; reports which inputs raised."""
    raised: list[str] = []
    other: list[str] = []
    with PostgresSaver.from_conn_string(dsn, single_writer=guard) as saver:
        graph = log_graph().compile(checkpointer=saver)
        graph.get_state({"configurable": {"thread_id": "shared"}})  # connected and warm
        start.wait(60)
        for i in range(n):
            tag = f"{name}{i}"
            try:
                graph.invoke({"log": [tag]}, {"configurable": {"thread_id": "shared"}})
            except ConcurrentUpdateError:
                raised.append(tag)
            except Exception as exc:  # reported, fails the test
                other.append(f"{tag}: {type(exc).__name__}: {exc}")
    out.put((name, raised, other))


def _race(dsn: str, *, guard: bool) -> list[Any]:
    """Two processes invoking the shared thread 25 times each, starting together once ready;
    their reports (name, inputs that raised, other errors)."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(dsn, name, 25, start, out, guard)) for name in "ab"]
    for p in procs:
        p.start()
    results = [out.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    return results


def _children(dsn: str, thread: str) -> dict[str | None, list[str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT parent_checkpoint_id, checkpoint_id FROM pgsaver_checkpoints"
            " WHERE thread_id = %s AND checkpoint_ns = ''",
            (thread,),
        ).fetchall()
    children: dict[str | None, list[str]] = {}
    for parent, child in rows:
        children.setdefault(parent, []).append(child)
    return children


@pytest.mark.slow
def test_two_processes_on_one_thread_never_lose_an_input_silently(db_dsn: str) -> None:
    results = _race(db_dsn, guard=True)
    raised = {tag for _, tags, _ in results for tag in tags}
    print(f"{len(raised)} of 50 invokes lost the race")
    assert raised, "the two writers never overlapped: the guard was not exercised"
    assert not [o for _, _, others in results for o in others]
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        state = (
            log_graph()
            .compile(checkpointer=saver)
            .get_state({"configurable": {"thread_id": "shared"}})
        )
    log = state.values["log"]
    for name in "ab":
        for i in range(25):
            tag = f"{name}{i}"
            # every input is in the final state, whole, or its invoke raised
            assert tag in log or tag in raised, tag
            if tag in log and tag not in raised:
                assert f"{tag}-seen" in log
                assert f"{tag}-echo" in log
    # the history is one line: no checkpoint has two children
    forks = {p: c for p, c in _children(db_dsn, "shared").items() if len(c) > 1}
    assert not forks, forks
    assert len(set(log) & {f"{n}{i}" for n in "ab" for i in range(25)}) + len(raised) >= 50


@pytest.mark.slow
def test_without_the_guard_the_same_race_forks_and_loses_inputs(db_dsn: str) -> None:
    """The control: what single_writer=True prevents happens without it (as with the official
    saver), silently."""
    results = _race(db_dsn, guard=False)
    assert not [tag for _, tags, _ in results for tag in tags]  # nothing raised
    assert not [o for _, _, others in results for o in others]
    forks = {p: c for p, c in _children(db_dsn, "shared").items() if len(c) > 1}
    assert forks, "the two writers never overlapped"
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        log = (
            log_graph()
            .compile(checkpointer=saver)
            .get_state({"configurable": {"thread_id": "shared"}})
            .values["log"]
        )
    lost = [f"{n}{i}" for n in "ab" for i in range(25) if f"{n}{i}" not in log]
    print(f"{len(lost)} of 50 inputs missing from the final state, {len(forks)} forks")
    assert lost


def test_threads_of_one_process_are_guarded_too(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, single_writer=True, max_size=8) as saver:
        graph = log_graph().compile(checkpointer=saver)
        raised: list[str] = []
        errors: list[ConcurrentUpdateError] = []
        barrier = threading.Barrier(4)

        def work(n: int) -> None:
            barrier.wait()
            for i in range(6):
                tag = f"t{n}.{i}"
                try:
                    graph.invoke({"log": [tag]}, {"configurable": {"thread_id": "one"}})
                except ConcurrentUpdateError as exc:
                    errors.append(exc)
                    raised.append(tag)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        log = graph.get_state({"configurable": {"thread_id": "one"}}).values["log"]
        assert all(e.thread_id == "one" and e.newest_checkpoint_id for e in errors)
        print(f"{len(raised)} of 24 invokes lost the race")
        for n in range(4):
            for i in range(6):
                assert f"t{n}.{i}" in log or f"t{n}.{i}" in raised
        assert not {p: c for p, c in _children(db_dsn, "one").items() if len(c) > 1}


def test_replay_and_update_state_still_fork(db_dsn: str) -> None:
    cfg: Any = {"configurable": {"thread_id": "f"}}
    with PostgresSaver.from_conn_string(db_dsn, single_writer=True) as saver:
        graph = log_graph().compile(checkpointer=saver)
        graph.invoke({"log": ["x"]}, cfg)
        graph.invoke({"log": ["y"]}, cfg)
        history = list(graph.get_state_history(cfg))
        old = history[-3].config  # after "seen" of the first run
        graph.invoke(None, old)  # replay: a fork from an earlier checkpoint
        assert graph.get_state(cfg).values["log"] == ["x", "x-seen", "x-echo"]
        graph.update_state(history[2].config, {"log": ["edited"]})  # another fork
        assert graph.get_state(cfg).values["log"][-1] == "edited"
        graph.invoke({"log": ["z"]}, cfg)  # and the thread goes on from the newest
        assert graph.get_state(cfg).values["log"][-3:] == ["z", "z-seen", "z-echo"]
        # new input at an earlier checkpoint is a run of its own from there: refused, named
        with pytest.raises(ConcurrentUpdateError, match="another writer extended it first") as info:
            graph.invoke({"log": ["late"]}, history[2].config)
        assert info.value.thread_id == "f"
        assert info.value.parent_checkpoint_id == history[2].config["configurable"]["checkpoint_id"]


def test_a_retried_put_passes_the_guard(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, single_writer=True) as saver:
        cp = checkpoint({"a": 1})
        first = saver.put(config("r"), cp, {"source": "input", "step": -1}, {"a": 1})
        again = saver.put(config("r"), cp, {"source": "input", "step": -1}, {"a": 1})
        assert first == again
        nxt = checkpoint({"a": 2})
        saver.put(first, nxt, {"source": "loop", "step": 0}, {"a": 2})
        # a put without the guard's sources is never refused
        saver.put(first, checkpoint({"a": 3}), {"source": "update", "step": 1}, {"a": 3})
        with pytest.raises(ConcurrentUpdateError):
            saver.put(first, checkpoint({"a": 4}), {"source": "loop", "step": 1}, {"a": 4})
    # without single_writer the same put forks the thread, as in the official saver
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.put(first, checkpoint({"a": 5}), {"source": "loop", "step": 1}, {"a": 5})


def test_the_guard_refuses_to_run_outside_read_committed(db_dsn: str) -> None:
    """Its check needs a snapshot taken after its lock, which only READ COMMITTED gives: under
    another isolation it says so instead of letting a race through."""
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute("SELECT current_database()")
        admin.execute(
            "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation"
            " = ''repeatable read''', current_database()); END $$"
        )
    with PostgresSaver.from_conn_string(db_dsn, single_writer=True) as saver:
        with pytest.raises(
            psycopg.Error, match="single_writer needs transactions in READ COMMITTED"
        ):
            saver.put(config("rr"), checkpoint({"a": 1}), {"source": "input", "step": -1}, {"a": 1})
        # puts outside the guard's sources are not checked
        saver.put(config("rr"), checkpoint({"a": 1}), {"source": "update", "step": 0}, {"a": 1})
