"""Connection pools that hand out the most recently returned connection first (LIFO).

psycopg_pool's pools are queues: ``getconn`` takes the connection that has waited longest. A saver
used by one thread at a time after a burst of concurrency (a LangGraph run saves checkpoints and
writes from background threads, so the pool grows to a few connections) then cycles through every
connection in turn, and each call lands on the server backend that has been idle longest, with cold
CPU caches (a ``get_tuple`` through a pool of 4 was measurably slower than through a pool of 1 on the
same data; docs/performance.md).

These subclasses only change which idle connection comes out first: the one returned last, whose
backend is still warm. Under load every connection is busy anyway, and the idle ones at the back of
the stack are the ones psycopg_pool closes when the pool shrinks after ``max_idle`` (it closes from
the front, the longest-idle end, which is the same end here). Everything else (checks, resets,
statistics, growing and shrinking, timeouts) is psycopg_pool's own.

One consequence to know: with ``min_size`` above 1, the connections at the bottom of the stack can
stay idle through a quiet spell longer than a server's or a proxy's idle timeout, and psycopg_pool
enforces ``max_lifetime`` only when a connection is returned. Behind something that drops idle
connections, pass ``pool_kwargs={"check": ConnectionPool.check_connection}`` (one extra round trip per
checkout) or keep ``min_size=1`` (the default; idle extras are closed after ``max_idle``).

The order is the only thing touched, through the pool's ready-connection deque. If a future
psycopg_pool stores idle connections differently, these pools silently behave like their parents
(first in, first out), which is correct, only slower; the test suite checks the order so that such a
change is noticed here rather than by users.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from psycopg_pool import AsyncConnectionPool, ConnectionPool
from psycopg_pool.abc import ACT, CT

__all__ = ["AsyncLifoConnectionPool", "LifoConnectionPool"]


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


class AsyncLifoConnectionPool(AsyncConnectionPool[ACT]):
    """A :class:`psycopg_pool.AsyncConnectionPool` that reuses the most recently returned
    connection."""

    async def _get_ready_connection(self, timeout: float | None) -> Any:
        if timeout is None or timeout > 0.0:
            _newest_to_front(self)
        return await super()._get_ready_connection(timeout)
