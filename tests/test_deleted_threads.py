"""Deletes that stay deleted (migration 0018): a put or put_writes of a run that started before its
thread was deleted is refused with ThreadDeletedError, whichever way the thread was deleted; a new
run on the same thread id works; retention forgets old records. The late put checked here is one
whose state is whole without its ancestors (every channel new): without the record it is stored
and the thread comes back (the control test shows it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    ParentCheckpointMissingError,
    PostgresSaver,
    ThreadDeletedError,
)
from langgraph_pg_saver.checkpoint import lifecycle as _lifecycle
from langgraph_pg_saver.db import migrate
from langgraph_pg_saver.db.steps import Stmt

WORKER = [
    sys.executable,
    "-c",
    f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    "import deleted_worker; deleted_worker.main()",
]
CLI = [sys.executable, "-m", "langgraph_pg_saver"]


def fill(saver: PostgresSaver, tid: str, n: int = 3) -> str:
    """A thread of ``n`` checkpoints, each with writes; returns the newest id."""
    parent: str | None = None
    for i in range(n):
        cp = checkpoint({"a": f"v{i}", "b": i}, {"a": i + 1, "b": i + 1})
        stored = saver.put(config(tid, parent), cp, {"step": i}, {"a": i + 1, "b": i + 1})
        parent = stored["configurable"]["checkpoint_id"]
        saver.put_writes(stored, [("a", f"w{i}")], f"task-{i}")
    assert parent is not None
    return parent


def late_put(saver: PostgresSaver, tid: str, parent: str) -> Any:
    """The next checkpoint of a run that read ``parent``: every channel new, so its state is whole
    without any ancestor."""
    cp = checkpoint({"a": "late", "b": 99}, {"a": 100, "b": 100})
    return saver.put(config(tid, parent), cp, {"step": 99}, {"a": 100, "b": 100})


def rows(dsn: str, tid: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            t: int(
                conn.execute(
                    f"SELECT count(*) FROM pgsaver_{t} WHERE thread_id = %s", (tid,)
                ).fetchone()[0]
            )  # type: ignore[index]
            for t in ("checkpoints", "writes", "blobs")
        }


def assert_refused(saver: PostgresSaver, dsn: str, tid: str, last: str) -> None:
    with pytest.raises(ThreadDeletedError) as put_err:
        late_put(saver, tid, last)
    assert put_err.value.operation == "put"
    assert put_err.value.thread_id == tid
    assert put_err.value.parent_id == last
    assert put_err.value.deleted_at
    with pytest.raises(ThreadDeletedError) as writes_err:
        saver.put_writes(config(tid, last), [("a", "late")], "late-task")
    assert writes_err.value.operation == "put_writes"
    assert writes_err.value.checkpoint_id == last
    assert writes_err.value.thread_id == tid
    assert "was deleted" in str(writes_err.value)
    assert rows(dsn, tid) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    assert saver.get_tuple(config(tid)) is None
    # a new run on the same thread id: no parent, newer ids
    fresh = fill(saver, tid, 2)
    got = saver.get_tuple(config(tid))
    assert got is not None
    assert got.config["configurable"]["checkpoint_id"] == fresh
    assert got.checkpoint["channel_values"] == {"a": "v1", "b": 1}
    assert [w[2] for w in got.pending_writes or []] == ["w1"]


def _delete_function(saver: PostgresSaver, dsn: str, tid: str) -> None:
    saver.delete_thread(tid)


def _delete_statement(saver: PostgresSaver, dsn: str, tid: str) -> None:
    # what runs where the function cannot be called (a role without EXECUTE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(saver._q["delete_thread"], {"thread_id": tid})


def _delete_batched(saver: PostgresSaver, dsn: str, tid: str) -> None:
    # what runs after the server's statement_timeout cancelled the one statement
    saver._driver.drive(_lifecycle.delete_thread(saver._q, tid, batch=2))


def _prune_delete(saver: PostgresSaver, dsn: str, tid: str) -> None:
    assert saver.prune([tid], strategy="delete").threads == 1


def _retention(saver: PostgresSaver, dsn: str, tid: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_checkpoints SET created_at = now() - interval '2 days' "
            "WHERE thread_id = %s",
            (tid,),
        )
    report = saver.retention(idle_for=timedelta(days=1), thread_ids=[tid])
    assert report.threads == 1


def _cli_delete(saver: PostgresSaver, dsn: str, tid: str) -> None:
    done = subprocess.run(
        [*CLI, "--dsn", dsn, "delete-thread", tid, "--yes", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


DELETES: dict[str, Callable[[PostgresSaver, str, str], None]] = {
    "delete_thread": _delete_function,
    "statement": _delete_statement,
    "batched": _delete_batched,
    "prune": _prune_delete,
    "retention": _retention,
    "cli": _cli_delete,
}


@pytest.mark.parametrize("how", list(DELETES))
def test_late_writes_after_a_delete_are_refused(
    saver: PostgresSaver, db_dsn: str, how: str
) -> None:
    tid = f"deleted-{how}"
    last = fill(saver, tid)
    other = fill(saver, "kept")
    DELETES[how](saver, db_dsn, tid)
    assert_refused(saver, db_dsn, tid, last)
    # the other thread is untouched, and writes to it go on
    saver.put_writes(config("kept", other), [("b", 1)], "more")
    assert rows(db_dsn, "kept")["checkpoints"] == 3


def test_without_a_record_the_late_put_brings_the_thread_back(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """The control: rows deleted behind the saver's back (no record) are no delete it knows of;
    the late put is stored as before (its state is whole), so the tests above can fail."""
    tid = "no-record"
    last = fill(saver, tid)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        for table in ("blobs", "writes", "checkpoints"):
            conn.execute(f"DELETE FROM pgsaver_{table} WHERE thread_id = %s", (tid,))
    late_put(saver, tid, last)
    assert rows(db_dsn, tid)["checkpoints"] == 1
    # a parent missing for another reason, state not whole: the parent error, not this one
    cp = checkpoint({"a": "x"}, {"a": 200, "b": 5})
    with pytest.raises(ParentCheckpointMissingError) as err:
        saver.put(config("never", "1f0-not-stored"), cp, {}, {"a": 200})
    assert not isinstance(err.value, ThreadDeletedError)


def test_a_long_thread_deleted_refuses_its_late_writes(db_dsn: str) -> None:
    """2,000 checkpoints in three namespaces, the statements prepared (a connection that found
    the tables large) and not: the record holds the newest id of any namespace."""
    for prepare in (0, None):
        with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=prepare) as saver:
            tid = f"long-{prepare}"
            parent: dict[str, str | None] = {"": None, "sub:1": None, "sub:2": None}
            for i in range(2000):
                ns = ("", "sub:1", "sub:2")[i % 3]
                cp = checkpoint({"a": i}, {"a": i + 1})
                stored = saver.put(config(tid, parent[ns], ns), cp, {"step": i}, {"a": i + 1})
                parent[ns] = stored["configurable"]["checkpoint_id"]
            saver.delete_thread(tid)
            for ns, last in parent.items():
                assert last is not None
                cp = checkpoint({"a": "late"}, {"a": 5000})
                with pytest.raises(ThreadDeletedError):
                    saver.put(config(tid, last, ns), cp, {}, {"a": 5000})
                with pytest.raises(ThreadDeletedError):
                    saver.put_writes(config(tid, last, ns), [("a", 1)], "t")
            assert rows(db_dsn, tid) == {"checkpoints": 0, "writes": 0, "blobs": 0}


def test_a_refused_checkpoint_takes_its_early_writes_along(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """Writes may reach the server before their checkpoint (durability="async"): a late run's
    writes for its next checkpoint, then that checkpoint refused. The writes go, and later writes
    for it are refused too."""
    tid = "early-writes"
    last = fill(saver, tid)
    saver.delete_thread(tid)
    cp = checkpoint({"a": "late", "b": 99}, {"a": 100, "b": 100})
    nxt = {"configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": cp["id"]}}
    saver.put_writes(nxt, [("a", "early")], "early-task")  # a newer id than the record's
    assert rows(db_dsn, tid)["writes"] == 1
    with pytest.raises(ThreadDeletedError):
        saver.put(config(tid, last), cp, {}, {"a": 100, "b": 100})
    assert rows(db_dsn, tid) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(nxt, [("a", "later")], "later-task")


def test_a_new_run_beside_a_refused_late_run_keeps_writing(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """The thread is deleted and a new run starts on its id while the old run goes on: the old
    run's next checkpoint, made after the new run's first ones, is refused; the new run's writes
    for a checkpoint it has not stored yet (durability="async" sends them first) still go in."""
    tid = "side-by-side"
    last = fill(saver, tid)
    saver.delete_thread(tid)
    first = saver.put(config(tid), checkpoint({"a": "new"}, {"a": 1}), {}, {"a": 1})
    pending = checkpoint({"a": "new 2"}, {"a": 2})  # the new run's next, not stored yet
    late = checkpoint({"a": "late", "b": 1}, {"a": 100, "b": 100})  # the old run's, newer still
    assert pending["id"] < late["id"]
    with pytest.raises(ThreadDeletedError):
        saver.put(config(tid, last), late, {}, {"a": 100, "b": 100})
    ahead = {
        "configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": pending["id"]}
    }
    saver.put_writes(ahead, [("a", "early")], "new-task")
    saver.put(first, pending, {}, {"a": 2})
    got = saver.get_tuple(config(tid))
    assert got is not None
    assert got.checkpoint["id"] == pending["id"]
    assert [w[2] for w in got.pending_writes or []] == ["early"]
    # the refused checkpoint stays refused
    late_cfg = {
        "configurable": {"thread_id": tid, "checkpoint_ns": "", "checkpoint_id": late["id"]}
    }
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(late_cfg, [("a", 1)], "late-task")


def sub_run(saver: PostgresSaver, tid: str, ns: str, owners: list[str | None]) -> list[str]:
    """A subgraph's checkpoints in ``ns``, the first without a parent (so stored whatever the
    record says), each naming its root checkpoint (metadata "parents" -> ''), with a write."""
    parent: str | None = None
    ids = []
    for i, owner in enumerate(owners):
        cp = checkpoint({"s": f"{ns} {i}"}, {"s": i + 1})
        meta: dict[str, Any] = {"step": i}
        if owner is not None:
            meta["parents"] = {"": owner}
        stored = saver.put(config(tid, parent, ns), cp, meta, {"s": i + 1})  # type: ignore[arg-type]
        parent = stored["configurable"]["checkpoint_id"]
        saver.put_writes(stored, [("s", f"w{i}")], f"sub-task-{i}")
        ids.append(parent)
    return ids


def namespaces(dsn: str, tid: str) -> dict[str, tuple[int, int, int]]:
    """Each namespace of the thread: its checkpoints, writes and blobs."""
    with psycopg.connect(dsn) as conn:
        got = conn.execute(
            "SELECT n, (SELECT count(*) FROM pgsaver_checkpoints WHERE thread_id = %(t)s"
            " AND checkpoint_ns = n), (SELECT count(*) FROM pgsaver_writes WHERE thread_id = %(t)s"
            " AND checkpoint_ns = n), (SELECT count(*) FROM pgsaver_blobs WHERE thread_id = %(t)s"
            " AND checkpoint_ns = n) FROM (SELECT checkpoint_ns FROM pgsaver_checkpoints"
            " WHERE thread_id = %(t)s UNION SELECT checkpoint_ns FROM pgsaver_writes"
            " WHERE thread_id = %(t)s UNION SELECT checkpoint_ns FROM pgsaver_blobs"
            " WHERE thread_id = %(t)s) AS s (n) ORDER BY n",
            {"t": tid},
        ).fetchall()
    return {n: (int(c), int(w), int(b)) for n, c, w, b in got}


@pytest.mark.parametrize("refusal", ["put", "put_writes"])
def test_a_late_runs_subgraphs_go_with_its_refusal(
    saver: PostgresSaver, db_dsn: str, refusal: str
) -> None:
    """A late run's subgraph started after the delete stores its first checkpoint (no parent to
    check). The run's next refusal, of a put or of a put_writes, deletes every namespace whose
    checkpoints all name a root checkpoint the record covers (nested ones and a subgraph compiled
    with checkpointer=True too); a new run's namespaces, one the new run went on with, and one
    whose checkpoints name no root stay whole."""
    tid = f"late-subgraphs-{refusal}"
    last = fill(saver, tid)
    saver.delete_thread(tid)
    # the late run, still on its deleted root checkpoint ``last``
    inner = sub_run(saver, tid, "inner:task-1", [last, last, last])
    deep = sub_run(saver, tid, "inner:task-1|deep:task-2", [last, last])
    memory = sub_run(saver, tid, "memory", [last, last])  # checkpointer=True: one per name
    # a new run on the same id, beside it
    fresh = saver.put(config(tid), checkpoint({"a": "new"}, {"a": 1}), {}, {"a": 1})
    fresh_id = fresh["configurable"]["checkpoint_id"]
    sub_run(saver, tid, "inner:task-9", [fresh_id, fresh_id])
    sub_run(saver, tid, "shared", [last, fresh_id])  # the new run went on with it
    sub_run(saver, tid, "unowned", [None])
    assert inner[0] > last
    before = namespaces(db_dsn, tid)
    assert len(before) == 7
    if refusal == "put":
        with pytest.raises(ThreadDeletedError):
            late_put(saver, tid, last)
    else:
        with pytest.raises(ThreadDeletedError):
            saver.put_writes(config(tid, last), [("a", "late")], "late-task")
    after = namespaces(db_dsn, tid)
    assert sorted(after) == ["", "inner:task-9", "shared", "unowned"]
    # what joined the record's refused: each deleted namespace's newest id (and a refused put's)
    refused = refused_ids(db_dsn, tid)
    assert {inner[-1], deep[-1], memory[-1]} <= set(refused)
    assert len(refused) == 3 + (refusal == "put")
    assert {n: after[n] for n in after} == {n: before[n] for n in after}
    got = saver.get_tuple(config(tid))
    assert got is not None
    assert got.checkpoint["id"] == fresh_id
    # the subgraph's checkpoints are refused now: its next put and its writes (a subgraph
    # still running in the late run); nothing else changes
    sub_cp = checkpoint({"s": "late"}, {"s": 9})
    with pytest.raises(ThreadDeletedError) as put_err:
        saver.put(config(tid, inner[-1], "inner:task-1"), sub_cp, {}, {"s": 9})
    assert put_err.value.checkpoint_ns == "inner:task-1"
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(config(tid, inner[-1], "inner:task-1"), [("s", 1)], "t")
    assert namespaces(db_dsn, tid) == after


def refused_ids(dsn: str, tid: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT refused FROM pgsaver_deleted_threads WHERE thread_id = %s", (tid,)
        ).fetchone()
    return list(row[0]) if row else []


def test_the_cleanup_keeps_the_subgraphs_of_stored_root_checkpoints(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """Root checkpoints older than the delete can be stored again: a copy into the deleted id
    keeps the source's ids, and a worker whose clock lags makes older ids. Their subgraph
    namespaces name a root the record covers, but one that is stored: a refusal leaves them."""
    skewed = checkpoint({"a": "lagging clock"}, {"a": 1})  # made now: older than what follows
    src_last = fill(saver, "restore-source")
    sub_run(saver, "restore-source", "inner:task-1", [src_last, src_last])
    for tid in ("restored", "lagging"):
        last = fill(saver, tid)
        saver.delete_thread(tid)
        if tid == "restored":  # from a backup thread: the source's (older) ids
            saver.copy_thread("restore-source", tid)
        else:  # a new run on a worker whose clock lags: no parent, an older id
            saver.put(config(tid), skewed, {}, {"a": 1})
            sub_run(saver, tid, "inner:task-2", [skewed["id"], skewed["id"]])
        assert skewed["id"] < last
        before = namespaces(db_dsn, tid)
        assert len(before) == 2
        with pytest.raises(ThreadDeletedError):
            late_put(saver, tid, last)
        with pytest.raises(ThreadDeletedError):
            saver.put_writes(config(tid, last), [("a", 1)], "late")
        assert namespaces(db_dsn, tid) == before


def test_a_failed_cleanup_leaves_the_refusal_as_it_was(saver: PostgresSaver, db_dsn: str) -> None:
    """The cleanup runs after the refusal, in a transaction of its own: where it fails (here a
    constraint refuses its update of the record; a lock it cannot get in time), the caller still
    gets ThreadDeletedError, the refused id stays recorded, and the next refusal cleans up."""
    tid = "cleanup-fails"
    last = fill(saver, tid)
    saver.delete_thread(tid)
    inner = sub_run(saver, tid, "inner:task-1", [last, last])
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE pgsaver_deleted_threads ADD CONSTRAINT one_refused"
            " CHECK (cardinality(refused) <= 1)"
        )
    with pytest.raises(ThreadDeletedError) as err:
        late_put(saver, tid, last)
    assert err.value.operation == "put"
    assert len(refused_ids(db_dsn, tid)) == 1  # the late put's own id, recorded
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(config(tid, last), [("a", 1)], "late")
    assert "inner:task-1" in namespaces(db_dsn, tid)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE pgsaver_deleted_threads DROP CONSTRAINT one_refused")
    if not saver._q.citus:
        # a lock the cleanup waits for (copy_thread holds its source's so): it gives up in time.
        # (On Citus the lock is taken on the thread's worker, where the coordinator's
        # lock_timeout does not reach: the guide says so.)
        with psycopg.connect(db_dsn, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock_shared(1818718323, hashtext(%s))", (tid,))
            steps = _lifecycle.drop_late_subgraphs(saver._q, tid, lock_timeout=0.3)
            with pytest.raises(Exception, match="lock"):
                saver._driver.drive(steps)
            with pytest.raises(ThreadDeletedError):  # the late write, refused all the same
                saver.put_writes(config(tid, last), [("a", 1)], "late")
            assert "inner:task-1" in namespaces(db_dsn, tid)
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(config(tid, last), [("a", 1)], "late")
    assert "inner:task-1" not in namespaces(db_dsn, tid)
    assert inner[-1] in refused_ids(db_dsn, tid)


def test_prune_of_several_threads_records_each_newest_id(saver: PostgresSaver, db_dsn: str) -> None:
    newest = {f"many-{i}": fill(saver, f"many-{i}", 2 + i) for i in range(4)}
    saver.prune(sorted(newest), strategy="delete")
    with psycopg.connect(db_dsn) as conn:
        recorded = dict(
            conn.execute(
                "SELECT thread_id, last_checkpoint_id FROM pgsaver_deleted_threads "
                "WHERE thread_id LIKE 'many-%%'"
            ).fetchall()
        )
    assert recorded == newest


def test_copy_into_a_deleted_thread_is_a_new_thread(saver: PostgresSaver, db_dsn: str) -> None:
    tid = "copied-into"
    fill(saver, tid)
    saver.delete_thread(tid)
    fill(saver, "source", 4)
    saver.copy_thread("source", tid)
    got = saver.get_tuple(config(tid))
    assert got is not None
    # writes to the copied checkpoints go in: they are stored
    saver.put_writes(got.config, [("a", "after-copy")], "t")
    assert rows(db_dsn, tid)["checkpoints"] == 4


def test_a_write_waiting_on_the_delete_is_refused(saver: PostgresSaver, db_dsn: str) -> None:
    """put_writes blocked on the thread's lock while the delete holds it: when the delete commits,
    the write reads the record with a snapshot taken after its wait, and is refused."""
    tid = "waiting"
    last = fill(saver, tid)
    outcome: list[BaseException | None] = []
    with psycopg.connect(db_dsn) as holder:
        # the delete under the thread's lock, as the lifecycle jobs take it (on Citus, on the
        # thread's worker), its transaction left open
        q = saver._q
        delete = Stmt(q["delete_thread"], {"thread_id": tid})
        for stmt in _lifecycle.locked(q, [tid], delete):
            holder.execute(stmt.query, stmt.params)

        def write() -> None:
            try:
                saver.put_writes(config(tid, last), [("a", "late")], "late-task")
                outcome.append(None)
            except BaseException as exc:  # the test inspects it
                outcome.append(exc)

        t = threading.Thread(target=write)
        t.start()
        deadline = time.monotonic() + 10
        with psycopg.connect(db_dsn, autocommit=True) as watch:
            while time.monotonic() < deadline:
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                ).fetchone()
                if waiting and waiting[0]:
                    break
                time.sleep(0.02)
        holder.commit()
        t.join(30)
    assert len(outcome) == 1, outcome
    assert isinstance(outcome[0], ThreadDeletedError), outcome
    assert rows(db_dsn, tid) == {"checkpoints": 0, "writes": 0, "blobs": 0}


async def test_async_saver_refuses_late_writes(db_dsn: str) -> None:
    tid = "async-deleted"
    async with AsyncPostgresSaver.from_conn_string(db_dsn) as saver:
        parent = None
        for i in range(3):
            cp = checkpoint({"a": i}, {"a": i + 1})
            stored = await saver.aput(config(tid, parent), cp, {}, {"a": i + 1})
            parent = stored["configurable"]["checkpoint_id"]
        assert parent is not None
        await saver.adelete_thread(tid)
        cp = checkpoint({"a": "late"}, {"a": 50})
        with pytest.raises(ThreadDeletedError):
            await saver.aput(config(tid, parent), cp, {}, {"a": 50})
        # a late subgraph, stored after the delete (no parent), goes with the next refusal
        sub = await saver.aput(
            config(tid, None, "inner:task-1"),
            checkpoint({"s": 1}, {"s": 1}),
            {"parents": {"": parent}},  # type: ignore[typeddict-unknown-key]
            {"s": 1},
        )
        assert (await saver.aget_tuple(sub)) is not None
        with pytest.raises(ThreadDeletedError):
            await saver.aput_writes(config(tid, parent), [("a", 1)], "t")
        assert (await saver.aget_tuple(sub)) is None
        assert rows(db_dsn, tid) == {"checkpoints": 0, "writes": 0, "blobs": 0}
        fresh = await saver.aput(config(tid), empty_checkpoint(), {}, {})
        assert (await saver.aget_tuple(fresh)) is not None
        await asyncio.sleep(0)


@pytest.fixture
def gated(db_dsn: str) -> str:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS deleted_runs (text text)")
        conn.execute("CREATE TABLE IF NOT EXISTS deleted_go (go int)")
    return db_dsn


@pytest.mark.parametrize("durability", ["sync", "async"])
@pytest.mark.parametrize("shape", ["flat", "subgraph"])
def test_a_run_in_another_process_does_not_bring_its_thread_back(
    saver: PostgresSaver, gated: str, durability: str, shape: str
) -> None:
    """Two processes, as users reproduce it: a graph runs in a worker; this process deletes the
    thread while the worker's node runs; the worker's next write is refused and the thread
    stays deleted. In the subgraph shape the node then runs a subgraph: its first checkpoint has
    no parent to check and is stored, and the refusal of the node's writes takes the subgraph's
    rows along. Then a new run on the same thread id works."""
    tid = f"conversation-{durability}-{shape}"
    worker = subprocess.Popen(
        [*WORKER, gated, tid, "hello", durability, shape], stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        with psycopg.connect(gated, autocommit=True) as conn:
            while time.monotonic() < deadline:
                if conn.execute("SELECT 1 FROM deleted_runs").fetchone():
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the worker's node never started")
            assert saver.get_tuple(config(tid)) is not None
            saver.delete_thread(tid)
            conn.execute("INSERT INTO deleted_go VALUES (1)")
        out, _ = worker.communicate(timeout=120)
    finally:
        worker.kill()
    result = json.loads(out.strip().splitlines()[-1])
    assert result.get("error") == "ThreadDeletedError", result
    assert result["thread_id"] == tid
    assert saver.get_tuple(config(tid)) is None
    assert rows(gated, tid) == {"checkpoints": 0, "writes": 0, "blobs": 0}
    if shape == "subgraph":  # its checkpoints were stored after the delete, then deleted
        with psycopg.connect(gated) as conn:
            said = conn.execute(
                "SELECT text FROM deleted_runs WHERE text LIKE 'subgraph rows: %'"
            ).fetchall()
        assert said, "the subgraph never ran"
        assert int(said[0][0].split(": ")[1]) >= 2, said
    # a new run on the same id, in this process (the gate is open)
    import deleted_worker

    out2 = deleted_worker.graph(gated, saver, shape).invoke(
        {"text": "again", "turns": 0}, {"configurable": {"thread_id": tid}}
    )
    if shape == "subgraph":
        assert out2 == {"text": "againab?", "turns": 3}
        with psycopg.connect(gated) as conn:
            nss = conn.execute(
                "SELECT DISTINCT checkpoint_ns FROM pgsaver_checkpoints WHERE thread_id = %s",
                (tid,),
            ).fetchall()
        assert len(nss) == 2  # the root and the new run's subgraph call
    else:
        assert out2 == {"text": "again!?", "turns": 2}
    assert saver.get_tuple(config(tid)) is not None


def test_retention_forgets_old_records(saver: PostgresSaver, db_dsn: str) -> None:
    """2,500 records, 2,000 of them older than keep_deleted: retention forgets those (in batches
    of ``batch``) and keeps the rest; a forgotten thread no longer refuses late writes."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_deleted_threads (thread_id, last_checkpoint_id, deleted_at) "
            "SELECT 'gone-' || lpad(i::text, 5, '0'), 'ffff', now() - interval '10 days' "
            "FROM generate_series(1, 2000) AS i"
        )
        conn.execute(
            "INSERT INTO pgsaver_deleted_threads (thread_id, last_checkpoint_id) "
            "SELECT 'recent-' || i, 'ffff' FROM generate_series(1, 500) AS i"
        )
    tid = "old-delete"
    last = fill(saver, tid)
    saver.delete_thread(tid)
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_deleted_threads SET deleted_at = now() - interval '8 days' "
            "WHERE thread_id = %s",
            (tid,),
        )
    fill(saver, "idle-but-young")
    dry = saver.retention(idle_for=timedelta(days=1), dry_run=True)
    assert dry.threads == 0
    saver.retention(idle_for=timedelta(days=1), batch=300)
    with psycopg.connect(db_dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FILTER (WHERE thread_id LIKE 'recent-%%'), count(*) "
            "FROM pgsaver_deleted_threads"
        ).fetchone()
    assert left == (500, 500)
    # forgotten: the late put is stored again (the record's window is keep_deleted)
    late_put(saver, tid, last)
    # keep_deleted=None keeps every record
    saver.delete_thread("idle-but-young")
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgsaver_deleted_threads SET deleted_at = now() - interval '30 days'")
    saver.retention(idle_for=timedelta(days=1), keep_deleted=None)
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgsaver_deleted_threads").fetchone() == (501,)


def test_a_schema_before_migration_0018_works_as_before(db_dsn: str) -> None:
    """This release on a schema its setup() has not migrated yet (at 0017): deletes and writes
    work without the record, as before; after setup(), deletes are recorded."""
    schema = "before18"
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        script = migrate.script(schema, distribute=False)
        head = script.index("\n-- 0018_")
        conn.execute((script[:head] + "\nCOMMIT;\n").encode())
    dsn = f"{db_dsn} options=-csearch_path={schema}"
    with PostgresSaver.from_conn_string(db_dsn, schema=schema) as old:
        tid = "old-schema"
        last = fill(old, tid)
        assert old._driver.state.deleted is False
        old.delete_thread(tid)
        fill(old, "another")
        old.prune(["another"], strategy="delete")
        old.retention(idle_for=timedelta(days=1))
        late_put(old, tid, last)  # no record: stored, as before
        assert rows(dsn, tid)["checkpoints"] == 1
        # another process migrates; this one's setup() finds the schema current (its fast path)
        with PostgresSaver.from_conn_string(db_dsn, schema=schema) as deployer:
            deployer.setup()
        old.setup()
        assert old._driver.state.deleted is True
        last = fill(old, "new-schema")
        old.delete_thread("new-schema")
        with pytest.raises(ThreadDeletedError):
            late_put(old, "new-schema", last)
