"""On a real Citus cluster (tests/citus.py: a coordinator and two workers): setup() distributes
the schema, the savers run graphs on it, and the hot operations run on the thread's worker.

What does not run on Citus yet is listed in docs/scaling.md ("What works on Citus"); it is not
tested here as working.
"""

from __future__ import annotations

import dataclasses
import operator
import uuid
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import citus
import psycopg
import pytest
from langgraph.graph import END, START, StateGraph
from psycopg import ClientCursor

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    KeyringSerializer,
    PgSaverError,
    PostgresSaver,
    PostgresStore,
    SchemaNotDistributedError,
)
from langgraph_pg_saver.errors import InvalidInputError

DISTRIBUTED = ("pgsaver_blobs", "pgsaver_checkpoints", "pgsaver_imports", "pgsaver_writes")
FUNCTIONS = (
    "pgsaver_claim_head",
    "pgsaver_delta_history",
    "pgsaver_get_tuple",
    "pgsaver_parent_stored",
    "pgsaver_put",
    "pgsaver_put_writes",
)


def placement(dsn: str, saver: PostgresSaver) -> dict[str, tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(saver._q["citus_distribution"]).fetchall()
    return {str(r[1]).split("(")[0]: tuple(r[2:]) for r in rows}


def writes_estimates(dsn: str) -> list[str]:
    """The options of pgsaver_writes.checkpoint_id on each of its shards (migration 0003's
    estimate, which Citus does not copy to them: citus_shard_options sets it)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT x.success, x.result FROM run_command_on_shards('pgsaver_writes', "
            "$$SELECT attoptions::text FROM pg_attribute WHERE attrelid = '%s'::regclass "
            "AND attname = 'checkpoint_id'$$) AS x"
        ).fetchall()
    assert rows
    assert all(ok for ok, _ in rows), rows
    return [str(r) for _, r in rows]


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def graph(checkpointer: Any) -> Any:
    g = StateGraph(State)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", lambda s: {"log": ["b"]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile(checkpointer=checkpointer)


def tasks(dsn: str, query: bytes, params: dict[str, Any]) -> int:
    """How many tasks Citus's plan of ``query`` has (1: it runs on one worker)."""
    # autocommit, as the savers send them: Citus delegates no call inside a transaction block
    with psycopg.connect(dsn, cursor_factory=ClientCursor, autocommit=True) as conn:
        plan = [r[0] for r in conn.execute(b"EXPLAIN (COSTS OFF) " + query, params)]
    counts = [int(line.split(":")[1]) for line in plan if line.strip().startswith("Task Count:")]
    assert counts, "\n".join(plan)
    return max(counts)


def test_setup_distributes_the_schema(citus_dsn: str) -> None:
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup()
        found = placement(citus_dsn, saver)
        for table in DISTRIBUTED:
            assert found[table][:2] == ("distributed", "thread_id"), (table, found[table])
        assert found["pgsaver_migrations"][0] == "reference"
        assert found["pgsaver_store"][0] == "local"
        for function in FUNCTIONS:
            assert found[function][:2] == ("distributed", "p_thread"), function
        # the distributed tables share one co-location group: a thread's rows on one worker
        with psycopg.connect(citus_dsn) as conn:
            groups = conn.execute(
                "SELECT count(DISTINCT colocation_id) FROM citus_tables "
                "WHERE distribution_column = 'thread_id'"
            ).fetchone()
        assert groups == (1,)
        assert all("n_distinct=-0.1" in o for o in writes_estimates(citus_dsn))
        saver.setup()  # again: nothing to do
        saver.setup(check=True)
        from langgraph_pg_saver.ops import doctor

        checks = {c.check: c for c in doctor(saver).checks}
        assert checks["citus"].status == "OK"
        assert "pgsaver_checkpoints distributed by thread_id" in checks["citus"].detail


def test_check_names_what_is_not_distributed_and_setup_moves_the_rows(citus_dsn: str) -> None:
    config = {"configurable": {"thread_id": "before"}}
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup(distribute=False)
        with psycopg.connect(citus_dsn) as conn:
            assert conn.execute("SELECT count(*) FROM citus_tables").fetchone() == (0,)
        graph(saver).invoke({"log": []}, config)
        from langgraph_pg_saver.ops import doctor

        assert {c.check: c.status for c in doctor(saver).checks}["citus"] == "FAIL"
        with pytest.raises(SchemaNotDistributedError) as info:
            saver.setup(check=True)
        assert "pgsaver_checkpoints" in info.value.missing
        assert "pgsaver_migrations" in info.value.missing
        assert any(m.startswith("pgsaver_put(") for m in info.value.missing)
        saver.setup()  # distributes the tables, with the rows they hold
        saver.setup(check=True)
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        assert graph(saver).get_state(config).values == {"log": ["a", "b"]}
        with psycopg.connect(citus_dsn) as conn:
            # no copy left behind in the coordinator's own (shell) tables
            left = conn.execute(
                "SELECT sum(pg_relation_size(to_regclass(t))) FROM unnest(%s::text[]) AS t",
                (list(DISTRIBUTED),),
            ).fetchone()
        assert left == (0,)


def test_distribute_options(citus_dsn: str, db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        with pytest.raises(PgSaverError, match="no citus extension"):
            saver.setup(distribute=True)
        with pytest.raises(InvalidInputError, match="distribute"):
            saver.setup(distribute="yes")  # type: ignore[arg-type]
        saver.setup()  # without citus: nothing to distribute
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup(distribute=True)
        saver.setup(check=True)


def test_a_graph_runs_on_citus(citus_dsn: str) -> None:
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup()
        app = graph(saver)
        for i in range(6):  # threads on both workers
            config = {"configurable": {"thread_id": f"t{i}"}}
            assert app.invoke({"log": [str(i)]}, config) == {"log": [str(i), "a", "b"]}
            state = app.get_state(config)
            assert state.values == {"log": [str(i), "a", "b"]}
            app.update_state(config, {"log": ["x"]})
            assert app.get_state(config).values["log"][-1] == "x"
        saver.delete_thread("t0")
        assert app.get_state({"configurable": {"thread_id": "t0"}}).values == {}
        assert app.get_state({"configurable": {"thread_id": "t1"}}).values["log"][-1] == "x"
        with psycopg.connect(citus_dsn) as conn:
            on = conn.execute(
                "SELECT count(DISTINCT nodeport) FROM citus_shards "
                "WHERE table_name = 'pgsaver_checkpoints'::regclass AND shard_size > 8192 * 2"
            ).fetchone()
        assert on == (2,)  # the threads' rows are on both workers (their ids hash to both)


async def test_a_graph_runs_on_citus_async(citus_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(citus_dsn) as saver:
        await saver.setup()
        app = graph(saver)
        config = {"configurable": {"thread_id": "async"}}
        assert await app.ainvoke({"log": []}, config) == {"log": ["a", "b"]}
        assert (await app.aget_state(config)).values == {"log": ["a", "b"]}
        await saver.adelete_thread("async")
        assert (await app.aget_state(config)).values == {}


def test_hot_operations_run_on_the_threads_worker(citus_dsn: str) -> None:
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup()
        graph(saver).invoke({"log": []}, {"configurable": {"thread_id": "hot"}})
        q = saver._q
        thread = {"thread_id": "hot", "checkpoint_ns": "", "checkpoint_id": None}
        assert tasks(citus_dsn, q["get_tuple_call"], thread) == 1
        assert tasks(citus_dsn, q["delete_thread"], {"thread_id": "hot"}) == 1
        assert tasks(citus_dsn, q["delete_thread_call"], {"thread_id": "hot"}) == 1
        assert tasks(citus_dsn, q["refresh_status"], {"thread_id": "hot"}) == 1
        history = {**thread, "channels": ["log"]}
        assert tasks(citus_dsn, q["delta_history_call"], history) == 1
        put = q["put_call"].decode()
        assert put.lstrip().startswith("SELECT")
        assert "pgsaver_put(" in put
        # the put's function is distributed by its thread argument: Citus delegates the call
        found = placement(citus_dsn, saver)
        assert found["pgsaver_put"][:2] == ("distributed", "p_thread")
        # and its plan is the call pushed down to the thread's worker: one task (EXPLAIN runs
        # nothing), as put_writes'
        put_params = {
            "thread_id": "hot",
            "checkpoint_ns": "",
            "checkpoint_id": "x",
            "parent_checkpoint_id": None,
            "run_id": None,
            "type": "msgpack",
            "checkpoint": b"",
            "channel_versions": "{}",
            "metadata": "{}",
            "metadata_exact": None,
            "blob_channels": [],
            "blob_versions": [],
            "blob_types": [],
            "blob_values": [],
            "status": "pending",
        }
        assert tasks(citus_dsn, q["put_call"], put_params) == 1
        writes = {
            "thread_id": "hot",
            "checkpoint_ns": "",
            "checkpoint_id": "x",
            "task_id": "t",
            "task_path": "",
            "run_id": None,
            "idxs": [0],
            "channels": ["log"],
            "types": ["msgpack"],
            "values": [b""],
        }
        assert tasks(citus_dsn, q["put_writes_call"], writes) == 1


def test_store_without_vectors_on_citus(citus_dsn: str) -> None:
    with PostgresStore.from_conn_string(citus_dsn) as store:
        store.setup()
        store.put(("users", "a"), "k1", {"n": 1})
        store.put(("users", "b"), "k2", {"n": 2})
        assert store.get(("users", "a"), "k1").value == {"n": 1}  # type: ignore[union-attr]
        found = store.search(("users",), filter={"n": 2})
        assert [item.key for item in found] == ["k2"]
        assert store.list_namespaces(prefix=("users",)) == [("users", "a"), ("users", "b")]
        store.delete(("users", "a"), "k1")
        assert store.get(("users", "a"), "k1") is None


# --------------------------------------------------------------------------- the same answers

TABLES = ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes")


def rows_of(dsn: str) -> dict[str, list[str]]:
    """Every row of the checkpoint tables, sorted, but for when it was written (a copy's rows
    are written when it runs)."""
    with psycopg.connect(dsn) as conn:
        return {
            t: sorted(
                str(r[0]) for r in conn.execute(f"SELECT to_jsonb(t) - 'created_at' FROM {t} AS t")
            )
            for t in TABLES
        }


def answers(saver: PostgresSaver, threads: list[str]) -> list[Any]:
    """What a user reads: every list() shape, histories, DeltaChannel history, tuples by id."""

    def tup(t: Any) -> tuple[Any, ...]:
        return (t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes)

    out: list[Any] = [
        [tup(t) for t in saver.list(None)],
        [tup(t) for t in saver.list(None, limit=7)],
        [tup(t) for t in saver.list(None, filter={"source": "loop"}, limit=5)],
        [tup(t) for t in saver.list(None, filter={"step": 2})],
    ]
    for thread in threads:
        cfg = {"configurable": {"thread_id": thread}}
        listed = [tup(t) for t in saver.list(cfg)]
        out.append(listed)
        out.append([tup(t) for t in saver.list(cfg, limit=3)])
        out.append(
            [
                tup(t)
                for t in saver.list(
                    {"configurable": {**cfg["configurable"], "checkpoint_ns": ""}}, limit=4
                )
            ]
        )
        if len(listed) > 2:
            before = listed[2][0]
            out.append([tup(t) for t in saver.list(cfg, before=before)])
            one = saver.get_tuple(listed[1][0])
            out.append(None if one is None else tup(one))
            history = saver.get_delta_channel_history(config=listed[0][0], channels=["messages"])
            out.append(repr(history))
    return out


def assert_same(got: list[Any], want: list[Any]) -> None:
    """``got == want``, naming the first answer, tuple and field that differ."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g == w:
            continue
        if isinstance(g, list) and isinstance(w, list):
            assert len(g) == len(w), (i, len(g), len(w))
            for j, (a, b) in enumerate(zip(g, w, strict=True)):
                for k, (x, y) in enumerate(zip(a, b, strict=True)):
                    assert x == y, (
                        i,
                        j,
                        ("config", "checkpoint", "metadata", "parent", "writes")[k],
                        x,
                        y,
                    )
        assert g == w, i


def build_threads(saver: PostgresSaver) -> list[str]:
    """Threads of the kinds users run: a research chat (subgraphs, DeltaChannels, interrupts), a
    delta chat, an approval left interrupted; ids that hash to both workers."""
    from graphs import approval, delta_chat, research_chat
    from langgraph.types import Command

    research = research_chat().compile(checkpointer=saver)
    chat = delta_chat().compile(checkpointer=saver)
    ask = approval().compile(checkpointer=saver)
    threads = []
    for n in range(3):
        t = f"research-{n}"
        for i in range(5 + n):
            cfg = {"configurable": {"thread_id": t}, "run_id": uuid.UUID(int=100 * n + i)}
            out = research.invoke({"messages": [f"hi{i}"]}, cfg)
            if "__interrupt__" in out:
                research.invoke(Command(resume=f"ok{i}"), {"configurable": {"thread_id": t}})
        threads.append(t)
        t = f"chat-{n}"
        for i in range(7):
            chat.invoke({"messages": [f"m{i}"], "turns": i}, {"configurable": {"thread_id": t}})
        threads.append(t)
    ask.invoke({"request": "x"}, {"configurable": {"thread_id": "ask"}})
    threads.append("ask")
    return threads


def test_citus_answers_as_one_server_does(citus_dsn: str, db_dsn: str) -> None:
    """The same rows on one server and on the cluster: every read the same, then every lifecycle
    job the same report and the same rows left."""
    with PostgresSaver.from_conn_string(db_dsn) as one:
        threads = build_threads(one)
    with PostgresSaver.from_conn_string(citus_dsn) as cluster:
        cluster.setup()
    citus.copy_rows(db_dsn, citus_dsn)
    assert rows_of(citus_dsn) == rows_of(db_dsn)
    with (
        PostgresSaver.from_conn_string(db_dsn) as one,
        PostgresSaver.from_conn_string(citus_dsn) as cluster,
    ):
        assert_same(answers(cluster, threads), answers(one, threads))

        def outcome(job: Any, saver: PostgresSaver) -> Any:
            try:
                return job(saver)
            except PgSaverError as exc:
                return (type(exc), str(exc))

        def same(job: Any) -> None:
            a, b = outcome(job, one), outcome(job, cluster)
            if isinstance(a, tuple):
                assert b == a
            else:
                # on Citus a batch holds one thread's checkpoints: as many batches or more; the
                # bytes are the rows' sizes read before they are deleted (as a dry run reads
                # them), a few bytes from what a DELETE's RETURNING counts on one server
                assert b.batches >= a.batches
                assert abs(b.bytes - a.bytes) <= max(16, a.bytes // 500), (b.bytes, a.bytes)
                assert dataclasses.replace(b, batches=a.batches, bytes=a.bytes) == a
            assert rows_of(citus_dsn) == rows_of(db_dsn)

        same(lambda s: s.prune(["chat-0", "nope"], dry_run=True))
        same(lambda s: s.retention(keep_last=2, dry_run=True))
        same(lambda s: s.copy_thread("research-1", "copy-1"))
        same(lambda s: s.copy_thread("chat-2", "copy-1", overwrite=True))
        same(lambda s: s.prune(["chat-0", "research-0", "nope"]))
        same(lambda s: s.delete_for_runs([str(uuid.UUID(int=201))]))  # refused: DeltaChannels
        same(lambda s: s.delete_for_runs([str(uuid.UUID(int=206))], dry_run=True))
        same(lambda s: s.delete_for_runs([str(uuid.UUID(int=206)), str(uuid.UUID(int=7))]))
        same(lambda s: s.retention(keep_last=2, thread_batch=2, batch=3))
        same(lambda s: s.prune(["chat-1"], strategy="delete"))
        same(lambda s: s.retention(idle_for=timedelta(0), thread_ids=["chat-2", "ask", "x"]))
        threads.append("copy-1")
        assert_same(answers(cluster, threads), answers(one, threads))


# --------------------------------------------------------------------------- the lock protocol


def worker_of(citus_dsn: str, cluster: Any, thread: str) -> str:
    """The DSN of the worker holding ``thread``'s shard of the checkpoints."""
    with psycopg.connect(citus_dsn) as conn:
        row = conn.execute(
            "SELECT nodename, nodeport FROM citus_shards WHERE table_name = "
            "'pgsaver_checkpoints'::regclass AND shardid = "
            "get_shard_id_for_distribution_column('pgsaver_checkpoints', %s::text)",
            (thread,),
        ).fetchone()
    assert row is not None
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(
        citus_dsn, host=row[0], port=str(row[1]), dbname=conninfo_to_dict(citus_dsn)["dbname"]
    )


def waiting_on_advisory(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return int(row[0]) if row else 0


def eventually(check: Any, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


LOCK_CLASS = 1818718323


@pytest.mark.parametrize("job", ["prune", "retention", "delete_for_runs", "copy_thread"])
def test_a_lifecycle_job_waits_for_a_put_in_flight_on_the_threads_worker(
    citus_dsn: str, citus_cluster: Any, job: str
) -> None:
    """A put or put_writes in flight holds the thread's lock shared where its call runs, on the
    thread's worker; the job takes it exclusively there, so it waits, and then sees the write."""
    import threading

    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup()
        app = graph(saver)
        config = {"configurable": {"thread_id": "busy"}, "run_id": uuid.UUID(int=5)}
        app.invoke({"log": []}, config)
        app.invoke({"log": []}, {"configurable": {"thread_id": "busy"}})
        app.invoke({"log": []}, {"configurable": {"thread_id": "source"}})
        worker = worker_of(citus_dsn, citus_cluster, "busy")
        # a put in flight on the worker: a transaction holding the thread's lock shared, as
        # pgsaver_put and pgsaver_put_writes hold it while they write
        inflight = psycopg.connect(worker)
        inflight.execute(
            "SELECT pg_advisory_xact_lock_shared(%s, hashtext(%s))", (LOCK_CLASS, "busy")
        )
        runs = {
            "prune": lambda: saver.prune(["busy"]),
            "retention": lambda: saver.retention(keep_last=1, thread_ids=["busy"]),
            "delete_for_runs": lambda: saver.delete_for_runs([str(uuid.UUID(int=5))]),
            # into the thread: its lock exclusive (the source's shared)
            "copy_thread": lambda: saver.copy_thread("source", "busy", overwrite=True),
        }
        done: list[Any] = []
        t = threading.Thread(target=lambda: done.append(runs[job]()))
        t.start()
        eventually(lambda: waiting_on_advisory(worker) >= 1)
        assert not done  # still waiting for the put in flight
        inflight.commit()
        inflight.close()
        t.join(60)
        assert done, "the job never finished"


def test_a_put_waits_for_a_lifecycle_batch_on_the_threads_worker(
    citus_dsn: str, citus_cluster: Any
) -> None:
    """The other way round: a lifecycle batch holding the thread's lock (citus_lock_thread, the
    statement the jobs lock with) makes the thread's puts and put_writes wait on its worker."""
    import threading

    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup()
        app = graph(saver)
        app.invoke({"log": []}, {"configurable": {"thread_id": "held"}})
        worker = worker_of(citus_dsn, citus_cluster, "held")
        batch = psycopg.connect(citus_dsn)
        batch.execute(saver._q["citus_lock_thread"], {"thread_id": "held", "exclusive": True})
        with psycopg.connect(citus_dsn) as conn:  # not on the coordinator: on the worker
            held = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid <> pg_backend_pid() AND classid::bigint = %s",
                (LOCK_CLASS & 0xFFFFFFFF,),
            ).fetchone()
        assert held == (0,)
        done: list[Any] = []
        t = threading.Thread(
            target=lambda: done.append(
                app.invoke({"log": ["x"]}, {"configurable": {"thread_id": "held"}})
            )
        )
        t.start()
        eventually(lambda: waiting_on_advisory(worker) >= 1)
        assert not done
        batch.commit()
        batch.close()
        t.join(60)
        assert done, "the put never finished"
        assert done[0]["log"][-3:] == ["x", "a", "b"]


def test_prune_and_retention_racing_writers_lose_nothing(citus_dsn: str) -> None:
    """Writers run DeltaChannel chats on threads of both workers while prune and retention loop
    over the same threads; afterwards every checkpoint left reads as the same step of the same
    chat on InMemorySaver, and each thread's newest is its last turn."""
    import threading

    from graphs import delta_chat
    from langgraph.checkpoint.memory import InMemorySaver

    turns, threads = 12, [f"race-{i}" for i in range(4)]
    reference = delta_chat().compile(checkpointer=InMemorySaver())
    expected: dict[int, Any] = {}
    for i in range(turns):
        reference.invoke({"messages": [f"m{i}"]}, {"configurable": {"thread_id": "ref"}})
    for state in reference.get_state_history({"configurable": {"thread_id": "ref"}}):
        expected[state.metadata["step"]] = state.values  # type: ignore[index]
    with PostgresSaver.from_conn_string(citus_dsn, max_size=8) as saver:
        saver.setup()
        app = delta_chat().compile(checkpointer=saver)
        stop = threading.Event()
        errors: list[BaseException] = []

        def write(thread: str) -> None:
            try:
                for i in range(turns):
                    app.invoke({"messages": [f"m{i}"]}, {"configurable": {"thread_id": thread}})
            except BaseException as exc:
                errors.append(exc)

        def lifecycle() -> None:
            n = 0
            try:
                while not stop.is_set():
                    if n % 2:
                        saver.prune(threads)
                    else:
                        saver.retention(keep_last=2, thread_ids=threads, batch=2)
                    n += 1
            except BaseException as exc:
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(t,)) for t in threads]
        pruner = threading.Thread(target=lifecycle)
        pruner.start()
        for w in writers:
            w.start()
        for w in writers:
            w.join(300)
        stop.set()
        pruner.join(300)
        assert not errors, errors
        for thread in threads:
            cfg = {"configurable": {"thread_id": thread}}
            assert app.get_state(cfg).values == expected[max(expected)]
            left = list(app.get_state_history(cfg))
            assert left
            for state in left:
                assert state.values == expected[state.metadata["step"]], thread  # type: ignore[index]


def test_hot_operations_take_one_round_trip_on_citus(citus_dsn: str) -> None:
    """As on one server (test_roundtrips): each hot operation is one statement, counted on the
    wire; on Citus each is a call the coordinator delegates, or a router statement."""
    from helpers import checkpoint, config, traced

    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        saver.setup()
    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        saver = PostgresSaver(conn)
        cp = checkpoint({"a": "x" * 100, "b": [1, 2, 3]})
        with traced(conn.pgconn) as first:
            assert saver.get_tuple(config("none")) is None
        assert first.round_trips == 2  # the connection's first check, then the read
        counts = {}
        with traced(conn.pgconn) as t:
            stored = saver.put(
                config("t"), cp, {"source": "input", "step": -1}, cp["channel_versions"]
            )
        counts["put"] = t.round_trips
        with traced(conn.pgconn) as t:
            saver.put_writes(stored, [("a", 1), ("b", 2), ("__resume__", 3)], "task-1", "path")
        counts["put_writes"] = t.round_trips
        with traced(conn.pgconn) as t:
            saver.put_writes(stored, [("__interrupt__", 3)], "task-2", "path")
        assert t.round_trips == 2  # the writes, then the mark of the thread's status
        with traced(conn.pgconn) as t:
            assert saver.get_tuple(config("t")) is not None
        counts["get_tuple"] = t.round_trips
        with traced(conn.pgconn) as t:
            assert len(list(saver.list(config("t"), limit=5))) == 1
        counts["list(thread)"] = t.round_trips
        with traced(conn.pgconn) as t:
            saver.get_delta_channel_history(config=stored, channels=["a"])
        counts["delta history"] = t.round_trips
        with traced(conn.pgconn) as t:
            saver.delete_thread("t")
        counts["delete_thread"] = t.round_trips
        assert counts == dict.fromkeys(counts, 1), counts
        assert saver.get_tuple(config("t")) is None


def test_a_worker_added_and_the_shards_rebalanced_while_graphs_run_loses_nothing(
    citus_cluster: citus.Cluster, citus_dsn: str
) -> None:
    """docs/scaling.md, "Adding a worker": a third worker added, citus_rebalance_start() moving
    shards onto it (logical replication, writes going on) while chats run on many threads;
    afterwards every thread reads as the same chat on InMemorySaver, and shards are on it."""
    import threading

    from citus import extra_worker
    from graphs import delta_chat
    from langgraph.checkpoint.memory import InMemorySaver
    from psycopg.conninfo import conninfo_to_dict

    if not citus_cluster.workers:
        pytest.skip("the added worker is a local server: for the cluster of ../shared/citus")
    turns, threads = 8, [f"move-{i}" for i in range(8)]
    reference = delta_chat().compile(checkpointer=InMemorySaver())
    for i in range(turns):
        reference.invoke({"messages": [f"m{i}"]}, {"configurable": {"thread_id": "ref"}})
    expected = reference.get_state({"configurable": {"thread_id": "ref"}}).values
    steps = len(list(reference.get_state_history({"configurable": {"thread_id": "ref"}})))
    dbname = conninfo_to_dict(citus_dsn)["dbname"]
    with (
        PostgresSaver.from_conn_string(citus_dsn, max_size=8) as saver,
        extra_worker(str(dbname)) as (host, port),
    ):
        saver.setup()
        app = delta_chat().compile(checkpointer=saver)
        for t in threads:  # every thread has rows before the move
            app.invoke({"messages": ["m0"]}, {"configurable": {"thread_id": t}})
        errors: list[BaseException] = []

        def write(thread: str) -> None:
            try:
                for i in range(1, turns):
                    app.invoke({"messages": [f"m{i}"]}, {"configurable": {"thread_id": thread}})
            except BaseException as exc:
                errors.append(exc)

        with psycopg.connect(citus_dsn, autocommit=True) as conn:
            conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
            writers = [threading.Thread(target=write, args=(t,)) for t in threads]
            for w in writers:
                w.start()
            conn.execute("SELECT citus_rebalance_start()")
            conn.execute("SELECT citus_rebalance_wait()")
            for w in writers:
                w.join(300)
            moved = conn.execute(
                "SELECT count(*) FROM citus_shards WHERE nodeport = %s", (port,)
            ).fetchone()
        assert not errors, errors
        assert moved is not None
        assert moved[0] > 0
        for t in threads:
            assert app.get_state({"configurable": {"thread_id": t}}).values == expected, t
            history = list(app.get_state_history({"configurable": {"thread_id": t}}))
            assert len(history) == steps, t
        # the moved shards came without migration 0003's estimate: doctor says so, and the
        # CLI's setup sets it again on every shard
        from langgraph_pg_saver.ops import doctor

        checks = {c.check: c for c in doctor(saver).checks}
        assert checks["citus shards"].status == "WARN"
        assert "langgraph-pg-saver setup" in checks["citus shards"].fix
        import subprocess
        import sys

        subprocess.run(
            [sys.executable, "-m", "langgraph_pg_saver", "--dsn", citus_dsn, "setup"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        assert all("n_distinct=-0.1" in o for o in writes_estimates(citus_dsn))
        assert "citus shards" not in {c.check for c in doctor(saver).checks}


def test_a_worker_stopped_for_20_seconds_fails_no_call(
    citus_cluster: citus.Cluster, citus_dsn: str
) -> None:
    """A worker down for 20 s (stopped at once, as a crash, then started): the calls of the
    threads whose shards it holds fail on the coordinator with "connection to the remote node
    ... failed" (class 08, this session intact), which the savers rerun until their timeout=
    (30 s), not only the retry policy's 4 reruns (about 2 s); the graphs on the other worker's
    threads go on meanwhile. No invoke fails, sync or async, and afterwards every thread reads
    as the same chat on InMemorySaver. (Measured: docs/scaling.md, "A worker down".)"""
    import asyncio
    import threading
    import time

    from langgraph.checkpoint.memory import InMemorySaver

    if not citus_cluster.workers:
        pytest.skip("a cluster given by DSN: its workers are not this session's to stop")
    port = max(citus_cluster.workers)
    with PostgresSaver.from_conn_string(citus_dsn, max_size=1) as saver:
        saver.setup()
    with psycopg.connect(citus_dsn) as conn:  # threads whose shards the stopped worker holds
        rows = conn.execute(
            "SELECT t, nodeport FROM generate_series(0, 15) AS g(i), LATERAL ("
            "SELECT 'down-' || g.i AS t) AS x, "
            "LATERAL (SELECT nodeport FROM citus_shards "
            "WHERE shardid = get_shard_id_for_distribution_column('pgsaver_checkpoints', x.t)) AS n"
        ).fetchall()
    on_it = [t for t, p in rows if p == port]
    elsewhere = [t for t, p in rows if p != port]
    assert on_it
    assert elsewhere
    threads = on_it[:2] + elsewhere[:2]
    errors: list[BaseException] = []
    turns: dict[str, int] = dict.fromkeys([*threads, "async-" + on_it[0]], 0)
    stop = threading.Event()

    def sync_writer(thread: str) -> None:
        with PostgresSaver.from_conn_string(citus_dsn, max_size=2, timeout=30) as s:
            app = graph(s)
            while not stop.is_set():
                try:
                    app.invoke({"log": []}, {"configurable": {"thread_id": thread}})
                    turns[thread] += 1
                except BaseException as exc:
                    errors.append(exc)
                    return

    async def async_writer(thread: str) -> None:
        async with AsyncPostgresSaver.from_conn_string(citus_dsn, max_size=2, timeout=30) as s:
            app = graph(s)
            while not stop.is_set():
                try:
                    await app.ainvoke({"log": []}, {"configurable": {"thread_id": thread}})
                    turns["async-" + on_it[0]] += 1
                except BaseException as exc:
                    errors.append(exc)
                    return

    writers = [threading.Thread(target=sync_writer, args=(t,)) for t in threads]
    writers.append(threading.Thread(target=lambda: asyncio.run(async_writer("async-" + on_it[0]))))
    for w in writers:
        w.start()
    try:
        time.sleep(2)
        citus_cluster.stop_worker(port)
        try:
            time.sleep(20)
            during = dict(turns)
            time.sleep(0.5)
            # the threads of the worker still up went on while the other was down
            assert all(turns[t] > during[t] for t in elsewhere[:2]) or errors, turns
        finally:
            citus_cluster.start_worker(port)
        time.sleep(3)
    finally:
        stop.set()
        for w in writers:
            w.join(60)
    assert not errors, errors[:3]
    assert all(turns[t] > during[t] for t in turns), (during, turns)  # all went on after it
    reference = graph(InMemorySaver())
    with PostgresSaver.from_conn_string(citus_dsn) as s:
        app = graph(s)
        for thread, n in turns.items():
            for _ in range(n):
                reference.invoke({"log": []}, {"configurable": {"thread_id": thread}})
            config = {"configurable": {"thread_id": thread}}
            assert app.get_state(config).values == reference.get_state(config).values, thread


def test_sealed_copies_and_a_key_rotation_on_citus(citus_dsn: str) -> None:
    """Under a KeyringSerializer: copy_thread into a thread on the other worker seals the copy
    for its place (the reseal names the target: it runs on the target's worker), and reencrypt
    with a new current key seals every thread again, a thread at a time; every thread then
    reads as before under the new key alone."""
    k1, k2 = b"1" * 32, b"2" * 32
    with PostgresSaver.from_conn_string(citus_dsn, max_size=1) as saver:
        saver.setup()
    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        # two threads whose shards are on different workers
        rows = conn.execute(
            "SELECT x.t, (SELECT nodeport FROM citus_shards WHERE shardid = "
            "get_shard_id_for_distribution_column('pgsaver_checkpoints', x.t)) "
            "FROM unnest(ARRAY['s-0', 's-1', 's-2', 's-3', 's-4', 's-5']) AS x(t)"
        ).fetchall()
    source = rows[0][0]
    target = next(t for t, port in rows if port != rows[0][1])
    with PostgresSaver.from_conn_string(citus_dsn, serde=KeyringSerializer({"k1": k1})) as saver:
        app = graph(saver)
        for _ in range(3):
            app.invoke({"log": []}, {"configurable": {"thread_id": source}})
        app.invoke({"log": []}, {"configurable": {"thread_id": ""}})  # the first id of all
        saver.copy_thread(source, target)
        before = {
            t: app.get_state({"configurable": {"thread_id": t}}).values
            for t in (source, target, "")
        }
        assert before[source] == before[target] == {"log": ["a", "b"] * 3}
    rotated = KeyringSerializer({"k2": k2, "k1": k1})
    with PostgresSaver.from_conn_string(citus_dsn, serde=rotated) as saver:
        report = saver.reencrypt()
        assert report.threads == 3
        assert saver.reencrypt(dry_run=True).checkpoints == 0  # nothing left under k1
    with PostgresSaver.from_conn_string(citus_dsn, serde=KeyringSerializer({"k2": k2})) as saver:
        app = graph(saver)
        for t, values in before.items():
            assert app.get_state({"configurable": {"thread_id": t}}).values == values, t
            app.invoke({"log": []}, {"configurable": {"thread_id": t}})


def test_setup_sql_distributes_on_citus_and_changes_nothing_more_on_one_server(
    citus_dsn: str, empty_db_dsn: str
) -> None:
    """`langgraph-pg-saver setup --sql` (db/migrate.script): on a Citus database the script
    leaves the schema distributed as setup() does; on one server the same script is the
    migrations alone."""
    from langgraph_pg_saver.db import migrate

    script = migrate.script("public")
    for dsn in (citus_dsn, empty_db_dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(script.encode())
            # again, and from migration 2 on: a distributed schema takes the same script
            # (Citus refuses a column's storage or options on a distributed table: 0002, 0003 and
            # 0009 leave a distributed table as it is)
            conn.execute(script.encode())
            conn.execute(migrate.script("public", after=1).encode())
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup(check=True)
    assert all("n_distinct=-0.1" in o for o in writes_estimates(citus_dsn))
    with PostgresSaver.from_conn_string(citus_dsn) as saver:
        found = placement(citus_dsn, saver)
        assert found["pgsaver_checkpoints"][:2] == ("distributed", "thread_id")
        assert found["pgsaver_migrations"][0] == "reference"
    with psycopg.connect(citus_dsn) as conn:  # nothing left in the coordinator's own tables
        left = conn.execute(
            "SELECT sum(pg_relation_size(to_regclass(t))) FROM unnest(%s::text[]) AS t",
            ([*DISTRIBUTED, "pgsaver_migrations"],),
        ).fetchone()
    assert left == (0,)
    assert "CREATE EXTENSION" not in migrate.script("public", distribute=False)
    assert "create_distributed_table" not in migrate.script("public", distribute=False)
