"""Connection budgets: a burst's extra connections give their server slots back soon after it.

psycopg_pool closes at most one idle connection per ``max_idle`` period; the pools of
``db/pool.py`` close every connection above ``min_size`` idle that long (checked every quarter of
it), and ``from_conn_string`` sets ``max_idle`` to ``POOL_MAX_IDLE`` unless the caller's
``pool_kwargs`` say otherwise. Backends are counted in ``pg_stat_activity`` by the pool's
``application_name``.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import psycopg
import pytest

from langgraph_pg_saver import AsyncPostgresSaver, AsyncPostgresStore, PostgresSaver, PostgresStore
from langgraph_pg_saver.db.pool import POOL_MAX_IDLE

BURST = 8
MAX_IDLE = 1.0


def _backends(dsn: str, app: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _settles(dsn: str, app: str, want: int, within: float) -> int:
    deadline = time.monotonic() + within
    while True:
        n = _backends(dsn, app)
        if n == want or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def test_from_conn_string_releases_idle_connections_after_a_short_time_by_default(
    db_dsn: str,
) -> None:
    assert POOL_MAX_IDLE <= 60.0
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        assert saver._pool.max_idle == POOL_MAX_IDLE
    with PostgresStore.from_conn_string(db_dsn) as store:
        assert store._driver.pool is not None
        assert store._driver.pool.max_idle == POOL_MAX_IDLE
    # the caller's own max_idle wins
    with PostgresSaver.from_conn_string(db_dsn, pool_kwargs={"max_idle": 600.0}) as saver:
        assert saver._pool.max_idle == 600.0


@pytest.mark.timeout(60)
def test_a_burst_gives_back_all_its_extra_connections_after_max_idle(db_dsn: str) -> None:
    app = f"lgps-burst-{uuid.uuid4().hex[:8]}"
    with PostgresSaver.from_conn_string(
        db_dsn,
        max_size=BURST,
        pool_kwargs={"max_idle": MAX_IDLE},
        connect_kwargs={"application_name": app},
    ) as saver:
        pool = saver._pool
        conns = [pool.getconn() for _ in range(BURST)]
        for conn in conns:
            pool.putconn(conn)
        assert _backends(db_dsn, app) == BURST
        # all of them, not one per max_idle period: psycopg_pool's own shrink would still hold
        # at least half the burst after four periods
        assert _settles(db_dsn, app, 1, within=4 * MAX_IDLE) == 1  # min_size stays
        assert pool.get_stats()["pool_size"] == 1
        # and the pool still serves, and grows again
        saver.setup()
        conns = [pool.getconn() for _ in range(3)]
        for conn in conns:
            pool.putconn(conn)
        assert _backends(db_dsn, app) == 3


@pytest.mark.timeout(60)
def test_a_connection_in_use_is_never_closed_and_a_used_one_stays(db_dsn: str) -> None:
    app = f"lgps-busy-{uuid.uuid4().hex[:8]}"
    with PostgresSaver.from_conn_string(
        db_dsn,
        min_size=0,
        max_size=4,
        pool_kwargs={"max_idle": MAX_IDLE},
        connect_kwargs={"application_name": app},
    ) as saver:
        pool = saver._pool
        held = pool.getconn()
        others = [pool.getconn() for _ in range(3)]
        for conn in others:
            pool.putconn(conn)
        # one caller keeps using the pool: the connection it gets back (LIFO) stays warm
        deadline = time.monotonic() + 3 * MAX_IDLE
        while time.monotonic() < deadline:
            with pool.connection() as conn:
                conn.execute("SELECT 1")
            time.sleep(0.1)
        assert _backends(db_dsn, app) == 2  # the held one and the one in use
        held.execute("SELECT 1")  # never closed under its user
        pool.putconn(held)
        assert _settles(db_dsn, app, 0, within=4 * MAX_IDLE) == 0  # min_size=0


@pytest.mark.timeout(60)
async def test_async_pools_give_back_a_burst_too(db_dsn: str) -> None:
    app = f"lgps-aburst-{uuid.uuid4().hex[:8]}"
    async with AsyncPostgresSaver.from_conn_string(
        db_dsn,
        max_size=BURST,
        pool_kwargs={"max_idle": MAX_IDLE},
        connect_kwargs={"application_name": app},
    ) as saver:
        pool = saver._pool
        conns = [await pool.getconn() for _ in range(BURST)]
        for conn in conns:
            await pool.putconn(conn)
        assert await asyncio.to_thread(_backends, db_dsn, app) == BURST
        assert await asyncio.to_thread(_settles, db_dsn, app, 1, 4 * MAX_IDLE) == 1
    async with AsyncPostgresStore.from_conn_string(db_dsn) as store:
        assert store._driver.pool is not None
        assert store._driver.pool.max_idle == POOL_MAX_IDLE
