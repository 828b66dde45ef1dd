"""Outages and failovers for real: calls waiting through them resume within about a second.

A server of the test's own (``tests/clusters.py``) is stopped, or killed (crash recovery on the next
start), for 3, 10 or 20 s while the sync saver, the async saver and both stores keep calling, each
from its own thread or task; or a primary is killed and its streaming standby promoted 20 s later,
while real compiled graphs run invokes against the multi-host DSN. Every call raises nothing, and
each client resumes within ``BOUND`` seconds of the server accepting connections again (measured
from when a plain ``psycopg.connect`` first succeeds; a server's start-up and promotion are not
ours to speed up). ``BOUND`` is loose for a shared machine, and far below what psycopg_pool's own
reconnection schedule takes (1 s, doubling: 3.5 s after a 10 s outage, and past the call's 30 s
``timeout`` after a 20 s one).

The figures each test measures are printed (``pytest -s``) as ``outage-figures:`` lines; the
guide's section 13 and docs/scaling.md quote them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from clusters import Cluster, own_cluster, own_pair
from graphs import two_nodes
from helpers import checkpoint, config

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    AsyncPostgresStore,
    ConnectionTimeoutError,
    ParentCheckpointMissingError,
    PostgresSaver,
    PostgresStore,
)

pytestmark = pytest.mark.slow

TIMEOUT = 30.0
#: how soon after the server accepts again every client must have resumed
BOUND = 2.0
#: a pause between a client's calls, so that four clients leave the machine some air
PAUSE = 0.01


@dataclass
class Calls:
    """What one client's calls did: when each ended, and the errors they raised."""

    name: str
    ends: list[float] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    acked: list[Any] = field(default_factory=list)

    def resumed_after(self, since: float) -> float | None:
        later = [t for t in self.ends if t > since]
        return min(later) if later else None


def _sync_loop(calls: Calls, stop: threading.Event, call: Callable[[int], Any]) -> None:
    i = 0
    while not stop.is_set():
        try:
            calls.acked.append(call(i))
            calls.ends.append(time.monotonic())
        except Exception as exc:  # recorded, asserted by the test
            calls.errors.append(exc)
        i += 1
        time.sleep(PAUSE)


async def _async_loop(
    calls: Calls, stop: threading.Event, call: Callable[[int], Awaitable[Any]]
) -> None:
    i = 0
    while not stop.is_set():
        try:
            calls.acked.append(await call(i))
            calls.ends.append(time.monotonic())
        except Exception as exc:
            calls.errors.append(exc)
        i += 1
        await asyncio.sleep(PAUSE)


def _first_accept(dsn: str, out: list[float]) -> None:
    """When a plain connection to ``dsn`` first succeeds."""
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                out.append(time.monotonic())
                return
        except psycopg.Error:
            time.sleep(0.01)


async def _accepted(dsn: str) -> float:
    out: list[float] = []
    await asyncio.to_thread(_first_accept, dsn, out)
    return out[0]


async def _until_resumed(clients: list[Calls], since: float, limit: float = TIMEOUT + 5) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all(c.resumed_after(since) is not None or c.errors for c in clients):
            return
        await asyncio.sleep(0.05)


def _figures(label: str, **figures: Any) -> None:
    print(f"outage-figures: {label} {json.dumps(figures, sort_keys=True)}")


# --------------------------------------------------------------------------- restarts


async def _through_an_outage(cluster: Cluster, outage: float, how: str) -> None:
    cluster.execute("CREATE DATABASE app")
    dsn = cluster.dsn_for("app")
    stop = threading.Event()
    clients = [Calls(n) for n in ("sync saver", "async saver", "sync store", "async store")]
    thread_id = str(uuid.uuid4())
    with (
        PostgresSaver.from_conn_string(dsn, timeout=TIMEOUT) as saver,
        PostgresStore.from_conn_string(dsn, timeout=TIMEOUT) as store,
    ):
        saver.setup()
        store.setup()
        async with (
            AsyncPostgresSaver.from_conn_string(dsn, timeout=TIMEOUT) as asaver,
            AsyncPostgresStore.from_conn_string(dsn, timeout=TIMEOUT) as astore,
        ):

            def sync_put(i: int) -> Any:
                return saver.put(config(f"{thread_id}-s"), checkpoint(), {"i": i}, {})

            async def async_put(i: int) -> Any:
                return await asaver.aput(config(f"{thread_id}-a"), checkpoint(), {"i": i}, {})

            def sync_store_put(i: int) -> Any:
                store.put(("outage", "s"), f"k{i}", {"i": i})
                return f"k{i}"

            async def async_store_put(i: int) -> Any:
                await astore.aput(("outage", "a"), f"k{i}", {"i": i})
                return f"k{i}"

            threads = [
                threading.Thread(target=_sync_loop, args=(clients[0], stop, sync_put)),
                threading.Thread(target=_sync_loop, args=(clients[2], stop, sync_store_put)),
            ]
            for t in threads:
                t.start()
            tasks = [
                asyncio.create_task(_async_loop(clients[1], stop, async_put)),
                asyncio.create_task(_async_loop(clients[3], stop, async_store_put)),
            ]
            try:
                await asyncio.sleep(0.5)  # every client's pool is warm
                await asyncio.to_thread(cluster.stop if how == "stop" else cluster.kill)
                down = time.monotonic()
                await asyncio.sleep(outage)
                await asyncio.to_thread(cluster.start)
                accepted = await _accepted(dsn)
                await _until_resumed(clients, down)
                await asyncio.sleep(0.3)  # and keep working
            finally:
                stop.set()
                await asyncio.gather(*tasks)
                await asyncio.to_thread(lambda: [t.join(60) for t in threads])

            for c in clients:
                assert not c.errors, (c.name, c.errors[:3])
            resumed = {c.name: c.resumed_after(down) for c in clients}
            delays = {n: None if t is None else round(t - accepted, 3) for n, t in resumed.items()}
            _figures(
                f"{how} {outage:g}s",
                accepted_after_down=round(accepted - down, 3),
                resumed_after_accept=delays,
            )
            for name, delay in delays.items():
                assert delay is not None, (name, delays)
                assert delay < BOUND, (name, delays)

            # nothing acknowledged is lost, the crash included (durable cluster)
            stored = {t.checkpoint["id"] for t in saver.list(config(f"{thread_id}-s"))}
            assert {c["configurable"]["checkpoint_id"] for c in clients[0].acked} <= stored
            keys = {i.key for i in store.search(("outage", "s"), limit=100_000)}
            assert set(clients[2].acked) <= keys
            # and the threads' status rows, kept by the puts through the outage, say what is
            # stored: the thread's status, at its newest checkpoint
            found = {t.thread_id: t for t in saver.search_threads(limit=10)}
            for suffix in ("s", "a"):
                thread = f"{thread_id}-{suffix}"
                with psycopg.connect(dsn) as conn:
                    row = conn.execute(
                        "SELECT status, checkpoint_id FROM pgsaver_thread_status"
                        " WHERE thread_id = %s",
                        (thread,),
                    ).fetchone()
                assert row == (found[thread].status, found[thread].checkpoint_id), thread


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("outage", "how"),
    [(3.0, "stop"), (10.0, "stop"), (20.0, "kill")],
    ids=["stopped-3s", "stopped-10s", "killed-20s"],
)
def test_calls_waiting_through_an_outage_resume_within_a_second(outage: float, how: str) -> None:
    with own_cluster() as cluster:
        asyncio.run(_through_an_outage(cluster, outage, how))


# --------------------------------------------------------------------------- failover

PROMOTE_AFTER = 20.0
WORKERS = 3  # graphs invoked at once per saver


async def _failover(synchronous: bool) -> dict[str, Any]:
    with own_pair(synchronous=synchronous) as pair:
        pair.primary.execute("CREATE DATABASE app")
        pair.wait_caught_up()
        dsn = pair.dsn_for("app")
        stop = threading.Event()
        sync_clients = [Calls(f"sync graph {i}") for i in range(WORKERS)]
        async_clients = [Calls(f"async graph {i}") for i in range(WORKERS)]
        store_calls = Calls("sync store")
        run = str(uuid.uuid4())
        with (
            PostgresSaver.from_conn_string(dsn, timeout=TIMEOUT) as saver,
            PostgresStore.from_conn_string(dsn, timeout=TIMEOUT) as store,
        ):
            saver.setup()
            store.setup()
            graph = two_nodes().compile(checkpointer=saver)
            async with AsyncPostgresSaver.from_conn_string(dsn, timeout=TIMEOUT) as asaver:
                agraph = two_nodes().compile(checkpointer=asaver)

                def sync_invoke(n: int) -> Callable[[int], Any]:
                    cfg = config(f"{run}-s{n}")

                    def call(i: int) -> Any:
                        out = graph.invoke({"foo": "", "bar": []}, cfg)
                        return len(out["bar"])

                    return call

                def async_invoke(n: int) -> Callable[[int], Awaitable[Any]]:
                    cfg = config(f"{run}-a{n}")

                    async def call(i: int) -> Any:
                        out = await agraph.ainvoke({"foo": "", "bar": []}, cfg)
                        return len(out["bar"])

                    return call

                def store_put(i: int) -> Any:
                    store.put(("failover",), f"k{i}", {"i": i})
                    return f"k{i}"

                threads = [
                    threading.Thread(target=_sync_loop, args=(c, stop, sync_invoke(n)))
                    for n, c in enumerate(sync_clients)
                ]
                threads.append(
                    threading.Thread(target=_sync_loop, args=(store_calls, stop, store_put))
                )
                for t in threads:
                    t.start()
                tasks = [
                    asyncio.create_task(_async_loop(c, stop, async_invoke(n)))
                    for n, c in enumerate(async_clients)
                ]
                clients = [*sync_clients, *async_clients, store_calls]
                try:
                    await asyncio.sleep(1.0)
                    await asyncio.to_thread(pair.primary.kill)
                    down = time.monotonic()
                    await asyncio.sleep(PROMOTE_AFTER)
                    await asyncio.to_thread(pair.standby.promote)
                    accepted = await _accepted(dsn)
                    await _until_resumed(clients, down)
                    await asyncio.sleep(0.5)
                finally:
                    stop.set()
                    await asyncio.gather(*tasks)
                    await asyncio.to_thread(lambda: [t.join(60) for t in threads])

                resumed = {c.name: c.resumed_after(down) for c in clients}
                delays = {
                    n: None if t is None else round(t - accepted, 3) for n, t in resumed.items()
                }
                # what the graphs acknowledged (an invoke's final state: two entries per invoke)
                # against what the promoted standby holds
                lost_invokes = 0
                for n, c in enumerate(sync_clients):
                    state = graph.get_state(config(f"{run}-s{n}"))
                    held = len(state.values.get("bar", [])) if state.values else 0
                    lost_invokes += max(0, (max(c.acked, default=0) - held) // 2)
                for n, c in enumerate(async_clients):
                    astate = await agraph.aget_state(config(f"{run}-a{n}"))
                    held = len(astate.values.get("bar", [])) if astate.values else 0
                    lost_invokes += max(0, (max(c.acked, default=0) - held) // 2)
                keys = {i.key for i in store.search(("failover",), limit=100_000)}
                lost_puts = len(set(store_calls.acked) - keys)
                errors = [e for c in clients for e in c.errors]
                figures = {
                    "synchronous": synchronous,
                    "accepted_after_kill": round(accepted - down, 3),
                    "resumed_after_promotion": delays,
                    "invokes_acked": sum(len(c.acked) for c in [*sync_clients, *async_clients]),
                    "invokes_failed": sum(len(c.errors) for c in [*sync_clients, *async_clients]),
                    "errors": sorted({type(e).__name__ for e in errors}),
                    "invokes_lost": lost_invokes,
                    "store_puts_acked": len(store_calls.acked),
                    "store_puts_lost": lost_puts,
                }
                _figures("failover", **figures)
                figures["_delays"] = delays
                figures["_errors"] = errors
                return figures


@pytest.mark.timeout(150)
def test_failover_with_synchronous_replication_loses_nothing_and_fails_no_invoke() -> None:
    figures = asyncio.run(_failover(synchronous=True))
    assert not figures["_errors"], figures["_errors"][:3]
    assert figures["invokes_lost"] == 0
    assert figures["store_puts_lost"] == 0
    for name, delay in figures["_delays"].items():
        assert delay is not None, (name, figures["_delays"])
        assert delay < BOUND, (name, figures["_delays"])


@pytest.mark.timeout(150)
def test_failover_with_asynchronous_replication_resumes() -> None:
    """Without synchronous replication the standby may miss the last commits the primary
    acknowledged: those are lost, and an invoke that had read a lost checkpoint cannot store its
    child (``ParentCheckpointMissingError``); nothing else fails, and the clients resume as fast."""
    figures = asyncio.run(_failover(synchronous=False))
    for e in figures["_errors"]:
        assert isinstance(e, ParentCheckpointMissingError), repr(e)
    for name, delay in figures["_delays"].items():
        assert delay is not None, (name, figures["_delays"])
        assert delay < BOUND, (name, figures["_delays"])


# --------------------------------------------------------------------------- the reruns' wait

SHORT_TIMEOUT = 8.0


def _wait_for_sleeper(cluster: Cluster, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(%%'"
            ).fetchone()
        if row is not None and row[0] > 0:
            return
        time.sleep(0.05)
    raise AssertionError("the statement never started")


@pytest.mark.timeout(90)
def test_the_reruns_of_a_call_share_one_wait_of_timeout_from_the_failure() -> None:
    """A statement lost with its server is rerun when the server is back; lost again, its next
    rerun waits only what is left of ``timeout`` since the first failure, not a new ``timeout``
    (with a fresh wait per rerun the call would end about ``timeout`` after the second loss)."""
    with (
        own_cluster() as cluster,
        PostgresSaver.from_conn_string(cluster.dsn, timeout=SHORT_TIMEOUT) as saver,
    ):
        outcome: list[BaseException | None] = []

        def call() -> None:
            try:
                saver._driver.fetch_one(b"SELECT pg_sleep(60)", {})
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=call)
        worker.start()
        _wait_for_sleeper(cluster)
        cluster.stop()  # the statement is lost: the first failure
        failed = time.monotonic()
        time.sleep(1.0)
        cluster.start()
        _wait_for_sleeper(cluster)  # the rerun runs the statement again
        time.sleep(3.0)
        cluster.stop()  # and loses it, 5 s or so after the first failure
        worker.join(60)
        ended = time.monotonic() - failed
        assert len(outcome) == 1
        assert isinstance(outcome[0], ConnectionTimeoutError), outcome
        _figures("reruns", timeout=SHORT_TIMEOUT, ended_after_first_failure=round(ended, 3))
        # one wait of timeout from the first failure (a fresh one per rerun: ~timeout + 5 s)
        assert ended < SHORT_TIMEOUT + 1.5
