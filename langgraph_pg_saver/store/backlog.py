"""The async store's backlog: calls beyond the pool's connections wait here and run merged.

Each ``abatch`` call runs at once on a connection of its own while the store has fewer calls in
flight than its pool has connections. Beyond that, a call's operations are checked (bad input
fails that call alone, before anything runs), then queued; as a slot frees, the queued calls are
taken in arrival order and run as one batch (up to ``MERGED_OPS`` operations), whose results are
handed back call by call. So a burst of thousands of concurrent calls (``asyncio.gather`` over a
store) neither waits out the pool's timeout nor takes a connection per call: puts of many calls
go in one statement, gets of one namespace in one. Calls that are queued together are
concurrent, so running them as one batch (reads first, then the writes in call order, the last
put of a key winning) gives a result that running them one by one could also give. A merged
batch that fails is run again call by call, so that each call gets its own result or error (its
writes were one transaction and rolled back; its reads and TTL refreshes may run twice), unless the
failure is no call's own (no connection within the pool's timeout, the server gone, a read-only
server, a statement timeout): then every call of the batch gets it at once. A call cancelled
while it waits is dropped; one cancelled after its batch was sent may still be applied, as a
statement already sent may still commit.

The sync store has no backlog: its calls come from threads, each waiting for a connection.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg import OperationalError
from psycopg_pool import PoolClosed, PoolTimeout

from langgraph_pg_saver.errors import (
    ConnectionTimeoutError,
    ReadOnlyError,
    SaverClosedError,
    StatementTimeoutError,
)

#: the most operations one merged batch runs (a slot's share of the backlog)
MERGED_OPS = 1000

#: failures of a merged batch that are no call's own (no connection, the server gone, read-only,
#: a statement timeout): every call of the batch gets them, none is run again alone
_SHARED: tuple[type[BaseException], ...] = (
    OperationalError,
    PoolTimeout,
    PoolClosed,
    ConnectionTimeoutError,
    ReadOnlyError,
    StatementTimeoutError,
    SaverClosedError,
)

Run = Callable[[list[Any]], Awaitable[list[Any]]]


class Backlog:
    """Up to ``slots()`` calls in flight; the rest queued and run merged."""

    def __init__(self, run: Run, slots: Callable[[], int]) -> None:
        self._run = run
        self._slots = slots
        self._busy = 0
        self._queue: deque[tuple[list[Any], asyncio.Future[list[Any]]]] = deque()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def busy(self) -> int:
        """Calls and merged batches in flight."""
        return self._busy

    @property
    def waiting(self) -> int:
        """Calls queued."""
        return len(self._queue)

    async def call(self, ops: list[Any], check: Callable[[list[Any]], object]) -> list[Any]:
        """Run ``ops`` now if a slot is free (and nothing waits before it), else queue them
        (after ``check(ops)``, which raises for bad input) and wait for their results."""
        if self._busy < max(1, self._slots()) and not self._queue:
            self._busy += 1
            try:
                return await self._run(ops)
            finally:
                self._busy -= 1
                self._kick()
        check(ops)
        done: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._queue.append((ops, done))
        self._kick()
        return await done

    def _kick(self) -> None:
        while self._queue and self._busy < max(1, self._slots()):
            self._busy += 1
            task = asyncio.get_running_loop().create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> list[tuple[list[Any], asyncio.Future[list[Any]]]]:
        taken: list[tuple[list[Any], asyncio.Future[list[Any]]]] = []
        count = 0
        queue = self._queue
        while queue and (not taken or count + len(queue[0][0]) <= MERGED_OPS):
            ops, done = queue.popleft()
            if done.done():  # its caller was cancelled while it waited
                continue
            taken.append((ops, done))
            count += len(ops)
        return taken

    async def _drain(self) -> None:
        try:
            while True:
                taken = self._take()
                if not taken:
                    return
                await self._run_merged(taken)
        finally:
            self._busy -= 1
            self._kick()

    async def _run_merged(
        self, taken: Sequence[tuple[list[Any], asyncio.Future[list[Any]]]]
    ) -> None:
        try:
            if len(taken) == 1:
                ops, done = taken[0]
                try:
                    _settle(done, await self._run(ops))
                except Exception as exc:
                    _fail(done, exc)
                return
            try:
                results = await self._run([op for ops, _ in taken for op in ops])
            except _SHARED as exc:
                # the connection, the pool or the server failed, not a call: run alone, each
                # call would wait for it again
                for _, done in taken:
                    _fail(done, exc)
                return
            except Exception:
                # each call alone, for its own result or error
                for ops, done in taken:
                    if done.done():
                        continue
                    try:
                        _settle(done, await self._run(ops))
                    except Exception as exc:
                        _fail(done, exc)
                return
            start = 0
            for ops, done in taken:
                _settle(done, results[start : start + len(ops)])
                start += len(ops)
        except BaseException:  # cancelled (the loop is closing): no caller is left waiting
            for _, done in taken:
                if not done.done():
                    done.cancel()
            raise


def _settle(done: asyncio.Future[list[Any]], results: list[Any]) -> None:
    if not done.done():
        done.set_result(results)


def _fail(done: asyncio.Future[list[Any]], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)
