"""How a saver reruns an operation that a transient error interrupted.

A pooled saver reruns an idempotent operation (every hot-path call: ``put`` and ``put_writes`` are
upserts, the rest read or delete by key; and each lifecycle step, whose transaction rolled back) on
another connection when it failed for a reason that another try can cure: the connection was lost
(a killed backend, a restart, a failover, a proxy that dropped it), the server is starting up or
shutting down, or Postgres chose the statement as the victim of a serialization failure or a
deadlock. It never reruns on a connection of the caller's (its transaction may hold other work),
after :meth:`close`, or after any other error.
"""

from __future__ import annotations

import random
import re
import select
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import PoolClosed, PoolTimeout

__all__ = ["DEFAULT_RETRY", "NO_RETRY", "RetryPolicy", "is_transient"]


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all (1: no retry), waiting between them a random time of up to
    ``initial_delay`` seconds, doubling per retry up to ``max_delay`` (half of it at least: jitter,
    so that workers that failed together do not retry together)."""

    attempts: int = 5
    initial_delay: float = 0.05
    max_delay: float = 2.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise TypeError(f"attempts must be an int, not {type(self.attempts).__name__}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1 (1: no retry), not {self.attempts}")
        if not (0 <= self.initial_delay <= self.max_delay):
            raise ValueError(
                "need 0 <= initial_delay <= max_delay, "
                f"not initial_delay={self.initial_delay}, max_delay={self.max_delay}"
            )

    def delay(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1 for the first rerun)."""
        # the exponent capped: a call rerun until its timeout may count many retries
        ceiling = min(self.max_delay, self.initial_delay * 2 ** min(retry - 1, 32))
        return random.uniform(ceiling / 2, ceiling)


#: what savers do unless told otherwise: four reruns within about two seconds
DEFAULT_RETRY = RetryPolicy()
#: retries switched off
NO_RETRY = RetryPolicy(attempts=1)

#: admin shutdown, crash shutdown, cannot connect now (starting up), serialization failure, deadlock
_TRANSIENT_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "40001", "40P01"})
_CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})


def is_transient(exc: BaseException) -> bool:
    """Whether another try of the same idempotent statement, on another connection, may succeed."""
    if isinstance(exc, (PoolTimeout, PoolClosed)) or not isinstance(exc, psycopg.Error):
        return False  # a pool that waited already, or is closed; not a database error
    state = exc.sqlstate
    if state is not None:
        return state in _TRANSIENT_SQLSTATES or state.startswith("08")  # class 08: connection
    # raised by the client, without a server's code: the connection was lost or is unusable
    return isinstance(exc, psycopg.OperationalError)


_OUR_KEY = re.compile(r"\bpgsaver_(?:checkpoints|blobs|writes|imports)_pkey(?:_\d+)?\b")


def duplicate_key(exc: BaseException) -> bool:
    """A unique violation: SQLSTATE 23505, or as Citus reports one that a worker raised in a
    statement it ran in steps (SQLSTATE XX000, the worker's message kept): the put that hit it
    falls back to its upsert either way."""
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return True
    if not isinstance(exc, psycopg.errors.InternalError_):
        return False
    # the worker's message, in its lc_messages: the English text, or a key of ours it names
    # (a shard's index: pgsaver_blobs_pkey_102050)
    message = exc.diag.message_primary or ""
    return message.startswith("duplicate key value violates unique constraint") or bool(
        _OUR_KEY.search(message)
    )


def remote_failure(exc: BaseException) -> bool:
    """A connection failure the server reports, at ERROR level, about another server it uses (a
    Citus coordinator about the worker of a thread's shards, stopped or restarting; a foreign
    server): this session is intact, and the statement can succeed once that server accepts
    again, which no pool wait notices. The driver reruns such a call until its ``timeout`` is
    spent, not only the policy's attempts."""
    if not isinstance(exc, psycopg.Error) or exc.sqlstate is None:
        return False
    return exc.sqlstate.startswith("08") and exc.diag.severity_nonlocalized == "ERROR"


def lost_connection(exc: BaseException) -> bool:
    """A transient error that also tells about the pool's other connections (a restart or a mass
    kill ends them all): worth checking the idle ones before the retry."""
    if not isinstance(exc, psycopg.Error) or remote_failure(exc):
        return False
    state = exc.sqlstate
    return state is None or state in _CONNECTION_SQLSTATES or state.startswith("08")


def socket_readable(conn: Any) -> bool:
    """Whether an idle connection has something to read (nothing costs a round trip): a server
    that ended the session (a killed backend, a shutdown) has sent its last message and closed the
    socket, which is then readable; a healthy idle connection has nothing to say. Also true for a
    closed connection."""
    if conn.closed:
        return True
    try:
        fd = conn.fileno()
    except psycopg.Error:
        return True
    poll = getattr(select, "poll", None)
    if poll is not None:
        p = poll()
        p.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(p.poll(0))
    ready, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - platforms without poll
    return bool(ready)
