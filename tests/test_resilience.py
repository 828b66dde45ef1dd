"""Connections that heal: killed backends, a restarted server, dead idle connections. Faults are real
(pg_terminate_backend, pg_ctl restart); the callers never retry themselves."""

from __future__ import annotations

import asyncio
import operator
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
import pytest
from helpers import checkpoint, config
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from pgserver import Server, free_port, from_local_binaries
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
from typing_extensions import TypedDict

from langgraph_pg_saver import (
    NO_RETRY,
    AsyncPostgresSaver,
    ConnectionTimeoutError,
    EventLoopError,
    PostgresSaver,
    RetryPolicy,
    SaverClosedError,
    StatementTimeoutError,
)
from langgraph_pg_saver.db.retry import is_transient


def kill_backends(dsn: str, *, wait: bool = True) -> int:
    """Terminate every other session of ``dsn``'s database; how many there were. With ``wait``,
    return once they are gone (pg_terminate_backend only signals: a backend sends its last
    message and exits a moment later)."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchall()
        pids = [r[0] for r in rows]
        deadline = time.monotonic() + 5
        while wait and pids and time.monotonic() < deadline:
            left = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
            ).fetchone()
            if left == (0,):
                break
            time.sleep(0.005)
    return len(pids)


# ---------------------------------------------------------------- a graph of many supersteps


class LoopState(TypedDict):
    n: int
    limit: int
    log: Annotated[list[str], operator.add]


def _a(state: LoopState) -> dict[str, Any]:
    return {"n": state.get("n", 0) + 1}


def _b(state: LoopState) -> dict[str, Any]:
    return {"log": [f"b{state['n']}"]}


def _c(state: LoopState) -> dict[str, Any]:
    return {"log": [f"c{state['n']}"]}


def _route(state: LoopState) -> str:
    return "a" if state["n"] < state["limit"] else END


def loop_graph(a: Any = _a) -> StateGraph[Any]:
    """a, then b and c in parallel (two writes a step), again until n reaches limit.

    No barrier (``add_edge(["b", "c"], "join")``): LangGraph hands a barrier channel's live set to
    the checkpoint it saves in the background, so what a put that runs later (after a retry's
    wait, say) stores of it depends on timing, whatever the saver."""
    g: StateGraph[Any] = StateGraph(LoopState)
    g.add_node("a", a)
    g.add_node("b", _b)
    g.add_node("c", _c)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_conditional_edges("b", _route, ["a", END])
    return g


def history(graph: Any, cfg: Any) -> list[tuple[Any, ...]]:
    """What a user sees of a thread's history: steps, sources, values and next nodes, newest first."""
    return [
        (s.metadata["step"], s.metadata["source"], s.values, s.next)
        for s in graph.get_state_history(cfg)
    ]


def _inputs(thread: int) -> list[dict[str, Any]]:
    return [{"log": [f"in{thread}.{k}"], "limit": 4 * (k + 1)} for k in range(3)]


class Killer:
    """Terminates every session of the database every ``low``-``high`` seconds, in a thread."""

    def __init__(self, dsn: str, low: float = 0.03, high: float = 0.15) -> None:
        self.dsn, self.low, self.high = dsn, low, high
        self.kills = 0
        self.sessions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        while not self._stop.wait(rng.uniform(self.low, self.high)):
            self.sessions += kill_backends(self.dsn, wait=False)
            self.kills += 1

    def __enter__(self) -> Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------- the tests


def test_transient_errors_are_told_apart() -> None:
    from psycopg import errors
    from psycopg_pool import PoolClosed, PoolTimeout

    assert is_transient(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not is_transient(PoolTimeout("couldn't get a connection after 30.00 sec"))
    assert not is_transient(PoolClosed("the pool is closed"))
    assert not is_transient(errors.UniqueViolation())
    assert not is_transient(errors.QueryCanceled())  # a statement timeout is not retried
    assert not is_transient(ValueError())
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="initial_delay"):
        RetryPolicy(initial_delay=3.0, max_delay=1.0)
    delays = [RetryPolicy(initial_delay=0.1, max_delay=0.3).delay(n) for n in (1, 2, 3, 4)]
    assert 0.05 <= delays[0] <= 0.1
    assert 0.15 <= delays[3] <= 0.3


def test_after_a_kill_on_a_warm_pool_of_ten_the_next_call_succeeds(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, min_size=10, max_size=10) as saver:
        stored = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        saver._driver.pool.wait()  # type: ignore[union-attr]
        assert kill_backends(db_dsn) == 10
        for _ in range(12):  # every call, each on another of the ten
            assert saver.get_tuple(stored) is not None


def test_a_pool_of_the_callers_heals(db_dsn: str) -> None:
    """A plain psycopg_pool pool (no check configured): dead idle connections are never used."""
    with ConnectionPool(db_dsn, min_size=10, max_size=10, kwargs={"autocommit": True}) as pool:
        pool.wait()
        saver = PostgresSaver(pool, retry=NO_RETRY)
        stored = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert kill_backends(db_dsn) == 10
        for _ in range(12):
            assert saver.get_tuple(stored) is not None


def _killed_while_waiting(db_dsn: str, saver: PostgresSaver) -> Any:
    """A put that waits on a table lock while its backend is terminated; then the lock goes."""
    result: dict[str, Any] = {}
    with psycopg.connect(db_dsn) as blocker:
        blocker.execute("LOCK TABLE pgsaver_checkpoints IN SHARE MODE")

        def put() -> None:
            try:
                result["config"] = saver.put(config("w"), checkpoint({"a": 1}), {}, {"a": 1})
            except Exception as exc:
                result["error"] = exc

        worker = threading.Thread(target=put)
        worker.start()
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            for _ in range(200):
                row = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()"
                ).fetchone()
                if row:
                    admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                    break
                time.sleep(0.01)
            else:
                pytest.fail("the put never waited on the lock")
        time.sleep(0.2)  # the retry waits for the lock again
        blocker.rollback()
        worker.join(30)
    return result


def test_a_call_whose_backend_dies_under_it_is_rerun(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        result = _killed_while_waiting(db_dsn, saver)
        assert "error" not in result, result
        assert saver.get_tuple(result["config"]) is not None
    # without retries the fault reaches the caller: the retry is what heals it
    with PostgresSaver.from_conn_string(db_dsn, retry=NO_RETRY) as saver:
        result = _killed_while_waiting(db_dsn, saver)
        assert isinstance(result.get("error"), psycopg.errors.AdminShutdown), result


def test_a_caller_connection_is_never_retried(db_dsn: str) -> None:
    conn = psycopg.connect(db_dsn, autocommit=True)
    try:
        saver = PostgresSaver(conn)
        stored = saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        kill_backends(db_dsn)
        with pytest.raises(psycopg.OperationalError):
            saver.get_tuple(stored)
    finally:
        conn.close()


async def test_async_after_a_kill_the_next_calls_succeed(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn, min_size=4, max_size=4) as saver:
        stored = await saver.aput(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        await saver._driver.pool.wait()  # type: ignore[union-attr]
        assert kill_backends(db_dsn) == 4
        for _ in range(6):
            assert await saver.aget_tuple(stored) is not None
    async with AsyncConnectionPool(
        db_dsn, min_size=4, max_size=4, kwargs={"autocommit": True}
    ) as pool:
        await pool.wait()
        saver = AsyncPostgresSaver(pool)
        kill_backends(db_dsn)
        assert await saver.aget_tuple(stored) is not None


@pytest.mark.parametrize("own_pool", [True, False])
def test_durability_exit_survives_a_kill_of_its_idle_connection(
    db_dsn: str, own_pool: bool
) -> None:
    """With durability="exit" a run saves once, at its end: that one put must not be lost to a
    connection that died while the run computed."""
    cfg = config("exit")
    pool = None
    if own_pool:
        saver = PostgresSaver.from_conn_string(db_dsn, min_size=1, max_size=1).open()
    else:
        pool = ConnectionPool(
            db_dsn, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True
        )
        saver = PostgresSaver(pool)
    try:
        saver.setup()
        killed = threading.Event()

        def slow_a(state: LoopState) -> dict[str, Any]:
            if not killed.is_set():
                assert kill_backends(db_dsn) == 1  # the pool's idle connection
                killed.set()
            return {"n": state.get("n", 0) + 1}

        graph = loop_graph(slow_a).compile(checkpointer=saver)
        graph.invoke({"log": ["x"], "limit": 3}, cfg, durability="exit")
        assert killed.is_set()
        state = graph.get_state(cfg)
        assert state.values["n"] == 3
        assert state.values["log"] == ["x", "b1", "c1", "b2", "c2", "b3", "c3"]
    finally:
        saver.close()
        if pool is not None:
            pool.close()


@pytest.mark.slow
def test_chaos_every_thread_ends_with_the_undisturbed_state_and_history(db_dsn: str) -> None:
    """16 threads run graphs while every session is killed every 30-150 ms; nobody retries but the
    saver. Each thread ends with exactly the state and history of an undisturbed run."""
    threads = 16
    with PostgresSaver.from_conn_string(db_dsn, max_size=16) as saver:
        saver.setup()
        graph = loop_graph().compile(checkpointer=saver)
        # the undisturbed run, on threads of their own
        for t in range(threads):
            for inp in _inputs(t):
                graph.invoke(inp, config(f"calm-{t}"))
        failures: list[BaseException] = []

        def work(t: int) -> None:
            try:
                for inp in _inputs(t):
                    graph.invoke(inp, config(f"chaos-{t}"))
            except BaseException as exc:
                failures.append(exc)

        with Killer(db_dsn) as killer:
            workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        assert not failures, failures[:3]
        assert killer.kills >= 5, "the run ended before the faults began"
        assert killer.sessions > 0
        for t in range(threads):
            cfg, calm = config(f"chaos-{t}"), config(f"calm-{t}")
            assert graph.get_state(cfg).values == graph.get_state(calm).values, t
            assert history(graph, cfg) == history(graph, calm), t
        # and both are what LangGraph's reference saver records
        memory = loop_graph().compile(checkpointer=InMemorySaver())
        for inp in _inputs(0):
            memory.invoke(inp, config("chaos-0"))
        assert history(graph, config("chaos-0")) == history(memory, config("chaos-0"))


@pytest.fixture
def own_server() -> Iterator[Server]:
    """A cluster of this test's own (it is restarted): local server binaries, needed in CI."""
    server = from_local_binaries()
    if server is None:
        if os.environ.get("CI"):
            pytest.fail("no local Postgres server binaries to start a cluster to restart")
        pytest.skip("no local Postgres server binaries")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_a_server_restart_in_the_middle_of_a_long_run(own_server: Server) -> None:
    """A 100-superstep run while the server restarts: it completes, with every step saved."""
    assert own_server.restart is not None
    dsn = own_server.dsn
    with PostgresSaver.from_conn_string(dsn, max_size=4) as saver:
        saver.setup()
        steps = threading.Event()
        calls = {"n": 0}

        def counting_a(state: LoopState) -> dict[str, Any]:
            calls["n"] += 1
            if calls["n"] == 30:
                steps.set()
            time.sleep(0.01)
            return {"n": state.get("n", 0) + 1}

        graph = loop_graph(counting_a).compile(checkpointer=saver)
        cfg = config("long")

        def restart() -> None:
            steps.wait(30)
            own_server.restart()  # type: ignore[misc]

        restarter = threading.Thread(target=restart)
        restarter.start()
        graph.invoke({"log": [], "limit": 100}, cfg)
        restarter.join()
        assert steps.is_set()
        state = graph.get_state(cfg)
        assert state.values["n"] == 100
        assert len(state.values["log"]) == 200
        loop_graph().compile(checkpointer=saver).invoke({"log": [], "limit": 100}, config("calm"))
        assert history(graph, cfg) == history(graph, config("calm"))


class ProactorEventLoop(asyncio.SelectorEventLoop):
    """Named as Windows' default loop, which psycopg cannot use (this one works: the check goes by
    the class, as on Windows, where asyncio.ProactorEventLoop is the real one)."""


def test_the_async_saver_names_the_fix_on_the_proactor_event_loop(db_dsn: str) -> None:
    async def use() -> None:
        async with AsyncPostgresSaver.from_conn_string(db_dsn) as saver:
            await saver.aget_tuple(config("t"))

    loop = ProactorEventLoop()  # asyncio.Runner(loop_factory=...) is Python 3.11+
    try:
        with pytest.raises(EventLoopError, match="WindowsSelectorEventLoopPolicy"):
            loop.run_until_complete(use())
    finally:
        loop.close()
    asyncio.run(use())  # a selector loop is fine


# ---------------------------------------------------------------- outages and shutdown


def test_close_cancels_a_blocked_put_and_nothing_commits_after_it(db_dsn: str) -> None:
    saver = PostgresSaver.from_conn_string(db_dsn).open()
    saver.get_tuple(config("warm"))
    result: dict[str, Any] = {}
    with psycopg.connect(db_dsn) as blocker:
        blocker.execute("LOCK TABLE pgsaver_checkpoints IN SHARE MODE")

        def put() -> None:
            try:
                saver.put(config("late"), checkpoint({"a": 1}), {}, {"a": 1})
            except Exception as exc:
                result["error"] = exc

        worker = threading.Thread(target=put)
        worker.start()
        time.sleep(0.3)  # waiting on the lock now
        started = time.monotonic()
        saver.close(timeout=0.2)
        took = time.monotonic() - started
        worker.join(5)
        assert not worker.is_alive()
        blocker.rollback()
    assert isinstance(result.get("error"), SaverClosedError), result
    assert 0.2 <= took < 5.0
    with psycopg.connect(db_dsn) as conn:
        time.sleep(0.2)
        row = conn.execute(
            "SELECT count(*) FROM pgsaver_checkpoints WHERE thread_id = 'late'"
        ).fetchone()
        assert row == (0,)
    with pytest.raises(SaverClosedError):
        saver.get_tuple(config("warm"))


async def test_async_close_waits_for_running_calls_then_cancels(db_dsn: str) -> None:
    saver = await AsyncPostgresSaver.from_conn_string(db_dsn).open()
    await saver.aget_tuple(config("warm"))
    with psycopg.connect(db_dsn) as blocker:
        blocker.execute("LOCK TABLE pgsaver_checkpoints IN SHARE MODE")
        task = asyncio.ensure_future(saver.aput(config("late"), checkpoint({"a": 1}), {}, {"a": 1}))
        await asyncio.sleep(0.3)
        await saver.close(timeout=0.2)
        with pytest.raises(SaverClosedError):
            await task
        blocker.rollback()
    with pytest.raises(SaverClosedError):
        await saver.aget_tuple(config("warm"))


def test_a_server_that_does_not_answer_is_named_in_the_timeout(db_dsn: str) -> None:
    port = free_port()  # nothing listens there
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=nowhere"
    saver = PostgresSaver.from_conn_string(dsn, timeout=1.0)
    saver.open(wait=False)
    try:
        started = time.monotonic()
        with pytest.raises(ConnectionTimeoutError) as info:
            saver.get_tuple(config("t"))
        assert time.monotonic() - started < 5
        message = str(info.value)
        assert f"127.0.0.1:{port}/nowhere" in message
        assert "within 1.0 s" in message or "within 1.1 s" in message
        assert "refused" in message.lower(), message
        assert isinstance(info.value, PoolTimeout)  # what callers caught before
        report = saver.healthcheck()
        assert report["ok"] is False
        assert report["reachable"] is False
        assert "ConnectionTimeoutError" in report["error"]
    finally:
        saver.close()


def test_healthcheck_and_stats(db_dsn: str, empty_db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, max_size=3) as saver:
        report = saver.healthcheck()
        assert report["ok"] is True
        assert report["reachable"] is True
        assert report["schema_current"] is True
        assert report["round_trip_ms"] > 0
        assert report["stats"]["pool"]["pool_max"] == 3
        assert saver.stats()["retries"] == 0
        # a retry shows in the figures
        result = _killed_while_waiting(db_dsn, saver)
        assert "config" in result, result
        assert saver.stats()["retries"] >= 1
    with PostgresSaver.from_conn_string(empty_db_dsn) as fresh:
        report = fresh.healthcheck()
        assert report["reachable"] is True
        assert report["schema_current"] is False
        assert report["ok"] is False
        assert "setup()" in report["error"]


async def test_async_healthcheck(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn) as saver:
        report = await saver.ahealthcheck()
        assert report["ok"] is True
        assert saver.stats()["closed"] is False


# ---------------------------------------------------------------- statement timeout


def _blocked_put(saver: Any, db_dsn: str) -> tuple[BaseException | None, float]:
    """A put that waits on a table lock held by another session; what it raised and how long."""
    with psycopg.connect(db_dsn) as blocker:
        blocker.execute("LOCK TABLE pgsaver_checkpoints IN SHARE MODE")
        started = time.monotonic()
        try:
            saver.put(config("slow"), checkpoint({"a": 1}), {}, {"a": 1})
        except Exception as exc:
            return exc, time.monotonic() - started
        finally:
            blocker.rollback()
    return None, time.monotonic() - started


@pytest.mark.parametrize("through", ["direct", "pgbouncer"])
def test_statement_timeout_cancels_a_hot_call_on_the_server(
    db_dsn: str, through: str, request: pytest.FixtureRequest
) -> None:
    dsn = db_dsn if through == "direct" else request.getfixturevalue("bouncer").dsn(db_dsn)
    with PostgresSaver.from_conn_string(dsn, statement_timeout=0.3) as saver:
        assert saver.get_tuple(config("warm")) is None
        error, took = _blocked_put(saver, db_dsn)
        assert isinstance(error, StatementTimeoutError), error
        assert "statement_timeout=0.3" in str(error)
        assert 0.3 <= took < 3.0
        with psycopg.connect(db_dsn) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pgsaver_checkpoints WHERE thread_id = 'slow'"
            ).fetchone()
            assert row == (0,)
        # the saver goes on; calls within the limit are untouched
        stored = saver.put(config("fast"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(stored) is not None
    with pytest.raises(ValueError, match="statement_timeout"):
        PostgresSaver.from_conn_string(dsn, statement_timeout=0)


async def test_async_statement_timeout(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn, statement_timeout=0.3) as saver:
        await saver.aget_tuple(config("warm"))
        with psycopg.connect(db_dsn) as blocker:
            blocker.execute("LOCK TABLE pgsaver_checkpoints IN SHARE MODE")
            with pytest.raises(StatementTimeoutError):
                await saver.aput(config("slow"), checkpoint({"a": 1}), {}, {"a": 1})
            blocker.rollback()
        stored = await saver.aput(config("fast"), checkpoint({"a": 1}), {}, {"a": 1})
        assert await saver.aget_tuple(stored) is not None
