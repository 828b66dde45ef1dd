"""Through a real PgBouncer in transaction mode: every operation works with ``prepare_threshold=None``,
with more client connections than server connections, so nothing may rely on session state.

PgBouncer comes from Debian (``.ci/run`` installs it). Without it these tests skip locally and fail
when ``CI`` is set, like the database tests.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
from graphs import delta_chat, two_nodes
from helpers import checkpoint, config, run_threads
from pooler import Bouncer

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver


def test_sync_saver_through_transaction_pooling(bouncer: Bouncer, db_dsn: str) -> None:
    dsn = bouncer.dsn(db_dsn)
    with PostgresSaver.from_conn_string(dsn, max_size=6, prepare_threshold=None) as saver:
        saver.setup()  # already migrated: a no-op, but through the pooler
        graph = two_nodes().compile(checkpointer=saver)
        chat = delta_chat().compile(checkpointer=saver)
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            try:
                for i in range(5):
                    cfg: Any = {"configurable": {"thread_id": f"w{n}-{i}"}}
                    out = graph.invoke({"value": f"v{n}-{i}", "steps": []}, cfg)
                    assert out == graph.get_state(cfg).values
                    for _ in range(4):
                        chat.invoke({"messages": ["hi"]}, {"configurable": {"thread_id": f"c{n}"}})
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        run_threads([lambda n=n: worker(n) for n in range(6)])
        assert not errors, errors

        # DeltaChannel state rebuilt through the pooler: 5 x 4 turns of two messages each
        state = chat.get_state({"configurable": {"thread_id": "c3"}})
        assert state.values["turns"] == 20
        assert len(state.values["messages"]) == 40
        assert len(list(saver.list({"configurable": {"thread_id": "w2-3"}}))) > 1

        # lifecycle: transactions of several statements, advisory locks and lock_timeout
        saver.copy_thread("c3", "c3-copy")
        copied = chat.get_state({"configurable": {"thread_id": "c3-copy"}})
        assert copied.values == state.values
        saver.prune(["c3"])
        assert chat.get_state({"configurable": {"thread_id": "c3"}}).values == state.values
        before = len(list(saver.list({"configurable": {"thread_id": "c1"}})))
        report = saver.retention(thread_ids=["c1", "c2"], keep_last=1, dry_run=True)
        assert report.dry_run
        assert report.checkpoints > 0
        assert len(list(saver.list({"configurable": {"thread_id": "c1"}}))) == before
        report = saver.retention(thread_ids=["c1", "c2"], keep_last=1)
        assert report.checkpoints > 0
        assert len(list(saver.list({"configurable": {"thread_id": "c1"}}))) < before
        assert len(chat.get_state({"configurable": {"thread_id": "c1"}}).values["messages"]) == 40
        saver.delete_thread("w0-0")
        assert saver.get_tuple({"configurable": {"thread_id": "w0-0"}}) is None

        # both server sessions behind the pooler (held at once by two open transactions) hold no
        # prepared statement, and no more than two sessions served six client connections
        with (
            psycopg.connect(dsn, prepare_threshold=None) as one,
            psycopg.connect(dsn, prepare_threshold=None) as two,
        ):
            pids = set()
            for conn in (one, two):
                row = conn.execute(
                    "SELECT pg_backend_pid(), (SELECT count(*) FROM pg_prepared_statements)"
                ).fetchone()
                assert row is not None
                pids.add(row[0])
                assert row[1] == 0
            assert len(pids) == 2
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    assert 1 <= row[0] <= 2, row


def test_async_saver_through_transaction_pooling(bouncer: Bouncer, db_dsn: str) -> None:
    dsn = bouncer.dsn(db_dsn)

    async def run() -> None:
        async with AsyncPostgresSaver.from_conn_string(
            dsn, max_size=6, prepare_threshold=None
        ) as saver:
            await saver.setup()
            chat = delta_chat().compile(checkpointer=saver)

            async def one(n: int) -> None:
                for _ in range(6):
                    await chat.ainvoke(
                        {"messages": ["hi"]}, {"configurable": {"thread_id": f"a{n}"}}
                    )

            await asyncio.gather(*(one(n) for n in range(8)))
            for n in range(8):
                state = await chat.aget_state({"configurable": {"thread_id": f"a{n}"}})
                assert state.values["turns"] == 6
                assert len(state.values["messages"]) == 12
            await saver.aprune([f"a{n}" for n in range(4)])
            state = await chat.aget_state({"configurable": {"thread_id": "a0"}})
            assert len(state.values["messages"]) == 12

    asyncio.run(run())


def test_defaults_work_through_a_pooler_that_does_not_track_statements(
    bouncer: Bouncer, db_dsn: str
) -> None:
    """from_conn_string with its defaults (prepare_threshold=5): the driver sees PgBouncer (its
    cancel key is not the server's process id) and prepares nothing on those connections, so a
    statement is never sent to a server session that did not prepare it. Direct to Postgres the
    same saver prepares its hot statements."""
    dsn = bouncer.dsn(db_dsn)
    errors: list[str] = []
    wrong: list[Any] = []
    ok = 0
    with PostgresSaver.from_conn_string(dsn, max_size=6) as saver:
        cp = checkpoint({"a": 1})
        stored = saver.put(config("t"), cp, {"source": "input", "step": -1}, {"a": 1})
        barrier = threading.Barrier(6)
        lock = threading.Lock()

        def reader() -> None:
            nonlocal ok
            barrier.wait()
            for _ in range(30):
                try:
                    got = saver.get_tuple(stored)
                    saver.put_writes(stored, [("a", 2)], "task")
                except psycopg.Error as exc:
                    with lock:
                        errors.append(str(exc))
                    continue
                with lock:
                    if got is not None and got.checkpoint["channel_values"] == {"a": 1}:
                        ok += 1
                    else:
                        wrong.append(got)

        run_threads([reader] * 6)
        with psycopg.connect(dsn, prepare_threshold=None) as one:
            row = one.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
            assert row == (0,)
    assert not errors, errors[:3]
    assert not wrong, wrong[:3]
    assert ok == 180
    with PostgresSaver.from_conn_string(db_dsn, max_size=1) as direct:
        for _ in range(8):
            direct.get_tuple(stored)
        pool = direct._driver.pool
        assert pool is not None
        with pool.connection() as conn:
            row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
            assert row is not None
            assert row[0] >= 1
