"""Moving history over from langgraph-checkpoint-postgres: tables built by the official saver
itself from real graphs, imported, and read back as the official saver reads them."""

from __future__ import annotations

import operator
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from graphs import approval, delta_chat, two_nodes, with_subgraph
from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
from langgraph.graph import END, START, StateGraph

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    InvalidInputError,
    PgSaverError,
    PostgresSaver,
    Report,
)


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
        assert (plan.checkpoints, plan.writes) == counts[:2]
        assert plan.blobs > counts[2]  # the source's blobs and the inline values, as blobs here
        assert counts[3] == 0  # a dry run writes nothing
        seen: list[Report] = []
        report = saver.import_official(thread_batch=5, progress=seen.append)
        assert report.threads == len(want)
        assert report.checkpoints == plan.checkpoints
        assert report.writes == plan.writes
        assert report.blobs == plan.blobs
        assert (report.source_threads, report.already_imported, report.untimed) == (15, 0, 0)
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
        assert (again.threads, again.checkpoints, again.writes, again.blobs) == (0, 0, 0, 0)
        assert again.source_threads == again.unchanged_threads == len(want)
        assert again.already_imported == plan.checkpoints
        # resumed from a thread id: only the later ones are looked at
        later = saver.import_official(start_after="plain-0", dry_run=True)
        assert later.source_threads == sum(1 for _, t in want if t > "plain-0")
        # the imported threads go on as ours
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({"foo": "x", "bar": ["more"]}, {"configurable": {"thread_id": "plain-0"}})
        last = graph.get_state({"configurable": {"thread_id": "plain-0"}})
        assert last.values["bar"][-3:] == ["more", "a", "b"]
        with pytest.raises(PgSaverError, match="no tables of langgraph-checkpoint-postgres"):
            saver.import_official(source_schema="nowhere")


# --------------------------------------------------------------------------- running it again


def _states(saver: Any, name: str, thread: str) -> dict[str, Any]:
    """Every root checkpoint of ``thread`` as LangGraph reads it through ``saver``, by id:
    get_state at that checkpoint, subgraphs and DeltaChannel history included."""
    graph = GRAPHS[name]().compile(checkpointer=saver)
    out = {}
    for snap in graph.get_state_history({"configurable": {"thread_id": thread}}):
        cid = snap.config["configurable"]["checkpoint_id"]
        cfg = {"configurable": {"thread_id": thread, "checkpoint_id": cid}}
        out[cid] = graph.get_state(cfg, subgraphs=True)
    return out


def _ids(dsn: str, table: str, thread: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return [
            (r[0], r[1])
            for r in conn.execute(
                f"SELECT checkpoint_ns, checkpoint_id FROM {table} WHERE thread_id = %s ORDER BY 1, 2",
                (thread,),
            )
        ]


def _rows(dsn: str) -> tuple[int, ...]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM pgsaver_checkpoints), (SELECT count(*) FROM pgsaver_writes),"
            " (SELECT count(*) FROM pgsaver_blobs)"
        ).fetchone()
    assert row is not None
    return tuple(row)


def _turns(saver: Any, thread: str, n: int, start: int = 0) -> None:
    graph = delta_chat().compile(checkpointer=saver)
    for i in range(start, start + n):
        graph.invoke({"messages": [f"hi{i}"]}, {"configurable": {"thread_id": thread}})


THREADS = {"d-1": "delta", "d-2": "delta", "s-1": "sub", "a-1": "approval", "f-1": "fan"}


def _run_some(saver: Any) -> None:
    for thread, name in THREADS.items():
        if name == "delta":
            _turns(saver, thread, 7)
            continue
        graph = GRAPHS[name]().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": thread}}
        inp: Any = {"foo": "x", "inner_log": ["0"]} if name == "sub" else {}
        if name == "approval":
            inp = {"request": "r"}
        if name == "fan":
            inp = {"log": ["start"]}
        for _ in range(1 if name == "approval" else 3):
            graph.invoke(inp, cfg)


def test_import_again_after_a_prune_brings_nothing_back(db_dsn: str) -> None:
    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        _run_some(official)
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        first = saver.import_official()
        assert first.threads == len(THREADS)
        before = {t: _states(saver, name, t) for t, name in THREADS.items()}
        pruned = saver.prune(list(THREADS), strategy="keep_latest")
        assert pruned.checkpoints > 0
        survivors = {t: _ids(db_dsn, "pgsaver_checkpoints", t) for t in THREADS}
        saver.copy_thread("d-1", "d-1-copy")  # a copy is a thread of ours, not of the source
        rows = _rows(db_dsn)
        plan = saver.import_official(dry_run=True)
        again = saver.import_official()
        for r in (plan, again):
            assert (r.threads, r.checkpoints, r.writes, r.blobs, r.diverged) == (0, 0, 0, 0, [])
            assert r.unchanged_threads == r.source_threads == len(THREADS)
            assert r.already_imported == first.checkpoints
        assert _rows(db_dsn) == rows  # no checkpoint, write or value came back
        for thread, name in THREADS.items():
            assert _ids(db_dsn, "pgsaver_checkpoints", thread) == survivors[thread]
            now = _states(saver, name, thread)
            assert now, thread
            for cid, state in now.items():
                assert state == before[thread][cid], (thread, cid)
        assert _ids(db_dsn, "pgsaver_checkpoints", "d-1-copy") == survivors["d-1"]


def test_import_again_copies_what_the_source_wrote_since(db_dsn: str) -> None:
    """A rolling migration: the official saver goes on with imported threads (new turns, an
    interrupt resumed, a pending write added at the newest checkpoint, a new thread) after the
    first import and a prune; the second import brings exactly that, and every thread reads as
    the official saver reads it."""
    from langgraph.types import Command

    with (
        OfficialSaver.from_conn_string(db_dsn) as official,
        PostgresSaver.from_conn_string(db_dsn) as saver,
    ):
        official.setup()
        _run_some(official)
        saver.import_official()
        saver.prune(list(THREADS), strategy="keep_latest")
        with psycopg.connect(db_dsn) as conn:
            mark = conn.execute("SELECT max(checkpoint_id) FROM checkpoints").fetchone()
        # the official workers go on
        _turns(official, "d-1", 3, start=7)
        approve = approval().compile(checkpointer=official)
        approve.invoke(Command(resume="yes"), {"configurable": {"thread_id": "a-1"}})
        sub = with_subgraph().compile(checkpointer=official)
        sub.invoke({"foo": "y", "inner_log": ["1"]}, {"configurable": {"thread_id": "s-1"}})
        _turns(official, "d-new", 2)
        head = official.get_tuple({"configurable": {"thread_id": "f-1"}})
        assert head is not None
        official.put_writes(head.config, [("log", ["late"])], task_id="late-task")
        with psycopg.connect(db_dsn) as conn:
            new = conn.execute(
                "SELECT count(*), count(DISTINCT thread_id) FROM checkpoints WHERE checkpoint_id > %s",
                (mark[0] if mark else None,),
            ).fetchone()
        assert new is not None
        assert new[1] == 4
        plan = saver.import_official(dry_run=True)
        report = saver.import_official()
        for r in (plan, report):
            assert r.checkpoints == new[0]
            assert r.threads == 5  # the four with new checkpoints, and f-1's late write
            assert r.diverged == []
            assert r.unchanged_threads == 1  # d-2
        assert (plan.writes, plan.blobs) == (report.writes, report.blobs)
        threads = {**THREADS, "d-new": "delta"}
        for thread, name in threads.items():
            graph = GRAPHS[name]().compile(checkpointer=saver)
            theirs = GRAPHS[name]().compile(checkpointer=official)
            cfg = {"configurable": {"thread_id": thread}}
            assert graph.get_state(cfg, subgraphs=True) == theirs.get_state(cfg, subgraphs=True), (
                thread
            )
            ours = _states(saver, name, thread)
            official_states = _states(official, name, thread)
            for cid, state in ours.items():
                assert state == official_states[cid], (thread, cid)
        late = saver.get_tuple({"configurable": {"thread_id": "f-1"}})
        assert late is not None
        assert ("late-task", "log", ["late"]) in late.pending_writes
        # a third time: nothing
        third = saver.import_official()
        assert (third.threads, third.checkpoints, third.writes, third.blobs) == (0, 0, 0, 0)
        assert third.unchanged_threads == len(threads)
        # and the threads go on here
        _turns(saver, "d-1", 1, start=10)
        last = saver.get_tuple({"configurable": {"thread_id": "d-1"}})
        assert last is not None


def test_a_thread_deleted_here_stays_deleted(db_dsn: str) -> None:
    with (
        OfficialSaver.from_conn_string(db_dsn) as official,
        PostgresSaver.from_conn_string(db_dsn) as saver,
    ):
        official.setup()
        _turns(official, "gone", 3)
        _turns(official, "idle", 3)
        _turns(official, "kept", 3)
        saver.import_official()
        saver.delete_thread("gone")
        saver.prune(["idle"], strategy="delete")
        _turns(official, "gone", 2, start=3)  # the source even goes on with one of them
        report = saver.import_official()
        assert (report.threads, report.checkpoints, report.writes, report.blobs) == (0, 0, 0, 0)
        assert report.deleted_threads == 2
        assert report.unchanged_threads == 1
        assert _ids(db_dsn, "pgsaver_checkpoints", "gone") == []
        assert _ids(db_dsn, "pgsaver_checkpoints", "idle") == []
        assert _ids(db_dsn, "pgsaver_writes", "gone") == []
        # on request, one comes back whole, as the source holds it now
        back = saver.import_official(reimport=["gone", "no-such-thread"])
        assert back.threads == 1
        assert back.missing == ["no-such-thread"]
        assert _ids(db_dsn, "pgsaver_checkpoints", "gone") == _ids(db_dsn, "checkpoints", "gone")
        assert _states(saver, "delta", "gone") == _states(official, "delta", "gone")
        assert _ids(db_dsn, "pgsaver_checkpoints", "idle") == []
        with pytest.raises(InvalidInputError, match="not after start_after"):
            saver.import_official(reimport=["gone"], start_after="kept")


def test_a_thread_written_on_both_sides_is_listed_not_merged(db_dsn: str) -> None:
    with (
        OfficialSaver.from_conn_string(db_dsn) as official,
        PostgresSaver.from_conn_string(db_dsn) as saver,
    ):
        official.setup()
        _turns(official, "both", 3)
        _turns(official, "ours", 3)
        saver.import_official()
        _turns(saver, "both", 2, start=3)  # our workers took it over ...
        _turns(saver, "ours", 2, start=3)
        _turns(official, "both", 1, start=3)  # ... and an official one went on with it too
        ours_before = _states(saver, "delta", "both")
        plan = saver.import_official(dry_run=True)
        report = saver.import_official()
        for r in (plan, report):
            assert r.diverged == ["both"]
            assert (r.threads, r.checkpoints, r.writes, r.blobs) == (0, 0, 0, 0)
            assert r.unchanged_threads == 1  # "ours": written here only, nothing new there
        assert _states(saver, "delta", "both") == ours_before
        # a new source checkpoint that does not extend the imported head (time travel on the
        # official side: a fork from an older checkpoint) does not come over either
        _turns(official, "fork", 3)
        saver.import_official()
        older = list(official.list({"configurable": {"thread_id": "fork"}}))[3].config
        delta_chat().compile(checkpointer=official).invoke({"messages": ["again"]}, older)
        held = _states(saver, "delta", "fork")
        report = saver.import_official()
        assert report.diverged == ["both", "fork"]
        assert report.checkpoints == 0
        assert _states(saver, "delta", "fork") == held


def test_imported_checkpoints_keep_their_age(db_dsn: str) -> None:
    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        for thread in ("old", "recent", "odd"):
            _turns(official, thread, 2)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{ts}',"
            " to_jsonb(to_char((checkpoint->>'ts')::timestamptz - interval '40 days',"
            " 'YYYY-MM-DD\"T\"HH24:MI:SS.USOF'))) WHERE thread_id = 'old'"
        )
        first, second = [
            r[0]
            for r in conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'odd' ORDER BY 1 LIMIT 2"
            )
        ]
        conn.execute(
            "UPDATE checkpoints SET checkpoint = checkpoint - 'ts' WHERE checkpoint_id = %s",
            (first,),
        )
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{ts}', '\"soon\"')"
            " WHERE checkpoint_id = %s",
            (second,),
        )
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        plan = saver.import_official(dry_run=True)
        report = saver.import_official()
        assert plan.untimed == report.untimed == 2
        with psycopg.connect(db_dsn) as conn:
            wrong = conn.execute(
                "SELECT c.thread_id, c.checkpoint_id, c.created_at, s.checkpoint->>'ts'"
                " FROM pgsaver_checkpoints AS c JOIN checkpoints AS s USING"
                " (thread_id, checkpoint_ns, checkpoint_id)"
                " WHERE c.checkpoint_id NOT IN (%s, %s)"
                " AND c.created_at IS DISTINCT FROM (s.checkpoint->>'ts')::timestamptz",
                (first, second),
            ).fetchall()
            assert wrong == []
            # without a usable ts: the import's time, which is also when it was recorded
            untimed = conn.execute(
                "SELECT count(*) FROM pgsaver_checkpoints AS c JOIN pgsaver_imports AS r"
                " ON r.thread_id = c.thread_id AND r.checkpoint_ns = c.checkpoint_ns"
                " WHERE c.checkpoint_id IN (%s, %s) AND c.created_at = r.imported_at",
                (first, second),
            ).fetchone()
            assert untimed == (2,)
        # idle retention sees the source's age right after the import
        would = saver.retention(idle_for=timedelta(days=30), dry_run=True)
        assert (would.threads, would.checkpoints) == (1, len(_ids(db_dsn, "checkpoints", "old")))
        done = saver.retention(idle_for=timedelta(days=30))
        assert done.threads == 1
        assert _ids(db_dsn, "pgsaver_checkpoints", "old") == []
        assert _ids(db_dsn, "pgsaver_checkpoints", "recent") != []
        assert _ids(db_dsn, "pgsaver_checkpoints", "odd") != []
        # retired here, it stays retired
        assert saver.import_official().deleted_threads == 1
        assert _ids(db_dsn, "pgsaver_checkpoints", "old") == []


async def test_async_import_again_after_a_prune(db_dsn: str) -> None:
    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        _turns(official, "t", 6)
        expected = _states(official, "delta", "t")
    async with AsyncPostgresSaver.from_conn_string(db_dsn) as saver:
        first = await saver.aimport_official()
        assert first.checkpoints == len(_ids(db_dsn, "checkpoints", "t"))
        await saver.aprune(["t"], strategy="keep_latest")
        survivors = _ids(db_dsn, "pgsaver_checkpoints", "t")
        again = await saver.aimport_official()
        assert (again.checkpoints, again.writes, again.blobs, again.unchanged_threads) == (
            0,
            0,
            0,
            1,
        )
        assert _ids(db_dsn, "pgsaver_checkpoints", "t") == survivors
        graph = delta_chat().compile(checkpointer=saver)
        for _, cid in survivors:
            cfg: Any = {"configurable": {"thread_id": "t", "checkpoint_id": cid}}
            assert await graph.aget_state(cfg, subgraphs=True) == expected[cid]


def test_threads_imported_by_a_release_without_the_record(db_dsn: str) -> None:
    """A database imported into before migration 0010 holds no record: a thread it holds counts
    as imported up to its newest checkpoint in each namespace; one deleted here cannot be told
    from a thread never imported, and comes back."""
    with (
        OfficialSaver.from_conn_string(db_dsn) as official,
        PostgresSaver.from_conn_string(db_dsn) as saver,
    ):
        official.setup()
        _run_some(official)
        saver.import_official()
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM pgsaver_imports")
        saver.prune(list(THREADS), strategy="keep_latest")
        saver.delete_thread("d-2")
        before = {t: _states(saver, name, t) for t, name in THREADS.items() if t != "d-2"}
        held = len(_ids(db_dsn, "checkpoints", "d-1"))
        _turns(official, "d-1", 2, start=7)
        source = _ids(db_dsn, "checkpoints", "d-1")
        report = saver.import_official()
        assert report.checkpoints == len(source) - held + len(_ids(db_dsn, "checkpoints", "d-2"))
        assert report.threads == 2
        assert report.diverged == []
        assert _ids(db_dsn, "pgsaver_checkpoints", "d-2") == _ids(db_dsn, "checkpoints", "d-2")
        for thread, states in before.items():
            now = _states(saver, THREADS[thread], thread)
            for cid, state in states.items():
                assert now[cid] == state, (thread, cid)
        assert _ids(db_dsn, "pgsaver_checkpoints", "d-1")[-(len(source) - held) :] == source[held:]
        latest = {"configurable": {"thread_id": "d-1"}}
        assert delta_chat().compile(checkpointer=saver).get_state(latest) == delta_chat().compile(
            checkpointer=official
        ).get_state(latest)
        # recorded now: a third run copies nothing
        assert saver.import_official().checkpoints == 0
