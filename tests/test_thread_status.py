"""Threads by status (issue 33, migration 0014): search_threads tells interrupted, failed, pending
and idle threads apart from what real graphs stored, pages newest first, filters by metadata,
namespace and idleness; the status table follows puts, writes and the lifecycle jobs; a schema
upgraded from an earlier release is classified by the migration; and the reads stay bounded on
a table of many threads."""

from __future__ import annotations

import json
import operator
import uuid
from datetime import timedelta
from typing import Annotated, Any

import psycopg
import pytest
from conftest import ON_CITUS
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_pg_saver import AsyncPostgresSaver, InvalidInputError, PostgresSaver
from langgraph_pg_saver.db import migrate
from langgraph_pg_saver.db.sql import queries_for


class S(TypedDict):
    x: Annotated[list[Any], operator.add]


def _route(state: S) -> str:
    return str(state["x"][0])


def _ask(state: S) -> dict[str, Any]:
    return {"x": [interrupt({"question": "approve?"})]}


def _work(state: S) -> dict[str, Any]:
    if "fail" in state["x"]:
        raise ValueError("the tool failed")
    return {"x": ["done"]}


def _inner(state: S) -> dict[str, Any]:
    return {"x": [interrupt("inner?")]}


def _fan(state: S) -> list[Send]:
    return [Send("work", {"x": ["w"]})]


def graph() -> StateGraph[Any]:
    sub = StateGraph(S)
    sub.add_node("inner", _inner)
    sub.add_edge(START, "inner")
    g = StateGraph(S)
    g.add_node("ask", _ask)
    g.add_node("work", _work)
    g.add_node("research", sub.compile())
    g.add_conditional_edges(START, _route, ["ask", "work", "research"])
    for node in ("ask", "work", "research"):
        g.add_edge(node, END)
    return g


def cfg(thread: str, **metadata: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "metadata": metadata}


def run_all(saver: PostgresSaver) -> None:
    """One thread of each kind, in this order (newest last)."""
    app = graph().compile(checkpointer=saver)
    app.invoke({"x": ["work"]}, cfg("idle", tenant="a"))
    app.invoke({"x": ["ask"]}, cfg("interrupted", tenant="a"))
    with pytest.raises(ValueError, match="the tool failed"):
        app.invoke({"x": ["work", "fail"]}, cfg("error", tenant="b"))
    app.invoke({"x": ["research"]}, cfg("sub-interrupted", tenant="b"))
    paused = graph().compile(checkpointer=saver, interrupt_before=["work"])
    paused.invoke({"x": ["work"]}, cfg("pending", tenant="a"))
    app.invoke({"x": ["ask"]}, cfg("resumed", tenant="a"))
    app.invoke(Command(resume="yes"), cfg("resumed", tenant="a"))


def rows(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, args or None)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def table(dsn: str) -> dict[str, str]:
    return dict(rows(dsn, "SELECT thread_id, status FROM pgsaver_thread_status"))


EXPECTED = {
    "resumed": "idle",
    "pending": "pending",
    "sub-interrupted": "interrupted",
    "error": "error",
    "interrupted": "interrupted",
    "idle": "idle",
}


def test_statuses_of_real_graphs(saver: PostgresSaver, db_dsn: str) -> None:
    run_all(saver)
    found = saver.search_threads()
    # newest first, each thread once, with the status read from what is stored
    assert [(t.thread_id, t.status) for t in found] == list(EXPECTED.items())
    by = {t.thread_id: t for t in found}
    assert [i.value for i in by["interrupted"].interrupts] == [{"question": "approve?"}]
    assert by["interrupted"].next == ["ask"]
    assert [i.value for i in by["sub-interrupted"].interrupts] == ["inner?"]
    assert by["sub-interrupted"].next == ["research"]
    # LangGraph stores what a task raised as its repr
    assert by["error"].errors == ["ValueError('the tool failed')"]
    assert by["pending"].next == ["work"]
    assert not by["pending"].interrupts
    assert by["idle"].next == []
    # every thread has a row: an idle one since its last run ended
    assert by["idle"].status_since is not None
    assert by["interrupted"].status_since is not None
    for t in found:
        assert t.checkpoints
        assert t.checkpoints >= 2
        assert t.bytes
        assert t.bytes > 0
        assert t.metadata["tenant"] in ("a", "b")
    # the table holds the threads that are not idle, as the search classified them
    assert table(db_dsn) == EXPECTED
    for status in ("idle", "pending", "interrupted", "error"):
        got = [t.thread_id for t in saver.search_threads(status=status)]
        assert got == [k for k, v in EXPECTED.items() if v == status], status
    # JSON-ready
    json.dumps([t.as_dict() for t in found], default=str)


def test_filters(saver: PostgresSaver) -> None:
    run_all(saver)
    tenant_b = saver.search_threads(metadata={"tenant": "b"})
    assert [t.thread_id for t in tenant_b] == ["sub-interrupted", "error"]
    assert [
        t.thread_id for t in saver.search_threads(status="interrupted", metadata={"tenant": "a"})
    ] == ["interrupted"]
    # a filter SQL cannot select exactly (a bool) is checked on the metadata read back
    assert saver.search_threads(metadata={"tenant": "a", "flag": True}) == []
    # a namespace and those below it: the subgraph's checkpoints are "research:<task id>"
    assert [t.thread_id for t in saver.search_threads(ns="research")] == ["sub-interrupted"]
    assert saver.search_threads(ns="researc") == []
    assert len(saver.search_threads(ns="")) == len(EXPECTED)
    assert saver.search_threads(idle_for=timedelta(hours=1)) == []
    assert len(saver.search_threads(active_within=timedelta(hours=1))) == len(EXPECTED)
    assert next(t.thread_id for t in saver.search_threads(sizes=False, limit=1)) == "resumed"
    assert saver.search_threads(sizes=False)[0].bytes is None


def test_pages_newest_first(saver: PostgresSaver) -> None:
    app = graph().compile(checkpointer=saver)
    ids = [f"t{i:03d}" for i in range(23)]
    for i, t in enumerate(ids):
        app.invoke({"x": ["ask" if i % 2 else "work"]}, cfg(t))
    for status, want in (
        (None, ids[::-1]),
        ("interrupted", [t for i, t in enumerate(ids) if i % 2][::-1]),
    ):
        seen: list[str] = []
        after = None
        while True:
            page = saver.search_threads(status=status, limit=5, after=after, sizes=False)
            seen += [t.thread_id for t in page]
            if len(page) < 5:
                break
            after = page[-1].cursor
        assert seen == want, status


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "busy"}, "status must be one of"),
        ({"limit": 0}, "limit must be an int"),
        ({"limit": True}, "limit must be an int"),
        ({"after": "nonsense!"}, "after must be the cursor"),
        ({"idle_for": 5}, "idle_for must be a positive"),
        ({"metadata": {1: "x"}}, "metadata must be a dict with str keys"),
        ({"ns": 3}, "ns must be a str"),
    ],
)
def test_bad_input(saver: PostgresSaver, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        saver.search_threads(**kwargs)


async def test_async(asaver: AsyncPostgresSaver) -> None:
    app = graph().compile(checkpointer=asaver)
    await app.ainvoke({"x": ["ask"]}, cfg("a-int"))
    with pytest.raises(ValueError, match="the tool failed"):
        await app.ainvoke({"x": ["work", "fail"]}, cfg("a-err"))
    await app.ainvoke({"x": ["work"]}, cfg("a-idle"))
    got = [(t.thread_id, t.status) for t in await asaver.asearch_threads()]
    assert got == [("a-idle", "idle"), ("a-err", "error"), ("a-int", "interrupted")]
    assert [t.thread_id for t in await asaver.asearch_threads(status="error")] == ["a-err"]


def test_rows_checked_against_what_is_stored(saver: PostgresSaver, db_dsn: str) -> None:
    """A row left stale (a worker that died between a task's interrupt and its mark; a thread
    deleted by hand) never shows a wrong status."""
    run_all(saver)
    rows(
        db_dsn,
        "UPDATE pgsaver_thread_status SET status = 'pending' WHERE thread_id = 'interrupted'",
    )
    rows(
        db_dsn,
        "INSERT INTO pgsaver_thread_status (thread_id, status, checkpoint_id) "
        "VALUES ('gone', 'error', 'x')",
    )
    assert [t.thread_id for t in saver.search_threads(status="interrupted")] == [
        "sub-interrupted",
        "interrupted",
    ]
    assert [t.thread_id for t in saver.search_threads(status="pending")] == ["pending"]
    assert [t.thread_id for t in saver.search_threads(status="error")] == ["error"]


def test_lifecycle_keeps_the_table(saver: PostgresSaver, db_dsn: str) -> None:
    run_all(saver)
    saver.copy_thread("interrupted", "copy")
    assert table(db_dsn)["copy"] == "interrupted"
    assert "copy" in [t.thread_id for t in saver.search_threads(status="interrupted")]
    saver.delete_thread("copy")
    saver.prune(["error"], strategy="delete")
    assert "copy" not in table(db_dsn)
    assert "error" not in table(db_dsn)
    # a resumed run deleted: the thread is back at its interrupt
    app = graph().compile(checkpointer=saver)
    run = uuid.uuid4()
    app.invoke({"x": ["ask"]}, cfg("undo"))
    app.invoke(Command(resume="no"), {**cfg("undo"), "run_id": run})
    assert table(db_dsn)["undo"] == "idle"
    saver.delete_for_runs([str(run)])
    assert table(db_dsn)["undo"] == "interrupted"
    assert [t.status for t in saver.search_threads() if t.thread_id == "undo"] == ["interrupted"]
    saver.retention(idle_for=timedelta(microseconds=1), thread_ids=["undo", "pending"])
    assert "undo" not in table(db_dsn)
    assert "pending" not in table(db_dsn)


def test_upgrade_classifies_stored_threads(db_dsn: str) -> None:
    """Threads written before migration 0014 (its puts leave no rows) are classified by it."""
    schema = "before14"
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        script = migrate.script(schema, distribute=False)
        head = script.index("\n-- 0014_")
        conn.execute((script[:head] + "\nCOMMIT;\n").encode())
    with PostgresSaver.from_conn_string(db_dsn, schema=schema) as old:
        run_all(old)  # the statements that call no function: what an earlier release ran
    with PostgresSaver.from_conn_string(db_dsn, schema=schema) as saver:
        saver.setup()
        assert [(t.thread_id, t.status) for t in saver.search_threads()] == list(EXPECTED.items())
        stored = dict(
            rows(db_dsn, f'SELECT thread_id, status FROM "{schema}".pgsaver_thread_status')
        )
        assert stored == EXPECTED


@pytest.mark.slow
def test_many_threads_read_a_page(saver: PostgresSaver, db_dsn: str) -> None:
    """50,000 threads of 4 root checkpoints each, 500 of them interrupted, statistics taken:
    a page of interrupted threads, and a page of all, read a few hundred rows, not the table."""
    run_all(saver)  # real rows to copy the shape of
    n = 50_000
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                parent_checkpoint_id, type, checkpoint, channel_versions, metadata)
            SELECT 'bulk-' || t, '', lpad(t::text, 8, '0') || '-' || k, NULL, c.type,
                   c.checkpoint, '{}'::jsonb, jsonb_build_object('tenant', 't' || t %% 100)
            FROM generate_series(1, %s) AS t, generate_series(1, 4) AS k,
                 (SELECT type, checkpoint FROM pgsaver_checkpoints LIMIT 1) AS c
            """,
            (n,),
        )
        conn.execute(
            """
            INSERT INTO pgsaver_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
                channel, type, blob)
            SELECT 'bulk-' || t, '', lpad(t::text, 8, '0') || '-4', 'task', -3,
                   '__interrupt__', w.type, w.blob
            FROM generate_series(1, %s, 100) AS t,
                 (SELECT type, blob FROM pgsaver_writes WHERE channel = '__interrupt__' LIMIT 1) AS w
            """,
            (n,),
        )
        # every thread's row, as put keeps it (idle: its newest root checkpoint)
        conn.execute(
            """
            INSERT INTO pgsaver_thread_status (thread_id, status, checkpoint_id)
            SELECT 'bulk-' || t, 'idle', lpad(t::text, 8, '0') || '-4'
            FROM generate_series(1, %s) AS t
            """,
            (n,),
        )
        for t in range(1, n + 1, 100):
            conn.execute("SELECT pgsaver_refresh_status(%s)", (f"bulk-{t}",))
        conn.execute("ANALYZE")
    got = saver.search_threads(status="interrupted", limit=20, sizes=False)
    assert len(got) == 20
    assert all(t.status == "interrupted" for t in got)
    if ON_CITUS:
        return  # the reads happen on the workers: the coordinator's plan counts none of them
    for name, status in (
        ("threads_by_status", "interrupted"),
        ("threads_recent", None),
        ("threads_recent", "idle"),
        ("threads_walk", None),
    ):
        blocks = page_blocks(db_dsn, name, status)
        # the whole checkpoints table is thousands of pages; a page of 20 threads reads a few
        assert blocks < 2_000, (name, blocks)


def page_blocks(dsn: str, name: str, status: str | None) -> int:
    """The buffers a page of 20 threads of ``status`` reads through the statement ``name``."""
    params = {
        "status": status,
        "metadata": None,
        "ns": None,
        "idle_for": None,
        "active_within": None,
        "after_id": None,
        "after_thread": None,
        "limit": 20,
    }
    with psycopg.connect(dsn) as conn:
        plan = conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries_for("public")[name], params
        ).fetchone()[0][0]
    return int(plan["Plan"]["Shared Hit Blocks"] + plan["Plan"].get("Shared Read Blocks", 0))


def test_cli_threads_by_status(saver: PostgresSaver, db_dsn: str) -> None:
    from test_cli import cli, cli_json

    run_all(saver)
    out = cli("threads", "--status", "interrupted", dsn=db_dsn).stdout
    assert "sub-interrupted" in out
    assert "approve?" in out  # the interrupt's value
    assert "error" not in out.split()
    listed = cli_json("threads", "--status", "any", "--ns", "research", dsn=db_dsn)
    assert [(t["thread_id"], t["status"]) for t in listed] == [("sub-interrupted", "interrupted")]
    assert listed[0]["interrupts"][0]["value"] == "inner?"
    failed = cli_json("threads", "--status", "error", "--filter", "tenant=b", dsn=db_dsn)
    assert [t["errors"] for t in failed] == [["ValueError('the tool failed')"]]
    first = cli("threads", "--status", "any", "--limit", "2", "--json", dsn=db_dsn)
    cursor = first.stderr.split("--after ")[1].split(")")[0]
    rest = cli_json("threads", "--status", "any", "--after", cursor, dsn=db_dsn)
    shown = [t["thread_id"] for t in json.loads(first.stdout)]
    assert shown + [t["thread_id"] for t in rest] == list(EXPECTED)
    bad = cli("threads", "--status", "any", "--sort", "bytes", dsn=db_dsn, check=2)
    assert "--sort applies without --status" in bad.stderr


def test_prometheus_counts_threads_by_status(saver: PostgresSaver, db_dsn: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families
    from test_cli import cli

    run_all(saver)
    text = cli("status", "--prometheus", dsn=db_dsn).stdout
    family = next(
        f
        for f in text_string_to_metric_families(text)
        if f.name == "langgraph_pg_saver_threads_by_status"
    )
    got = {s.labels["status"]: s.value for s in family.samples}
    assert got == {"pending": 1, "interrupted": 2, "error": 1}


def test_guarded_puts_keep_the_table(db_dsn: str) -> None:
    """single_writer=True puts run as statements (on Citus followed by the status call)."""
    with PostgresSaver.from_conn_string(db_dsn, single_writer=True) as saver:
        saver.setup()
        run_all(saver)
        assert table(db_dsn) == EXPECTED
        assert [(t.thread_id, t.status) for t in saver.search_threads()] == list(EXPECTED.items())


def test_concurrent_marks_keep_the_newest(saver: PostgresSaver, db_dsn: str) -> None:
    """LangGraph stores a run's first checkpoint and a task's error from two threads: the
    'pending' of the older checkpoint, which found no row, meets the error's row at its insert
    (it waits for the error's transaction) and leaves it as it is."""
    import threading

    saver.setup()
    thread = f"race-{uuid.uuid4().hex[:8]}"
    mark = "SELECT pgsaver_put_status(%s, '', %s, %s)"
    with psycopg.connect(db_dsn) as holder:
        # the error's mark of the newer checkpoint, not committed yet
        holder.execute(mark, (thread, "0002", "error"))
        late = threading.Thread(target=rows, args=(db_dsn, mark, thread, "0001", "pending"))
        late.start()
        # the late call waits on the uncommitted row (its probe saw none)
        waiting = 0
        for _ in range(200):
            waiting = rows(
                db_dsn,
                # on Citus the insert waits on the thread's worker
                f"SELECT count(*) FROM {'citus_stat_activity' if ON_CITUS else 'pg_stat_activity'} "
                "WHERE wait_event_type = 'Lock' AND query LIKE '%%pgsaver_%%status%%'",
            )[0][0]
            if waiting:
                break
            late.join(0.05)
        holder.commit()
        late.join(30)
    assert not late.is_alive()
    assert waiting, "the late mark never waited on the row: the race was not made"
    assert rows(
        db_dsn,
        "SELECT status, checkpoint_id FROM pgsaver_thread_status WHERE thread_id = %s",
        thread,
    ) == [("error", "0002")]


@pytest.mark.slow
def test_long_threads_read_a_page(saver: PostgresSaver, db_dsn: str) -> None:
    """A thread of 50,000 checkpoints (every version of its trigger channels stored) among short
    ones, statistics taken on the empty tables: a page of every status, of the idle threads and
    of the pending ones reads a few pages, not the long thread's checkpoints or values."""
    from longthread import replicate

    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")  # statistics of empty tables
    paused = graph().compile(checkpointer=saver, interrupt_before=["work"])
    paused.invoke({"x": ["work"]}, cfg("seed"))
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        replicate(conn, "seed", "long", 50_000)
        # what a lifecycle job does for a thread it wrote (the copy stands for a real thread)
        conn.execute("SELECT pgsaver_refresh_status('long')")
    run_all(saver)  # short threads, newer than the long one
    found = {t.thread_id: t for t in saver.search_threads(limit=100)}
    assert found["long"].status == "pending"
    assert found["long"].next  # the copied checkpoint's (its input waits)
    assert found["long"].checkpoints == 50_000
    assert [t.thread_id for t in saver.search_threads(status="pending")] == [
        "pending",
        "seed",
        "long",
    ]
    assert "long" not in [t.thread_id for t in saver.search_threads(status="idle")]
    if ON_CITUS:
        return  # the reads happen on the workers: the coordinator's plan counts none of them
    for status in (None, "idle", "pending"):
        name = "threads_recent" if status in (None, "idle") else "threads_by_status"
        blocks = page_blocks(db_dsn, name, status)
        # the long thread alone is thousands of pages of checkpoints and values
        # (the walk of every root checkpoint newest first that listed threads before: 208,299)
        assert blocks < 1_000, (status, blocks)


def test_a_job_stopped_at_the_status_leaves_nothing_half_done(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """The lifecycle jobs set the status rows in their own transaction: a job that fails there
    (made to fail by a pgsaver_refresh_status that raises) deletes, copies and imports nothing,
    and every thread's row still says what is stored."""
    run_all(saver)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        kept = conn.execute(
            "SELECT pg_get_functiondef('pgsaver_refresh_status(text)'::regprocedure)"
        ).fetchone()[0]
        conn.execute(
            "CREATE OR REPLACE FUNCTION pgsaver_refresh_status(p_thread text) RETURNS text "
            "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'test: the job stops here'; END $$"
        )
    try:
        run = uuid.uuid4()
        app = graph().compile(checkpointer=saver)
        app.invoke({"x": ["work"]}, {**cfg("runs"), "run_id": run})
        before = table(db_dsn)
        counts = rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints")
        jobs = [
            lambda: saver.retention(idle_for=timedelta(microseconds=1), thread_ids=["error"]),
            lambda: saver.prune(["interrupted"], strategy="delete"),
            lambda: saver.copy_thread("interrupted", "copy"),
            lambda: saver.delete_for_runs([str(run)]),
        ]
        for job in jobs:
            with pytest.raises(psycopg.errors.RaiseException, match="the job stops here"):
                job()
            assert rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == counts
            assert table(db_dsn) == before
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute(kept)
    saver.retention(idle_for=timedelta(microseconds=1), thread_ids=["error"])
    assert "error" not in table(db_dsn)
