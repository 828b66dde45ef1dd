"""Multi-batch lifecycle jobs at the sizes ops teams run them: every batch of prune and retention
commits a state in which every checkpoint still stored reads exactly as before the job, wherever
the job stops; retention treats a thread as its root history (subgraph checkpoints go with the
root checkpoints that ran them).

A job is stopped for real: a statement trigger on the checkpoints table counts the job's delete
statements (one per batch) and raises in the one after the k-th, so batches 1..k are committed and
the (k+1)-th is rolled back, as when a deploy, a crash or Ctrl-C ends a job between batches. On
Citus (``LANGGRAPH_PG_SAVER_TEST_ON_CITUS``) the trigger is on the shards and its counter a
reference table.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from conftest import ON_CITUS
from graphs import persistent_subgraph, research_chat
from helpers import assert_parts_whole
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateSnapshot
from psycopg.types.json import Jsonb

from langgraph_pg_saver import PostgresSaver

DELTA_CHANNELS = ["messages", "findings"]

STOP_TRIGGER = """
CREATE TABLE lgps_test_stop (after int NOT NULL, seen int NOT NULL DEFAULT 0);
INSERT INTO lgps_test_stop (after) VALUES (-1);
CREATE FUNCTION lgps_test_stop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE lgps_test_stop SET seen = seen + 1;
    IF (SELECT after >= 0 AND seen > after FROM lgps_test_stop) THEN
        RAISE EXCEPTION 'test: the job stops after % batches', (SELECT after FROM lgps_test_stop);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER lgps_test_stop AFTER DELETE ON pgsaver_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION lgps_test_stop();
"""


@pytest.fixture(params=["whole", "elements"])
def saver(request: pytest.FixtureRequest, db_dsn: str) -> Iterator[PostgresSaver]:
    """Each job with lists stored whole and as their elements (whose parts each batch must
    keep for its survivors, and none for what it deleted)."""
    with PostgresSaver.from_conn_string(db_dsn, max_size=4, list_storage=request.param) as s:
        yield s


def cfg(thread: str, ns: str = "", cid: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if cid is not None:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def chat(graph: Any, thread: str, turns: int, *, pending_last: bool = False) -> None:
    """``turns`` turns of the research chat; an interrupt (every fifth turn, inside the
    subgraph) is answered, except on the last turn when ``pending_last``."""
    for i in range(turns):
        out = graph.invoke({"messages": [f"hi{i}"]}, cfg(thread))
        if "__interrupt__" in out and not (pending_last and i == turns - 1):
            graph.invoke(Command(resume=f"ok{i}"), cfg(thread))


def keys(dsn: str, thread: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(  # type: ignore[return-value]
            "SELECT checkpoint_ns, checkpoint_id FROM pgsaver_checkpoints WHERE thread_id = %s"
            " ORDER BY 1, 2",
            (thread,),
        ).fetchall()


def assert_owned(dsn: str, thread: str) -> None:
    """Every subgraph checkpoint left belongs to a root checkpoint left (metadata "parents")."""
    with psycopg.connect(dsn) as conn:
        orphans = conn.execute(
            "SELECT s.checkpoint_ns FROM pgsaver_checkpoints AS s WHERE s.thread_id = %s"
            " AND s.checkpoint_ns <> '' AND NOT EXISTS (SELECT 1 FROM pgsaver_checkpoints AS r"
            " WHERE r.thread_id = s.thread_id AND r.checkpoint_ns = ''"
            " AND r.checkpoint_id = s.metadata -> 'parents' ->> '')",
            (thread,),
        ).fetchall()
    assert orphans == [], f"subgraph checkpoints whose root checkpoint is gone: {orphans}"


def _snapshot(snap: StateSnapshot) -> Any:
    tasks = tuple(
        (
            t.name,
            tuple(i.value for i in t.interrupts),
            _snapshot(t.state) if isinstance(t.state, StateSnapshot) else None,
        )
        for t in snap.tasks
    )
    return (snap.values, snap.next, tasks)


def read_one(saver: PostgresSaver, graph: Any, thread: str, ns: str, cid: str) -> Any:
    """What a reader gets of one checkpoint, without the thread id: the stored tuple (values,
    metadata, parent, pending writes), the DeltaChannel history LangGraph reads for it, and for a
    root checkpoint the graph's get_state(subgraphs=True)."""
    conf = cfg(thread, ns, cid)
    tup = saver.get_tuple(conf)  # type: ignore[arg-type]
    if tup is None:
        return None
    parent = None if tup.parent_config is None else tup.parent_config["configurable"]
    # the history LangGraph reads: of the DeltaChannels with a version and no value stored here
    # (one that stores its value is not rebuilt, and its ancestors may go)
    replayed = [
        c
        for c in DELTA_CHANNELS
        if c in tup.checkpoint["channel_versions"] and c not in tup.checkpoint["channel_values"]
    ]
    history = saver.get_delta_channel_history(config=conf, channels=replayed)  # type: ignore[arg-type]
    state = _snapshot(graph.get_state(conf, subgraphs=True)) if ns == "" else None
    return (
        tup.checkpoint["channel_values"],
        tup.metadata,
        parent and (parent["checkpoint_ns"], parent["checkpoint_id"]),
        sorted(tup.pending_writes or [], key=repr),
        history,
        state,
    )


def read_all(saver: PostgresSaver, graph: Any, dsn: str, thread: str) -> dict[Any, Any]:
    return {k: read_one(saver, graph, thread, *k) for k in keys(dsn, thread)}


def assert_survivors_read_as_before(
    before: dict[Any, Any], saver: PostgresSaver, graph: Any, dsn: str, thread: str, what: str
) -> int:
    after = read_all(saver, graph, dsn, thread)
    assert set(after) <= set(before), what
    changed = [k for k, v in after.items() if v != before[k]]
    assert not changed, (
        f"{what}: {len(changed)} of {len(after)} survivors read differently, e.g. {changed[0]}:"
        f" {[(i, a, b) for i, (a, b) in enumerate(zip(after[changed[0]], before[changed[0]], strict=True)) if a != b]}"
    )
    return len(after)


@pytest.fixture
def stop_dsn(db_dsn: str) -> str:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        if ON_CITUS:
            # the trigger runs on the shards (on the workers), and its counter is a reference
            # table, which each worker has and may update
            # (one statement at a time: Citus sends a DDL statement's text to the workers)
            conn.execute("SET citus.enable_unsafe_triggers = on")
            table, insert, rest = STOP_TRIGGER.strip().split(";\n", 2)
            function, trigger = rest.split("END $$;\n")
            for statement in (table, insert, function + "END $$", trigger):
                conn.execute(statement)  # type: ignore[call-overload]
                if statement is table:
                    conn.execute("SELECT create_reference_table('lgps_test_stop')")
            # its update of the reference table runs from a statement on a shard (a test's
            # counter: one job at a time updates it)
            conn.execute(
                "ALTER FUNCTION lgps_test_stop() SET citus.allow_nested_distributed_execution = on"
            )
        else:
            conn.execute(STOP_TRIGGER)  # type: ignore[arg-type]
    return db_dsn


def stop_after(dsn: str, k: int) -> None:
    """The next job's (k+1)-th batch fails (-1: none does)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE lgps_test_stop SET after = %s, seen = 0", (k,))


def stopped_runs(
    saver: PostgresSaver,
    graph: Any,
    dsn: str,
    source: str,
    job: Any,
    max_batches: int,
) -> list[int]:
    """Run ``job(thread)`` on copies of ``source``, stopped after each possible batch, and check
    every survivor each time; returns how many survivors each stop left."""
    before = read_all(saver, graph, dsn, source)
    survivors: list[int] = []
    for k in range(max_batches + 1):
        copy = f"{source}-stop{k}"
        saver.copy_thread(source, copy)
        stop_after(dsn, k)
        stopped = False
        try:
            job(copy)
        except psycopg.errors.RaiseException as exc:
            if "the job stops" not in str(exc):
                raise
            stopped = True
        stop_after(dsn, -1)
        survivors.append(
            assert_survivors_read_as_before(
                before, saver, graph, dsn, copy, f"stopped after batch {k}"
            )
        )
        assert_parts_whole(dsn, copy)
        saver.delete_thread(copy)
        assert_parts_whole(dsn, copy)
        if not stopped:
            return survivors  # the job ran to its end within k batches
    raise AssertionError(f"the job needed more than {max_batches} batches")


@pytest.mark.parametrize(("batch", "keep_last"), [(1, 1), (7, 1), (7, 3)])
def test_a_prune_stopped_after_any_batch_leaves_every_survivor_whole(
    saver: PostgresSaver, stop_dsn: str, batch: int, keep_last: int
) -> None:
    graph = research_chat().compile(checkpointer=saver)
    chat(graph, "t", 6, pending_last=True)  # turn 5 interrupted and answered, turn 6 not
    doomed = saver.retention(keep_last=keep_last, thread_ids=["t"], dry_run=True).checkpoints
    assert doomed > 20

    def job(thread: str) -> None:
        saver.retention(keep_last=keep_last, thread_ids=[thread], batch=batch)

    survivors = stopped_runs(saver, graph, stop_dsn, "t", job, doomed // batch + 1)
    # every stop left fewer, down to what the finished job leaves
    assert survivors == sorted(survivors, reverse=True)
    assert len(survivors) >= doomed // batch


def test_retention_stopped_between_thread_batches_and_rerun(
    saver: PostgresSaver, stop_dsn: str
) -> None:
    graph = research_chat().compile(checkpointer=saver)
    for t in ("r1", "r2", "r3"):
        chat(graph, t, 4)
    before = {t: read_all(saver, graph, stop_dsn, t) for t in ("r1", "r2", "r3")}
    stop_after(stop_dsn, 5)
    with pytest.raises(psycopg.errors.RaiseException):
        saver.retention(keep_last=1, thread_batch=2, batch=4)
    stop_after(stop_dsn, -1)
    for t, b in before.items():
        assert_survivors_read_as_before(b, saver, graph, stop_dsn, t, f"{t} after the stop")
    # the same job run again finishes the work, and the graph goes on
    saver.retention(keep_last=1, thread_batch=2, batch=4)
    for t, b in before.items():
        n = assert_survivors_read_as_before(b, saver, graph, stop_dsn, t, f"{t} after the rerun")
        assert n < len(b)
    chat(graph, "r1", 1)


@pytest.mark.slow
def test_a_large_thread_pruned_in_default_batches_never_breaks_a_survivor(
    saver: PostgresSaver, stop_dsn: str
) -> None:
    """The issue's size: a thread of more than 1,500 root checkpoints (and a subgraph namespace
    per turn) pruned to its latest checkpoint in batches of the default 1,000, stopped after the
    first and the second batch."""
    graph = research_chat().compile(checkpointer=saver)
    chat(graph, "big", 330)
    root = sum(1 for ns, _ in keys(stop_dsn, "big") if ns == "")
    assert root > 1500

    def job(thread: str) -> None:
        saver.prune([thread], strategy="keep_latest")

    survivors = stopped_runs(saver, graph, stop_dsn, "big", job, 3)
    # stopped before the first batch, after the first, after the second; then the whole job
    assert len(survivors) == 4
    assert survivors[0] - survivors[1] == survivors[1] - survivors[2] == 1000
    # the finished job kept the latest checkpoint and the ancestors its DeltaChannels need, and
    # of 330 subgraph namespaces only one a kept ancestor ran (its get_state(subgraphs=True))
    job("big")
    left = keys(stop_dsn, "big")
    assert len(left) == survivors[-1] <= 10
    assert len({ns for ns, _ in left if ns}) <= 1
    assert_owned(stop_dsn, "big")


def test_readers_between_batches_never_see_a_survivor_change(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """A reader running while a prune deletes one checkpoint per batch: every checkpoint that is
    still stored after it was read was stored at every commit in between, so it must have read
    as before."""
    graph = research_chat().compile(checkpointer=saver)
    chat(graph, "live", 16, pending_last=True)
    before = read_all(saver, graph, db_dsn, "live")
    done = threading.Event()
    errors: list[BaseException] = []

    def prune() -> None:
        try:
            saver.retention(keep_last=1, thread_ids=["live"], batch=1)
        except BaseException as exc:  # reported by the reader's assertion
            errors.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=prune)
    worker.start()
    checked = 0
    try:
        while not done.is_set():
            for k in list(before):
                got = read_one(saver, graph, "live", *k)
                # gone by now: this read may have raced its deletion, and proves nothing
                if got is not None and k in set(keys(db_dsn, "live")):
                    assert got == before[k], f"a reader saw {k} changed while the prune ran"
                    checked += 1
    finally:
        worker.join(timeout=120)
    assert not errors, errors
    assert checked > 20  # reads that overlapped the job, of checkpoints it left


def test_retention_bounds_a_thread_with_subgraphs(saver: PostgresSaver, db_dsn: str) -> None:
    """keep-last counts a thread's root checkpoints: subgraph namespaces go with the root
    checkpoints that ran them; the pending interrupt inside a subgraph stays resumable."""
    graph = research_chat().compile(checkpointer=saver)
    chat(graph, "sub", 30, pending_last=True)  # turn 30 waits on an interrupt in its subgraph
    saver.copy_thread("sub", "sub-unpruned")
    before = read_all(saver, graph, db_dsn, "sub")
    namespaces = {ns for ns, _ in before if ns}
    assert len(namespaces) == 30
    plan = saver.prune(["sub"], strategy="keep_latest", dry_run=True)
    done = saver.prune(["sub"], strategy="keep_latest")
    assert (done.checkpoints, done.writes, done.blobs) == (
        plan.checkpoints,
        plan.writes,
        plan.blobs,
    )
    after = read_all(saver, graph, db_dsn, "sub")
    assert all(after[k] == before[k] for k in after)
    kept_ns = {ns for ns, _ in after if ns}
    assert_owned(db_dsn, "sub")
    pending_ns = graph.get_state(cfg("sub"), subgraphs=True).tasks[0].state.config  # type: ignore[union-attr]
    assert pending_ns["configurable"]["checkpoint_ns"] in kept_ns
    assert len(kept_ns) <= 2  # the pending one, and one a kept DeltaChannel ancestor ran
    assert len(after) <= 12
    assert done.checkpoints == len(before) - len(after)
    # get_state(subgraphs=True) of the head is what it was, and resuming works as on the copy
    assert _snapshot(graph.get_state(cfg("sub"), subgraphs=True)) == _snapshot(
        graph.get_state(cfg("sub-unpruned"), subgraphs=True)
    )
    graph.invoke(Command(resume="late"), cfg("sub"))
    graph.invoke(Command(resume="late"), cfg("sub-unpruned"))
    chat(graph, "sub", 2)
    chat(graph, "sub-unpruned", 2)
    assert graph.get_state(cfg("sub")).values == graph.get_state(cfg("sub-unpruned")).values


def test_a_subgraph_running_while_its_root_checkpoint_is_saved_keeps_its_checkpoints(
    db_dsn: str,
) -> None:
    """LangGraph runs a step's tasks, subgraphs included, while it saves that step's checkpoint in
    the background. A prune in between must not take the running subgraph's namespace for one
    whose root checkpoint is gone: the subgraph's next put would find its parent deleted
    (ParentCheckpointMissingError, the turn fails), and the writes of its deleted checkpoints
    would stay behind. Found by tests/test_lifecycle_chaos.py, whose kills delay puts."""
    waiting, pruned = threading.Event(), threading.Event()

    class LateRoot(PostgresSaver):
        """Saves the root checkpoint of step 5 (turn 2's, whose task runs the subgraph) only
        once a prune ran while that subgraph was running, as when the put waits for a
        connection or a retry."""

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            ns = config["configurable"].get("checkpoint_ns", "")
            if ns == "" and metadata.get("step") == 5:
                waiting.set()
                assert pruned.wait(30)
            stored = super().put(config, checkpoint, metadata, new_versions)
            if ns and waiting.is_set() and not pruned.is_set():
                other.prune(["t"], strategy="keep_latest")
                pruned.set()
            return stored

    with (
        PostgresSaver.from_conn_string(db_dsn, max_size=2) as other,
        LateRoot.from_conn_string(db_dsn, max_size=4) as saver,
    ):
        graph = research_chat().compile(checkpointer=saver)
        memory = research_chat().compile(checkpointer=InMemorySaver())
        for i in range(3):
            for g in (graph, memory):
                g.invoke({"messages": [f"hi{i}"]}, cfg("t"))
        assert pruned.is_set()
        assert graph.get_state(cfg("t")).values == memory.get_state(cfg("t")).values
    with psycopg.connect(db_dsn) as conn:
        orphans = conn.execute(
            "SELECT w.checkpoint_ns, w.checkpoint_id FROM pgsaver_writes AS w"
            " WHERE NOT EXISTS (SELECT 1 FROM pgsaver_checkpoints AS c"
            " WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns"
            " AND c.checkpoint_id = w.checkpoint_id)"
        ).fetchall()
    assert orphans == []


def test_idle_retention_and_keep_last_together_on_subgraph_threads(
    saver: PostgresSaver, db_dsn: str
) -> None:
    graph = research_chat().compile(checkpointer=saver)
    chat(graph, "old", 3)
    chat(graph, "new", 7)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_checkpoints SET created_at = now() - interval '40 days'"
            " WHERE thread_id = 'old'"
        )
    before = read_all(saver, graph, db_dsn, "new")
    plan = saver.retention(keep_last=2, idle_for=timedelta(days=30), dry_run=True)
    done = saver.retention(keep_last=2, idle_for=timedelta(days=30))
    assert (done.threads, done.checkpoints, done.blobs) == (
        plan.threads,
        plan.checkpoints,
        plan.blobs,
    )
    assert keys(db_dsn, "old") == []
    after = read_all(saver, graph, db_dsn, "new")
    assert all(after[k] == before[k] for k in after)
    assert sum(1 for ns, _ in after if ns == "") >= 2
    assert_owned(db_dsn, "new")


def reverse_ids(conn: psycopg.Connection[Any], thread: str) -> None:
    """Give the thread's checkpoints each other's ids, the newest the smallest (parents, the
    writes' checkpoint ids and the subgraph checkpoints' "parents" metadata mapped alike), one
    row at a time by key (so that on Citus each statement runs on the thread's worker)."""
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, metadata"
        " FROM pgsaver_checkpoints WHERE thread_id = %s",
        (thread,),
    ).fetchall()
    ids = sorted(r[1] for r in rows)
    new = dict(zip(ids, reversed(ids), strict=True))
    for old, to in new.items():
        conn.execute(
            "UPDATE pgsaver_writes SET checkpoint_id = %s WHERE thread_id = %s"
            " AND checkpoint_id = %s",
            (to + "~", thread, old),
        )
    for ns, old, parent, metadata in rows:
        parents = dict(metadata.get("parents") or {})
        if "" in parents:
            parents[""] = new.get(parents[""])
            metadata = {**metadata, "parents": parents}
        conn.execute(
            "UPDATE pgsaver_checkpoints SET checkpoint_id = %s, parent_checkpoint_id = %s,"
            " metadata = %s WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (new[old] + "~", parent and new.get(parent), Jsonb(metadata), thread, ns, old),
        )
    for table in ("pgsaver_writes", "pgsaver_checkpoints"):
        for to in new.values():
            conn.execute(
                f"UPDATE {table} SET checkpoint_id = %s WHERE thread_id = %s"
                " AND checkpoint_id = %s",
                (to, thread, to + "~"),
            )


@pytest.mark.parametrize("batch", [1, 5])
def test_ids_out_of_time_order_never_break_a_survivor_either(
    saver: PostgresSaver, stop_dsn: str, batch: int
) -> None:
    """Checkpoint ids normally grow with time (LangGraph's "latest" is the greatest id), and a batch
    deletes the newest first. Ids that run the other way (rows written by other tools) must not
    break a survivor: the batch leaves out every row a remaining one still needs."""
    graph = research_chat().compile(checkpointer=saver)
    chat(graph, "rev", 3)
    with psycopg.connect(stop_dsn, autocommit=True) as conn, conn.transaction():
        reverse_ids(conn, "rev")
    doomed = saver.retention(keep_last=1, thread_ids=["rev"], dry_run=True).checkpoints
    assert doomed > 10

    def job(thread: str) -> None:
        saver.retention(keep_last=1, thread_ids=[thread], batch=batch)

    stopped_runs(saver, graph, stop_dsn, "rev", job, doomed + 1)


def test_a_subgraph_with_its_own_memory_keeps_it(saver: PostgresSaver, db_dsn: str) -> None:
    """A subgraph compiled with checkpointer=True keeps one namespace across calls, whose newest
    checkpoint is its memory: keep-last keeps it whichever root checkpoint ran it last."""
    graph = persistent_subgraph().compile(checkpointer=saver)
    for i in range(4):
        graph.invoke({"log": [f"x{i}"]}, cfg("mem"))
    saver.copy_thread("mem", "mem-unpruned")
    before = read_all(saver, graph, db_dsn, "mem")
    saver.prune(["mem"], strategy="keep_latest")
    after = read_all(saver, graph, db_dsn, "mem")
    assert all(after[k] == before[k] for k in after)
    assert [ns for ns, _ in after if ns] == ["child"]
    graph.invoke({"log": ["again"]}, cfg("mem"))
    graph.invoke({"log": ["again"]}, cfg("mem-unpruned"))
    assert graph.get_state(cfg("mem")).values == graph.get_state(cfg("mem-unpruned")).values
    sub = cfg("mem", "child")
    assert (
        saver.get_tuple(sub).checkpoint["channel_values"]
        == saver.get_tuple(  # type: ignore[arg-type, union-attr]
            cfg("mem-unpruned", "child")  # type: ignore[arg-type]
        ).checkpoint["channel_values"]
    )  # type: ignore[union-attr]


def test_a_checkpoint_of_format_below_4_keeps_the_parent_it_reads_its_sends_from(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """Before format 4 LangGraph kept a checkpoint's pending Send packets as writes of its parent
    (imported threads have such checkpoints): prune keeps that parent, and delete_for_runs
    refuses to delete it from under the child."""
    from test_dropin import _old_format_thread

    from langgraph_pg_saver import DeltaDependencyError

    _, child = _old_format_thread(saver, "old", 3)
    before = saver.get_tuple(child)
    assert before is not None
    assert before.checkpoint["channel_values"]["__pregel_tasks"]
    plan = saver.prune(["old"], strategy="keep_latest", dry_run=True)
    saver.prune(["old"], strategy="keep_latest")
    assert plan.checkpoints == 0
    assert saver.get_tuple(child) == before
    # a format-4 child of such a parent has its own version of the channel: the parent may go
    _old_format_thread(saver, "new", 4)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_checkpoints SET channel_versions = channel_versions"
            ' || \'{"__pregel_tasks": "00000000000000000000000000000002.0.1"}\''
            " WHERE thread_id = 'new' AND parent_checkpoint_id IS NOT NULL"
        )
    assert saver.prune(["new"], strategy="keep_latest").checkpoints == 1
    # delete_for_runs of the run that made the parent refuses, deleting nothing
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_checkpoints SET run_id = 'made-parent'"
            " WHERE thread_id = 'old' AND parent_checkpoint_id IS NULL"
        )
    with pytest.raises(DeltaDependencyError):
        saver.delete_for_runs(["made-parent"])
    assert saver.get_tuple(child) == before


def test_a_delete_of_the_source_during_a_copy_never_leaves_a_copy_without_its_values(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """copy_thread's batches read the source with snapshots of their own, and delete_thread takes
    no advisory lock: a delete of the source that ran between the checkpoints' batch and the
    values' batches left the copy with every checkpoint and none of its values or writes (an
    empty state). The copy now holds the source's checkpoints until it commits: the delete waits,
    and the copy reads as the source did."""
    from graphs import two_nodes

    from langgraph_pg_saver.checkpoint import lifecycle

    with (
        PostgresSaver.from_conn_string(db_dsn) as saver,
        PostgresSaver.from_conn_string(db_dsn) as other,
    ):
        graph = two_nodes().compile(checkpointer=saver)
        for i in range(3):
            graph.invoke({"foo": f"x{i}", "bar": []}, cfg("src"))
        want = graph.get_state(cfg("src")).values
        assert want
        deleter: list[threading.Thread] = []
        original = lifecycle._in_batches

        def in_batches(queries: Any, params: Any, batch: int, counts: Any, last: Any) -> Any:
            step = original(queries, params, batch, counts, last)
            if queries[0] is not saver._q["copy_checkpoints_batch"] or step.then is None:
                return step
            then = step.then

            def after_checkpoints(rows: Any) -> Any:
                if not deleter:  # another worker deletes the source now
                    thread = threading.Thread(target=other.delete_thread, args=("src",))
                    thread.start()
                    deleter.append(thread)
                    with psycopg.connect(db_dsn, autocommit=True) as watch:
                        for _ in range(2000):  # until it is done, or waits for this copy
                            waiting = watch.execute(
                                "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                "current_database() AND wait_event_type = 'Lock'"
                            ).fetchone()
                            if not thread.is_alive() or (waiting and waiting[0]):
                                break
                            thread.join(0.01)
                return then(rows)

            return dataclasses.replace(step, then=after_checkpoints)

        monkeypatch.setattr(lifecycle, "_in_batches", in_batches)
        report = saver.copy_thread("src", "dst")
        monkeypatch.setattr(lifecycle, "_in_batches", original)
        deleter[0].join()
        assert saver.get_tuple(cfg("src")) is None  # the delete ran, after the copy
        assert report.blobs > 0
        assert graph.get_state(cfg("dst")).values == want
