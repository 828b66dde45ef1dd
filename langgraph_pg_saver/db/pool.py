"""Connection pools that hand out the most recently returned connection first (LIFO).

psycopg_pool's pools are queues: ``getconn`` takes the connection that has waited longest. A saver
used by one thread at a time after a burst of concurrency (a LangGraph run saves checkpoints and
writes from background threads, so the pool grows to a few connections) then cycles through every
connection in turn, and each call lands on the server backend that has been idle longest, with cold
CPU caches (a ``get_tuple`` through a pool of 4 was measurably slower than through a pool of 1 on the
same data; docs/performance.md).

These subclasses change which idle connection comes out first: the one returned last, whose
backend is still warm. Under load every connection is busy anyway, and the idle ones at the back of
the stack are the ones that stay idle and are closed when the pool shrinks (below). They also
change when a lost connection is tried again and how the pool shrinks (below); everything else
(checks, resets, statistics, growing, timeouts) is psycopg_pool's own.

One consequence to know: with ``min_size`` above 1, the connections at the bottom of the stack can
stay idle through a quiet spell longer than a server's or a proxy's idle timeout, and psycopg_pool
enforces ``max_lifetime`` only when a connection is returned. The savers' drivers never use an idle
connection its server ended (they look at its socket first) and rerun a call whose connection was
lost (``retry.py``); ``from_conn_string`` also turns TCP keepalives on.

Reconnecting. A new connection that fails for a transient reason (the server is starting up, or
the session was ended while it was being set up) is tried again at once, a few times within about a
quarter of a second. After that, the pool's attempt to add the connection is rescheduled on a
schedule of ours, not psycopg_pool's (one second, doubling: 1, 2, 4, 8, 16 s, so that after a 20 s
outage the next attempt came 31 s after the first failure, past a call's 30 s ``timeout``, while
callers waiting for a connection trigger no attempt of their own): 0.25 s, 0.5 s, then about a
second between attempts (jittered down by up to a quarter, so that pools that failed together do
not knock together), for as long as psycopg_pool's ``reconnect_timeout`` (five minutes by default;
then the attempt gives up, as psycopg_pool's does). One attempt per pool keeps that pace, the
others (a pool that lost ten connections has ten) come back from one second, doubling up to ten,
and all run at once when one connects (``Reconnecting``). A caller waiting for a connection gets
one within about a second of the server accepting again.

Shrinking. psycopg_pool closes at most one idle connection per ``max_idle`` period (its
``ShrinkPool`` task), so a pool that grew to 10 in a burst holds its slots for up to nine periods.
These pools close every connection above ``min_size`` that has been idle for ``max_idle`` seconds,
looking every quarter of ``max_idle`` (``from_conn_string``'s default: 30 s, so a burst's extra
connections are released 30-38 s after it ends).

The order is changed through the pool's ready-connection deque. If a future psycopg_pool stores
idle connections differently, these pools silently behave like their parents (first in, first out),
which is correct, only slower; the test suite checks the order so that such a change is noticed
here rather than by users. The schedule and the shrink hook psycopg_pool's private
``_add_connection`` (given our attempt), ``_add_to_pool`` (which stamps the time a connection went
idle), ``_shrink_pool`` and ``schedule_task`` (for the ``ShrinkPool`` task's period), in psycopg_pool
3.2 and 3.3 alike; ``tests/test_outages.py`` and ``tests/test_pool_budgets.py`` notice a change.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from psycopg_pool.abc import ACT, CT
from psycopg_pool.pool import AddConnection, ShrinkPool
from psycopg_pool.pool_async import AddConnection as AsyncAddConnection
from psycopg_pool.pool_async import ShrinkPool as AsyncShrinkPool

from langgraph_pg_saver.db.retry import is_transient

#: the quick tries of a new connection (the first included) and the wait before each retry
_CONNECT_TRIES = 4
_CONNECT_DELAYS = (0.02, 0.06, 0.15)

__all__ = ["AsyncLifoConnectionPool", "LifoConnectionPool"]

logger = logging.getLogger(__name__)


#: the pool's reconnection schedule after the quick tries: the first waits, then about a second
_RECONNECT_DELAYS = (0.25, 0.5)
RECONNECT_MAX_DELAY = 1.0
#: the other attempts of a pool that is reconnecting: from one second, doubling up to this
RECONNECT_OTHERS_MAX_DELAY = 10.0
#: a shrink looks for idle connections this often, as a fraction of max_idle (and at least every
#: this many seconds, at most)
_SHRINK_EVERY = 0.25
_SHRINK_MIN_PERIOD = 0.5


class Reconnect:
    """A reconnection attempt with our schedule, in the shape of psycopg_pool's own
    (``AttemptWithBackoff``, ``ConnectionAttempt`` before 3.3: ``delay``, ``update_delay``,
    ``time_to_give_up``): ``_RECONNECT_DELAYS``, then about ``RECONNECT_MAX_DELAY`` between tries
    (jittered down by up to a quarter), giving up ``timeout`` seconds (the pool's
    ``reconnect_timeout``) after the first failure, as psycopg_pool's attempt does."""

    def __init__(self, *, timeout: float):
        self.timeout = timeout
        self.delay = 0.0
        self.give_up_at = 0.0
        self.failures = 0
        #: the one attempt of its pool on the fast schedule (see ``Reconnecting``)
        self.probe = True
        self.growing = False
        #: runs under way: a retry scheduled with (almost) no delay may start on another worker
        #: before the run that scheduled it has ended
        self.running = 0
        #: replaced by a copy run at once: its scheduled run does nothing
        self.superseded = False

    def copy(self) -> Reconnect:
        twin = Reconnect(timeout=self.timeout)
        twin.give_up_at, twin.failures, twin.growing = self.give_up_at, self.failures, self.growing
        return twin

    def update_delay(self, now: float) -> None:
        if self.failures == 0:
            self.give_up_at = now + self.timeout
        if not self.probe:
            # (the exponent capped: 2.0 ** 1024 overflows, after some 2.5 hours of failures
            # under a long reconnect_timeout)
            ceiling = min(RECONNECT_OTHERS_MAX_DELAY, 2.0 ** min(self.failures, 16))
        elif self.failures < len(_RECONNECT_DELAYS):
            ceiling = _RECONNECT_DELAYS[self.failures]
        else:
            ceiling = RECONNECT_MAX_DELAY
        self.failures += 1
        self.delay = random.uniform(0.75 * ceiling, ceiling)
        if self.delay + now > self.give_up_at:
            self.delay = max(0.0, self.give_up_at - now)

    def time_to_give_up(self, now: float) -> bool:
        return self.give_up_at > 0.0 and now >= self.give_up_at


class Reconnecting:
    """A pool's reconnection attempts (no I/O; each pool has one). A pool that lost ten
    connections has ten attempts to add them back; trying each about every second would knock at
    the server ten times a second (and log as many warnings), so only one of them, the probe, is
    on the fast schedule; the others come back from one second, doubling up to
    ``RECONNECT_OTHERS_MAX_DELAY``. When an attempt that had failed succeeds (the server accepts
    again), copies of the others are run at once (and their scheduled runs do nothing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[Reconnect] = set()
        self._probe: Reconnect | None = None

    def start(self, attempt: Any, growing: bool, reconnect_timeout: float) -> Reconnect | None:
        """The attempt to run (ours when psycopg_pool gave none: a lost connection replaced,
        the pool growing or filling up), or None when this run is one to skip."""
        with self._lock:
            if attempt is None:
                attempt = Reconnect(timeout=reconnect_timeout)
            if not isinstance(attempt, Reconnect):  # pragma: no cover - not made by us
                return cast(Reconnect, attempt)
            if attempt.superseded:
                return None
            attempt.growing = growing
            attempt.running += 1
            if self._probe is None or self._probe not in self._pending:
                self._probe = attempt
            attempt.probe = self._probe is attempt
            self._pending.add(attempt)
            return attempt

    def done(self, attempt: Reconnect, failures: int) -> list[Reconnect]:
        """After a run of ``attempt`` (``failures``: its count before the run): the attempts to
        run now, when it succeeded after failing."""
        if not isinstance(attempt, Reconnect):  # pragma: no cover
            return []
        with self._lock:
            attempt.running -= 1
            if attempt.failures > failures:
                return []  # failed again, rescheduled
            self._pending.discard(attempt)
            if attempt.time_to_give_up(time.monotonic()) or failures == 0:
                return []  # gave up, or connected at the first try
            # the waiting ones, not those trying right now (each stands for one connection of
            # the pool's count: two runs of one would add two)
            waiting = [a for a in self._pending if a.running == 0]
            copies = []
            for other in waiting:
                other.superseded = True
                self._pending.discard(other)
                copies.append(other.copy())
            return copies


def _idle_since(conn: Any) -> float:
    return float(getattr(conn, "_lgps_idle_since", 0.0))


def _pick_idle(pool: Any, now: float) -> list[Any]:
    """Take out of the pool's idle connections (under its lock) those idle for ``max_idle``
    seconds, oldest first, as many as the pool has above ``min_size``; keeps psycopg_pool's own
    figure of unused connections in step."""
    pool._nconns_min = len(pool._pool)
    ready = pool._pool
    if not isinstance(ready, deque):  # pragma: no cover - a psycopg_pool of another shape
        return []
    spare = pool._nconns - pool.min_size
    picked: list[Any] = []
    for conn in list(ready):
        if len(picked) >= spare:
            break
        if now - _idle_since(conn) >= pool.max_idle:
            picked.append(conn)
    for conn in picked:
        ready.remove(conn)
    pool._nconns -= len(picked)
    pool._nconns_min = len(ready)
    return picked


def _shrink_period(max_idle: float) -> float:
    return max(_SHRINK_MIN_PERIOD, max_idle * _SHRINK_EVERY)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _newest_to_front(pool: object) -> None:
    """Move the most recently returned idle connection to where getconn takes from."""
    ready = getattr(pool, "_pool", None)
    if isinstance(ready, deque) and len(ready) > 1:
        ready.rotate(1)


class LifoConnectionPool(ConnectionPool[CT]):
    """A :class:`psycopg_pool.ConnectionPool` that reuses the most recently returned connection."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        # called by getconn with the pool's lock held; a call that is about to time out takes
        # nothing, so it leaves the order alone
        if timeout is None or timeout > 0.0:
            _newest_to_front(self)
        return super()._get_ready_connection(timeout)

    #: the error of the last failed connection attempt, for the driver's timeout error
    last_connect_error: str | None = None

    def _connect(self, timeout: float | None = None) -> CT:
        for attempt in range(_CONNECT_TRIES):
            try:
                conn = super()._connect(timeout)
            except Exception as exc:
                self.last_connect_error = _describe(exc)
                if attempt == _CONNECT_TRIES - 1 or not is_transient(exc):
                    raise
                time.sleep(_CONNECT_DELAYS[attempt])
            else:
                self.last_connect_error = None
                return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._reconnecting = Reconnecting()  # before the pool opens and starts connecting
        super().__init__(*args, **kwargs)

    def _add_connection(self, attempt: Any, growing: bool = False) -> None:
        ours = self._reconnecting.start(attempt, growing, self.reconnect_timeout)
        if ours is None:
            return
        failures = ours.failures
        try:
            super()._add_connection(cast(Any, ours), growing)
        finally:
            for other in self._reconnecting.done(ours, failures):
                self.run_task(AddConnection(self, cast(Any, other), growing=other.growing))

    def _add_to_pool(self, conn: CT) -> None:
        conn._lgps_idle_since = time.monotonic()  # type: ignore[attr-defined]
        super()._add_to_pool(conn)

    def _shrink_pool(self) -> None:
        with self._lock:
            picked = _pick_idle(self, time.monotonic())
        if picked:
            logger.info("pool %r: closing %d idle connections", self.name, len(picked))
        for conn in picked:
            conn.close()  # out of the pool already (psycopg_pool 3.2 has no _close_connection)

    def schedule_task(self, task: Any, delay: float) -> None:
        if isinstance(task, ShrinkPool):
            delay = min(delay, _shrink_period(self.max_idle))
        super().schedule_task(task, delay)


class AsyncLifoConnectionPool(AsyncConnectionPool[ACT]):
    """A :class:`psycopg_pool.AsyncConnectionPool` that reuses the most recently returned
    connection."""

    async def _get_ready_connection(self, timeout: float | None) -> Any:
        if timeout is None or timeout > 0.0:
            _newest_to_front(self)
        return await super()._get_ready_connection(timeout)

    last_connect_error: str | None = None

    async def _connect(self, timeout: float | None = None) -> ACT:
        for attempt in range(_CONNECT_TRIES):
            try:
                conn = await super()._connect(timeout)
            except Exception as exc:
                self.last_connect_error = _describe(exc)
                if attempt == _CONNECT_TRIES - 1 or not is_transient(exc):
                    raise
                await asyncio.sleep(_CONNECT_DELAYS[attempt])
            else:
                self.last_connect_error = None
                return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._reconnecting = Reconnecting()
        super().__init__(*args, **kwargs)

    async def _add_connection(self, attempt: Any, growing: bool = False) -> None:
        ours = self._reconnecting.start(attempt, growing, self.reconnect_timeout)
        if ours is None:
            return
        failures = ours.failures
        try:
            await super()._add_connection(cast(Any, ours), growing)
        finally:
            for other in self._reconnecting.done(ours, failures):
                self.run_task(AsyncAddConnection(self, cast(Any, other), growing=other.growing))

    async def _add_to_pool(self, conn: ACT) -> None:
        conn._lgps_idle_since = time.monotonic()  # type: ignore[attr-defined]
        await super()._add_to_pool(conn)

    async def _shrink_pool(self) -> None:
        async with self._lock:
            picked = _pick_idle(self, time.monotonic())
        if picked:
            logger.info("pool %r: closing %d idle connections", self.name, len(picked))
        for conn in picked:
            await conn.close()

    async def schedule_task(self, task: Any, delay: float) -> None:
        if isinstance(task, AsyncShrinkPool):
            delay = min(delay, _shrink_period(self.max_idle))
        await super().schedule_task(task, delay)


# --------------------------------------------------------------------------- connection settings

#: from_conn_string's default: prepare a hot-path statement after this many uses on a connection
DEFAULT_PREPARE_THRESHOLD = 5
#: from_conn_string's pools: idle connections above min_size close after this many seconds (all of
#: them, not psycopg_pool's one per period): a burst's extra connections give their server slots
#: back within about 40 s (far below the idle timeouts of cloud load balancers, 4 minutes and more)
POOL_MAX_IDLE = 30.0
#: and every connection is replaced after this many (psycopg_pool's default is an hour)
POOL_MAX_LIFETIME = 1800.0


def mask_dsn(dsn: str, *, unreadable: str) -> str:
    """``dsn`` with its password shown as ``****`` (for hints and logs); ``unreadable`` when it
    does not parse as a connection string."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return unreadable
    if "password" not in parts:
        return dsn
    parts["password"] = "****"
    return make_conninfo("", **parts)


def pool_options(timeout: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The psycopg_pool options of the pools ``from_conn_string`` makes (savers and stores):
    the wait for a connection, the idle and lifetime limits; ``extra`` takes precedence."""
    return {
        "timeout": timeout,
        "max_idle": POOL_MAX_IDLE,
        "max_lifetime": POOL_MAX_LIFETIME,
        **(extra or {}),
    }


#: TCP keepalives for from_conn_string's connections: an idle connection through a NAT or a load
#: balancer stays known to it, and a peer that vanished is noticed in about a minute
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
#: and a connection attempt that gets no answer gives up after this many seconds (libpq's own
#: default waits for the operating system: minutes, for an address that drops packets)
CONNECT_TIMEOUT = 10


def connect_kwargs(
    conn_string: str, prepare_threshold: int | None, given: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The connection arguments of from_conn_string's pool: autocommit, the prepare threshold and
    keepalives, under what the caller gave (``connect_kwargs``, and keepalive parameters already in
    ``conn_string``, which keyword arguments would otherwise override)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        in_dsn = conninfo_to_dict(conn_string)
    except Exception:  # psycopg reports a malformed string when connecting
        in_dsn = {}
    defaults = {**KEEPALIVES, "connect_timeout": CONNECT_TIMEOUT}
    kwargs: dict[str, Any] = {k: v for k, v in defaults.items() if k not in in_dsn}
    kwargs.update(autocommit=True, prepare_threshold=prepare_threshold)
    kwargs.update(given or {})
    return kwargs
