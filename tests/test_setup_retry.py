"""setup() reruns after a transient error, as every other call does: its session is killed
(pg_terminate_backend) while it waits for the migration lock, which another session holds, so the
fault hits setup and nothing else, every time."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from langgraph_pg_saver import (
    NO_RETRY,
    AsyncPostgresSaver,
    AsyncPostgresStore,
    PostgresSaver,
    PostgresStore,
    RetryPolicy,
)
from langgraph_pg_saver.db import migrate as _migrate
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA

CLASSES = [PostgresSaver, AsyncPostgresSaver, PostgresStore, AsyncPostgresStore]


def _waiting_setup_pid(admin: psycopg.Connection[Any], timeout: float = 30.0) -> int:
    """The session of this database waiting for an advisory lock (setup, behind the holder)."""
    deadline = time.monotonic() + timeout
    while True:
        row = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
            " AND pid <> pg_backend_pid()"
        ).fetchone()
        if row is not None:
            return int(row[0])
        if time.monotonic() > deadline:
            raise TimeoutError("setup never waited for the migration lock")
        time.sleep(0.01)


def _kill_setup_while_it_waits(dsn: str, run_setup: Callable[[], None]) -> BaseException | None:
    """Hold the migration lock, start ``run_setup`` in a thread, terminate its session as it
    waits for the lock, then let go of the lock; what setup raised (None: nothing)."""
    raised: list[BaseException] = []

    def target() -> None:
        try:
            run_setup()
        except BaseException as exc:
            raised.append(exc)

    with (
        psycopg.connect(dsn, autocommit=True) as holder,
        psycopg.connect(dsn, autocommit=True) as admin,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (_migrate.lock_key(DEFAULT_SCHEMA),))
        thread = threading.Thread(target=target)
        thread.start()
        try:
            pid = _waiting_setup_pid(admin)
            killed = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
            assert killed == (True,)
            # the rerun waits for the lock in a new session: let it through only then
            deadline = time.monotonic() + 30
            while thread.is_alive() and time.monotonic() < deadline:
                row = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event = 'advisory' AND pid <> %s",
                    (pid,),
                ).fetchone()
                if row and row[0]:
                    break
                time.sleep(0.01)
        finally:
            holder.execute("SELECT pg_advisory_unlock_all()")
            thread.join(60)
    assert not thread.is_alive()
    return raised[0] if raised else None


def _schema_current(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM public.pgsaver_migrations").fetchall()
    return max(r[0] for r in rows) == _migrate.head()


def _setup_of(cls: type, dsn: str, retry: RetryPolicy) -> Callable[[], None]:
    """setup() of a fresh ``cls`` from from_conn_string, run to the end (sync or async)."""
    if cls in (PostgresSaver, PostgresStore):

        def run() -> None:
            with cls.from_conn_string(dsn, retry=retry) as owner:
                owner.setup()
                assert owner._driver.stats()["retries"] >= 1

        return run

    async def arun() -> None:
        async with cls.from_conn_string(dsn, retry=retry) as owner:
            await owner.setup()
            assert owner._driver.stats()["retries"] >= 1

    return lambda: asyncio.run(arun())


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_setup_reruns_after_its_session_is_killed(empty_db_dsn: str, cls: type) -> None:
    raised = _kill_setup_while_it_waits(empty_db_dsn, _setup_of(cls, empty_db_dsn, RetryPolicy()))
    assert raised is None, repr(raised)
    assert _schema_current(empty_db_dsn)


def test_setup_without_retries_raises_the_lost_connection(empty_db_dsn: str) -> None:
    """The saver's RetryPolicy governs setup too: NO_RETRY gives the error as it was."""

    def run() -> None:
        with PostgresSaver.from_conn_string(empty_db_dsn, retry=NO_RETRY) as saver:
            saver.setup()

    raised = _kill_setup_while_it_waits(empty_db_dsn, run)
    assert isinstance(raised, psycopg.OperationalError), repr(raised)
    # nothing was applied, and a setup() now finishes the job
    with PostgresSaver.from_conn_string(empty_db_dsn) as saver:
        saver.setup()
        saver.setup(check=True)
