"""delete_for_runs erases what a run wrote (issue 28): its checkpoints, its writes wherever LangGraph
stored them (a durability="exit" run's DeltaChannel writes on another run's checkpoint, a resume's
writes on the interrupted checkpoint, subgraph checkpoints a top-level run id never reached), and the
values only those referenced; or it refuses, changing nothing, where that would change a checkpoint
that stays. Real graphs on a real Postgres; every survivor is compared with what it read before."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import psycopg
import pytest
from graphs import approval, approval_in_subgraph, delta_chat, two_delta, with_subgraph
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    DeltaDependencyError,
    EntangledRunError,
    InvalidInputError,
    PostgresSaver,
    Report,
)
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.codec import compress as _compress

TABLES = ("pgsaver_checkpoints", "pgsaver_writes", "pgsaver_blobs")


def rid(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def top(thread: str, run: uuid.UUID | None = None, **configurable: Any) -> dict[str, Any]:
    """A config as plain LangGraph users write it: the run id, if any, at the top level."""
    c: dict[str, Any] = {"configurable": {"thread_id": thread, **configurable}}
    if run is not None:
        c["run_id"] = run
    return c


def meta(thread: str, run: str) -> dict[str, Any]:
    """A config as LangGraph's server writes it: the run id in the metadata."""
    return {"configurable": {"thread_id": thread}, "metadata": {"run_id": run}}


def fetch(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args or None).fetchall()  # type: ignore[arg-type]


def table_rows(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the three tables, sorted: to show that a refused delete changed nothing."""
    with psycopg.connect(dsn) as conn:
        return {
            t: sorted(
                conn.execute(f"SELECT * FROM {t}").fetchall(),  # type: ignore[arg-type]
                key=repr,
            )
            for t in TABLES
        }


def stored_texts(saver: PostgresSaver | AsyncPostgresSaver, dsn: str) -> list[str]:
    """Every value stored in the three tables, decoded as the saver reads it, as text: channel
    values, pending writes, checkpoint bodies and metadata."""
    loads = saver.serde.loads_typed
    out: list[str] = []
    with psycopg.connect(dsn) as conn:
        for type_, data in conn.execute(
            "SELECT type, blob FROM pgsaver_blobs WHERE type <> 'empty' "
            "UNION ALL SELECT type, blob FROM pgsaver_writes "
            "UNION ALL SELECT type, checkpoint FROM pgsaver_checkpoints"
        ):
            out.append(repr(_compress.load(loads, type_, bytes(data or b""))))
        for (metadata,) in conn.execute("SELECT metadata::text FROM pgsaver_checkpoints"):
            out.append(metadata)
    return out


def said(texts: list[str], *words: str) -> list[str]:
    return [t for t in texts if any(w in t for w in words)]


def snapshot(graph: Any, saver: Any, thread: str) -> dict[str, Any]:
    """Every checkpoint of every namespace of the thread: what get_state reads (values, next,
    interrupts), and the pending writes get_tuple returns, by (namespace, checkpoint id)."""
    out: dict[str, Any] = {}
    for t in saver.list({"configurable": {"thread_id": thread}}):
        conf = t.config["configurable"]
        key = (conf["checkpoint_ns"], conf["checkpoint_id"])
        pending = sorted(map(repr, t.pending_writes or ()))
        if conf["checkpoint_ns"] == "":
            snap = graph.get_state(t.config, subgraphs=True)
            out[key] = (snap.values, snap.next, repr(snap.interrupts), pending, repr(snap.tasks))
        else:
            out[key] = (t.checkpoint["channel_versions"], pending)
    return out


def assert_survivors_read_as_before(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert set(after) <= set(before), set(after) - set(before)
    for key, value in after.items():
        assert value == before[key], key


def history(graph: Any, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The root history as (step, values, next), oldest first: comparable between two savers."""
    return [
        (s.metadata["step"] if s.metadata else None, s.values, s.next)
        for s in reversed(list(graph.get_state_history(config)))
    ]


# ---------------------------------------------------------------- the case


def test_a_run_with_exit_durability_is_erased_from_another_runs_checkpoint(
    saver: PostgresSaver, db_dsn: str
) -> None:
    chat = delta_chat().compile(checkpointer=saver)
    memory = delta_chat().compile(checkpointer=InMemorySaver())
    for i in range(3):
        for g in (chat, memory):
            g.invoke({"messages": [f"hi{i}"]}, top("t", rid(i + 1)))
    before = snapshot(chat, saver, "t")
    exit_run = rid(99)
    chat.invoke({"messages": ["secret"]}, top("t", exit_run), durability="exit")
    assert chat.get_state(top("t")).values["messages"][-2:] == ["secret", "reply 4"]
    # what the issue measured: the exit run's DeltaChannel writes sit on run 3's last checkpoint
    anchor = fetch(
        db_dsn,
        "SELECT c.run_id, count(*) FROM pgsaver_writes w JOIN pgsaver_checkpoints c USING "
        "(thread_id, checkpoint_ns, checkpoint_id) WHERE w.run_id = %s GROUP BY 1",
        str(exit_run),
    )
    assert anchor == [(str(rid(3)), 2)]
    assert said(stored_texts(saver, db_dsn), "secret", "reply 4")

    report = saver.delete_for_runs([str(exit_run)])

    assert (report.checkpoints, report.writes, report.threads, report.missing) == (1, 2, 1, [])
    assert said(stored_texts(saver, db_dsn), "secret", "reply 4") == []
    after = snapshot(chat, saver, "t")
    assert set(after) == set(before)
    assert_survivors_read_as_before(before, after)
    # the same graph on InMemorySaver, without that run, reads the same history, and both go on alike
    assert history(chat, top("t")) == history(memory, top("t"))
    for g in (chat, memory):
        g.invoke({"messages": ["again"]}, top("t", rid(5)))
    assert history(chat, top("t")) == history(memory, top("t"))


def test_an_exit_run_on_a_new_thread_goes_whole(saver: PostgresSaver, db_dsn: str) -> None:
    """A first run with durability="exit" stores a stub checkpoint and its writes there: all its."""
    chat = delta_chat().compile(checkpointer=saver)
    chat.invoke({"messages": ["secret"]}, top("new", rid(7)), durability="exit")
    assert fetch(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints")[0][0] == 2
    report = saver.delete_for_runs([str(rid(7))])
    assert (report.checkpoints, report.writes) == (2, 2)
    assert table_rows(db_dsn) == {t: [] for t in TABLES}


def test_exit_writes_stored_before_migration_0009_go_with_their_run(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """Rows of an older release carry no run id: the exit run's synthetic writes are still found,
    on the checkpoint whose every child is deleted, by LangGraph's task ids."""
    chat = delta_chat().compile(checkpointer=saver)
    for i in range(3):
        chat.invoke({"messages": [f"hi{i}"]}, meta("old", f"run-{i}"))
    before = snapshot(chat, saver, "old")
    chat.invoke({"messages": ["secret"]}, meta("old", "run-exit"), durability="exit")
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgsaver_writes SET run_id = NULL")
    report = saver.delete_for_runs(["run-exit"])
    assert (report.checkpoints, report.writes) == (1, 2)
    assert said(stored_texts(saver, db_dsn), "secret", "reply 4") == []
    after = snapshot(chat, saver, "old")
    assert set(after) == set(before)
    assert_survivors_read_as_before(before, after)


# ---------------------------------------------------------------- resumed interrupts


def test_deleting_the_run_that_resumed_an_interrupt_leaves_it_pending(
    saver: PostgresSaver, db_dsn: str
) -> None:
    graph = approval().compile(checkpointer=saver)
    graph.invoke({"request": "deploy"}, top("ap", rid(1)))
    before = snapshot(graph, saver, "ap")
    (waiting,) = graph.get_state(top("ap")).interrupts
    graph.invoke(Command(resume="yes, ship it"), top("ap", rid(2)))
    assert graph.get_state(top("ap")).values["answer"] == "yes, ship it"
    # the resume value and the node's write sit on run 1's interrupted checkpoint
    assert fetch(db_dsn, "SELECT count(*) FROM pgsaver_writes WHERE run_id = %s", str(rid(2))) == [
        (3,)
    ]

    report = saver.delete_for_runs([str(rid(2))])

    assert (report.checkpoints, report.writes) == (1, 3)
    assert said(stored_texts(saver, db_dsn), "ship it") == []
    after = snapshot(graph, saver, "ap")
    assert set(after) == set(before)
    assert_survivors_read_as_before(before, after)
    state = graph.get_state(top("ap"))
    assert state.next == ("ask",)
    assert state.interrupts == (waiting,)
    # and it resumes as it would have
    graph.invoke(Command(resume="no"), top("ap", rid(3)))
    assert graph.get_state(top("ap")).values == {"request": "deploy", "answer": "no"}


class Twice(TypedDict):
    first: str
    second: str


def ask_twice(state: Twice) -> dict[str, Any]:
    return {"first": interrupt("first?"), "second": interrupt("second?")}


def two_questions() -> StateGraph[Any]:
    g: StateGraph[Any] = StateGraph(Twice)
    g.add_node("ask", ask_twice)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g


def test_a_resume_that_replaced_another_runs_interrupt_is_refused(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """Resuming the first of two interrupts in a node stores the second over the first (LangGraph
    writes a task's interrupt to the same key): deleting that run cannot bring the first back."""
    graph = two_questions().compile(checkpointer=saver)
    graph.invoke({"first": ""}, top("q", rid(1)))
    graph.invoke(Command(resume="A"), top("q", rid(2)))
    graph.invoke(Command(resume="B"), top("q", rid(3)))
    assert graph.get_state(top("q")).values == {"first": "A", "second": "B"}
    rows = table_rows(db_dsn)
    for runs, replaced in (([3], {str(rid(2))}), ([2, 3], {str(rid(1))})):
        with pytest.raises(EntangledRunError) as info:
            saver.delete_for_runs([str(rid(n)) for n in runs])
        assert {r for row in info.value.rows for r in row[6]} == replaced
        assert "nothing was deleted" in str(info.value)
        assert table_rows(db_dsn) == rows
    # a dry run says the same
    with pytest.raises(EntangledRunError):
        saver.delete_for_runs([str(rid(3))], dry_run=True)
    # with the run whose interrupt was replaced, everything goes
    report = saver.delete_for_runs([str(rid(n)) for n in (1, 2, 3)])
    assert report.checkpoints == 3
    assert table_rows(db_dsn) == {t: [] for t in TABLES}


# ---------------------------------------------------------------- run ids with plain LangGraph


def test_a_run_id_given_only_at_the_top_of_the_config_is_deletable(
    saver: PostgresSaver, db_dsn: str
) -> None:
    graph = two_delta().compile(checkpointer=saver)
    memory_saver = InMemorySaver()
    memory = two_delta().compile(checkpointer=memory_saver)
    for g in (graph, memory):
        g.invoke({"a": ["x"]}, top("plain", rid(1)))
    before = snapshot(graph, saver, "plain")
    for g in (graph, memory):
        g.invoke({"a": ["y"]}, top("plain", rid(2)))
    # the run id is stored in its column, not in the metadata: that stays as LangGraph makes it
    ours = [t.metadata for t in saver.list(top("plain"))]
    theirs = [t.metadata for t in memory_saver.list(top("plain"))]
    assert ours == theirs
    assert all("run_id" not in m for m in ours)
    runs = fetch(
        db_dsn,
        "SELECT run_id, count(*) FROM pgsaver_checkpoints GROUP BY 1 ORDER BY 1",
    )
    assert runs == [(str(rid(1)), 4), (str(rid(2)), 4)]
    assert fetch(db_dsn, "SELECT count(*) FROM pgsaver_writes WHERE run_id IS NULL") == [(0,)]
    report = saver.delete_for_runs([str(rid(2))])
    assert report.checkpoints == 4
    assert_survivors_read_as_before(before, snapshot(graph, saver, "plain"))
    assert set(snapshot(graph, saver, "plain")) == set(before)


def test_configurable_and_metadata_run_ids_tag_writes_too(
    saver: PostgresSaver, db_dsn: str
) -> None:
    graph = delta_chat().compile(checkpointer=saver)
    graph.invoke({"messages": ["a"]}, {"configurable": {"thread_id": "c", "run_id": "conf-1"}})
    graph.invoke({"messages": ["b"]}, meta("c", "meta-1"))
    # metadata wins over the top level, as over configurable
    graph.invoke({"messages": ["c"]}, {**meta("c", "meta-2"), "run_id": rid(9)})
    tagged = fetch(
        db_dsn,
        "SELECT w.run_id, c.run_id FROM pgsaver_writes w JOIN pgsaver_checkpoints c "
        "USING (thread_id, checkpoint_ns, checkpoint_id) ORDER BY w.checkpoint_id",
    )
    assert {w for w, _ in tagged} == {"conf-1", "meta-1", "meta-2"}
    assert all(w == c for w, c in tagged)


def test_a_top_level_run_id_does_not_reach_subgraphs_and_their_checkpoints_go_anyway(
    saver: PostgresSaver, db_dsn: str
) -> None:
    graph = with_subgraph().compile(checkpointer=saver)
    graph.invoke({"foo": "one", "inner_log": []}, top("s", rid(1)))
    before = snapshot(graph, saver, "s")
    graph.invoke({"foo": "two", "inner_log": []}, top("s", rid(2)))
    # LangChain hands a top-level run_id to the outermost run only
    assert fetch(
        db_dsn,
        "SELECT count(*) FROM pgsaver_checkpoints WHERE checkpoint_ns <> '' AND run_id IS NULL",
    ) == [(6,)]
    report = saver.delete_for_runs([str(rid(2))])
    assert report.checkpoints == 3 + 3
    assert said(stored_texts(saver, db_dsn), "two") == []
    after = snapshot(graph, saver, "s")
    assert set(after) == set(before)
    assert_survivors_read_as_before(before, after)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="interrupt() in async graphs needs 3.11")
@pytest.mark.parametrize("how", ["metadata", "top-level"])
def test_deleting_the_resume_of_an_interrupt_inside_a_subgraph(
    saver: PostgresSaver, db_dsn: str, how: str
) -> None:
    """With the run id in the metadata, every subgraph row of the resume carries it and goes. With
    a top-level run id, the subgraph's checkpoints of both runs have none, and the resumed task is
    the interrupted run's: the delete is refused, changing nothing."""
    graph = approval_in_subgraph().compile(checkpointer=saver)

    def conf(n: int) -> dict[str, Any]:
        return meta("sub", f"run-{n}") if how == "metadata" else top("sub", rid(n))

    def run_id(n: int) -> str:
        return f"run-{n}" if how == "metadata" else str(rid(n))

    graph.invoke({"request": "r"}, conf(1))
    before = snapshot(graph, saver, "sub")
    graph.invoke(Command(resume="ok"), conf(2))
    assert graph.get_state(top("sub")).values["answer"] == "ok"
    if how == "top-level":
        rows = table_rows(db_dsn)
        with pytest.raises(EntangledRunError, match="without a run id"):
            saver.delete_for_runs([run_id(2)])
        assert table_rows(db_dsn) == rows
        return
    saver.delete_for_runs([run_id(2)])
    after = snapshot(graph, saver, "sub")
    assert set(after) == set(before)
    assert_survivors_read_as_before(before, after)
    graph.invoke(Command(resume="later"), conf(3))
    assert graph.get_state(top("sub")).values["answer"] == "later"


# ---------------------------------------------------------------- refusals


def test_a_fork_from_an_exit_runs_anchor_does_not_hold_its_writes(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """A run forked from the checkpoint an exit run stored its DeltaChannel writes on snapshots the
    channel (LangGraph sees the pending writes there), so the exit run goes alone."""
    chat = delta_chat().compile(checkpointer=saver)
    for i in range(3):
        chat.invoke({"messages": [f"hi{i}"]}, meta("f", f"run-{i}"))
    anchor = saver.get_tuple(top("f"))
    assert anchor is not None
    before_exit = snapshot(chat, saver, "f")
    chat.invoke({"messages": ["secret"]}, meta("f", "run-exit"), durability="exit")
    fork = {**meta("f", "run-fork"), "configurable": dict(anchor.config["configurable"])}
    chat.invoke({"messages": ["fork"]}, fork)
    before = {**snapshot(chat, saver, "f"), **before_exit}
    report = saver.delete_for_runs(["run-exit"])
    assert (report.checkpoints, report.writes) == (1, 2)
    assert said(stored_texts(saver, db_dsn), "secret") == []
    after = snapshot(chat, saver, "f")
    assert len(after) == len(before) - 1
    assert_survivors_read_as_before(before, after)


def _put(
    saver: PostgresSaver, parent: str | None, cid: str, run: str, value: Any = None
) -> dict[str, Any]:
    """A checkpoint with one DeltaChannel "m": a stored value, or (None) a version without one."""
    conf: Any = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}, "run_id": run}
    if parent is not None:
        conf["configurable"]["checkpoint_id"] = parent
    version = f"{cid}.0"
    cp: Any = {
        "v": 4,
        "id": cid,
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {} if value is None else {"m": value},
        "channel_versions": {"m": version},
        "versions_seen": {},
        "updated_channels": ["m"],
    }
    metadata: Any = {"source": "loop", "step": 0, "counters_since_delta_snapshot": {"m": [1, 1]}}
    return saver.put(conf, cp, metadata, {"m": version})


def test_a_survivor_rebuilding_a_delta_channel_from_the_runs_writes_is_kept_whole(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """Writes of run "rx" on a checkpoint of run "r0" (as an exit run leaves them, next to its own
    checkpoint) that the surviving child of run "ry" reads as DeltaChannel history: deleting "rx"
    alone is refused; with "ry" it goes."""
    _put(saver, None, "1", "r0", ["x"])
    parent = _put(saver, "1", "2", "r0")
    saver.put_writes({**parent, "run_id": "rx"}, [("m", ["secret"])], "task-1")
    _put(saver, "2", "4", "rx")
    child = _put(saver, "2", "3", "ry")
    history = saver.get_delta_channel_history(config=child, channels=["m"])
    assert history["m"]["writes"] == [("task-1", "m", ["secret"])]
    rows = table_rows(db_dsn)
    for dry_run in (True, False):
        with pytest.raises(DeltaDependencyError) as info:
            saver.delete_for_runs(["rx"], dry_run=dry_run)
        assert info.value.dependents == (("w", "", "3", "2"),)
        assert "w/(root)/3 needs 2" in str(info.value)
    assert table_rows(db_dsn) == rows
    report = saver.delete_for_runs(["rx", "ry"])
    assert (report.checkpoints, report.writes) == (2, 1)
    assert saver.get_delta_channel_history(config=parent, channels=["m"]) == {
        "m": {"writes": [], "seed": ["x"]}
    }
    assert said(stored_texts(saver, db_dsn), "secret") == []


# ---------------------------------------------------------------- unknown ids, dry runs, input


def test_unknown_run_ids_are_named_in_the_report(saver: PostgresSaver, db_dsn: str) -> None:
    graph = two_delta().compile(checkpointer=saver)
    graph.invoke({"a": ["x"]}, meta("u", "known"))
    assert saver.delete_for_runs(["nope", "gone"]) == Report(missing=["gone", "nope"])
    assert saver.delete_for_runs(["nope"], dry_run=True) == Report(dry_run=True, missing=["nope"])
    plan = saver.delete_for_runs(["known", "nope"], dry_run=True)
    assert (plan.checkpoints, plan.dry_run, plan.missing) == (4, True, ["nope"])
    assert plan.writes > 0
    assert plan.blobs > 0
    assert plan.bytes > 0
    rows = table_rows(db_dsn)
    assert rows["pgsaver_checkpoints"]
    done = saver.delete_for_runs(["nope", "known"])
    assert (done.checkpoints, done.writes, done.blobs, done.threads, done.missing) == (
        plan.checkpoints,
        plan.writes,
        plan.blobs,
        plan.threads,
        ["nope"],
    )
    assert done.bytes == plan.bytes
    assert table_rows(db_dsn) == {t: [] for t in TABLES}
    assert saver.delete_for_runs(["known"]).missing == ["known"]


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ("run-1", "single string"),
        (["r", None], "None"),
        (["r", b"x"], "run id"),
        ([["r"]], "run id"),
    ],
)
def test_bad_run_ids_are_refused_before_anything_runs(
    saver: PostgresSaver, bad: Any, words: str
) -> None:
    with pytest.raises(InvalidInputError, match=words):
        saver.delete_for_runs(bad)
    with pytest.raises(InvalidInputError, match="dry_run"):
        saver.delete_for_runs(["r"], dry_run="yes")  # type: ignore[arg-type]


# ---------------------------------------------------------------- async


async def test_async_exit_run_and_resume_are_erased(
    asaver: AsyncPostgresSaver, db_dsn: str
) -> None:
    chat = delta_chat().compile(checkpointer=asaver)
    for i in range(3):
        await chat.ainvoke({"messages": [f"hi{i}"]}, top("at", rid(i + 1)))
    before = (await chat.aget_state(top("at"))).values
    tuples_before = [t async for t in asaver.alist(top("at"))]
    await chat.ainvoke({"messages": ["secret"]}, top("at", rid(9)), durability="exit")
    plan = await asaver.adelete_for_runs([str(rid(9)), "nope"], dry_run=True)
    assert (plan.checkpoints, plan.writes, plan.missing) == (1, 2, ["nope"])
    report = await asaver.adelete_for_runs([str(rid(9))])
    assert (report.checkpoints, report.writes) == (1, 2)
    assert said(stored_texts(asaver, db_dsn), "secret") == []
    assert (await chat.aget_state(top("at"))).values == before
    assert [t async for t in asaver.alist(top("at"))] == tuples_before
    with pytest.raises(DeltaDependencyError):
        await asaver.adelete_for_runs([str(rid(2))])
    assert (await asaver.adelete_for_runs(["nope"])).missing == ["nope"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="interrupt() in async graphs needs 3.11")
async def test_async_resume_deleted_and_resumed_again(
    asaver: AsyncPostgresSaver, db_dsn: str
) -> None:
    graph = approval().compile(checkpointer=asaver)
    await graph.ainvoke({"request": "deploy"}, top("aa", rid(1)))
    before = (await graph.aget_state(top("aa"))).interrupts
    await graph.ainvoke(Command(resume="yes"), top("aa", rid(2)))
    report = await asaver.adelete_for_runs([str(rid(2))])
    assert (report.checkpoints, report.writes, report.missing) == (1, 3, [])
    state = await graph.aget_state(top("aa"))
    assert (state.next, state.interrupts) == (("ask",), before)
    await graph.ainvoke(Command(resume="no"), top("aa", rid(3)))
    assert (await graph.aget_state(top("aa"))).values["answer"] == "no"


# ---------------------------------------------------------------- every way put_writes is sent


@pytest.mark.parametrize("via", ["prepared", "unprepared", "pgbouncer"])
def test_every_way_put_writes_is_sent_records_the_run(
    db_dsn: str, via: str, request: pytest.FixtureRequest
) -> None:
    """Scalar rows and arrays, the plain INSERT and the upsert (a resume), prepared or not and
    through a transaction pooler: every write carries its run id, and the run deletes whole."""
    if via == "pgbouncer":
        dsn, options = request.getfixturevalue("bouncer").dsn(db_dsn), {}
    else:
        dsn, options = db_dsn, {"prepare_threshold": 0 if via == "prepared" else None}
    with PostgresSaver.from_conn_string(dsn, **options) as saver:
        graph = approval().compile(checkpointer=saver)
        graph.invoke({"request": "r"}, top("p", rid(1)))
        before = snapshot(graph, saver, "p")
        graph.invoke(Command(resume="fine"), top("p", rid(2)))
        stored = saver.get_tuple(top("p"))
        assert stored is not None
        many = [(f"ch{i}", i) for i in range(_writing.VALUES_MAX_ROWS + 2)]
        for i, writes in enumerate((many, many[:2], [("__error__", "boom"), ("x", 1)])):
            saver.put_writes({**stored.config, "run_id": rid(2)}, writes, f"task-{i}")
        untagged = fetch(db_dsn, "SELECT count(*) FROM pgsaver_writes WHERE run_id IS NULL")
        assert untagged == [(0,)]
        tagged = fetch(db_dsn, "SELECT count(*) FROM pgsaver_writes WHERE run_id = %s", str(rid(2)))
        assert tagged == [(3 + len(many) + 2 + 2,)]
        report = saver.delete_for_runs([str(rid(2))])
        assert report.writes == tagged[0][0]
        after = snapshot(graph, saver, "p")
        assert set(after) == set(before)
        assert_survivors_read_as_before(before, after)
