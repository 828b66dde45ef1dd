"""What the sync and async savers share: options, SQL for the schema, versions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, overload

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection, AsyncCursor, Connection, Cursor, pq
from psycopg.rows import TupleRow, tuple_row

from . import _core
from ._sql import Queries, queries_for
from .errors import SaverClosedError

logger = logging.getLogger(__name__)

DEFAULT_SCHEMA = "public"
#: from_conn_string's default: prepare a hot-path statement after this many uses on a connection
DEFAULT_PREPARE_THRESHOLD = 5
_IDLE = pq.TransactionStatus.IDLE


class _State:
    """Open/closed state and event loop, shared by a saver and its shallow copies.

    LangGraph clones savers (``with_allowlist`` in strict msgpack mode): a clone must see the original
    being opened or closed.
    """

    __slots__ = ("closed", "loop")

    def __init__(self) -> None:
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None


class _SaverBase(BaseCheckpointSaver[str]):
    """Options and helpers common to :class:`PostgresSaver` and :class:`AsyncPostgresSaver`."""

    _q: Queries
    _state: _State

    def __init__(
        self, *, serde: SerializerProtocol | None = None, schema: str = DEFAULT_SCHEMA
    ) -> None:
        super().__init__(serde=serde)
        self._q = queries_for(schema)
        self._state = _State()

    @property
    def _closed(self) -> bool:
        return self._state.closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self._state.closed = value

    @property
    def schema(self) -> str:
        """The Postgres schema holding this saver's tables."""
        return self._q.schema

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Next channel version, compatible with the official Postgres saver's version strings."""
        return _core.next_version(current)

    def _put_writes_sql(self, params: _core.Params) -> tuple[bytes, bytes | None]:
        """put_writes' statement, and the upsert to fall back to (see the saver's ``_fetch``).

        Writes to special channels (negative idx) replace earlier ones: an expected conflict,
        handled by the upsert directly. Ordinary writes first try a plain INSERT.
        """
        q = self._q
        rows = params[_core.ROWS]
        if rows:  # ordinary writes as scalars (see _core.put_writes_params)
            return q.rows_variant("put_writes_new", rows), q.rows_variant("put_writes", rows)
        if min(params["idxs"]) < 0:
            return q["put_writes"], None
        return q["put_writes_new"], q["put_writes"]

    def _put_sql(self, params: _core.Params) -> tuple[bytes, bytes]:
        """put's plain INSERT and the upsert to fall back to, for the form of ``params``."""
        rows = params[_core.ROWS]
        return self._q.rows_variant("put_new", rows), self._q.rows_variant("put", rows)

    def _check_open(self) -> None:
        if self._closed:
            raise SaverClosedError(f"{type(self).__name__} is closed; create or open a new one")


# What a hot-path statement returns, for the savers' _fetch: nothing, one row, the rows of one
# checkpoint (get_tuple), or any number of rows (list).
NO_ROWS, ONE_ROW, ONE_CHECKPOINT, ANY_ROWS = 0, 1, 2, 3
_KEPT_CURSOR = "_lgps_kept_cursor"


@overload
def kept_cursor(conn: Connection[Any]) -> Cursor[TupleRow]: ...
@overload
def kept_cursor(conn: AsyncConnection[Any]) -> AsyncCursor[TupleRow]: ...
def kept_cursor(
    conn: Connection[Any] | AsyncConnection[Any],
) -> Cursor[TupleRow] | AsyncCursor[TupleRow]:
    """The connection's own cursor for the saver's small statements (put, put_writes, get_tuple,
    delete_thread).

    Made once per connection and kept on it: a new cursor costs a transformer and its empty caches
    (~25 µs of a put's Python, measured). Only the thread that checked the connection out uses it.
    A cursor keeps its last parameters and result until its next statement, so it is used only
    where both are small (see statement_cursor and holds_large_result); list() and large values get a
    cursor of their own, dropped after the call.
    """
    cur: Cursor[TupleRow] | AsyncCursor[TupleRow] | None = getattr(conn, _KEPT_CURSOR, None)
    if cur is None or cur.closed:
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        # a connection class with __slots__ gets a new cursor every time
        with contextlib.suppress(AttributeError):
            setattr(conn, _KEPT_CURSOR, cur)
    return cur


@overload
def statement_cursor(
    conn: Connection[Any], returns: int, params: _core.Params
) -> Cursor[TupleRow]: ...
@overload
def statement_cursor(
    conn: AsyncConnection[Any], returns: int, params: _core.Params
) -> AsyncCursor[TupleRow]: ...
def statement_cursor(
    conn: Connection[Any] | AsyncConnection[Any], returns: int, params: _core.Params
) -> Cursor[TupleRow] | AsyncCursor[TupleRow]:
    """The cursor for one hot-path statement: the kept one when its parameters are small and its
    result is at most one checkpoint's rows, otherwise a new one."""
    if returns != ANY_ROWS and _core.params_nbytes(params) <= _core.KEEP_CURSOR_MAX_BYTES:
        return kept_cursor(conn)
    return conn.cursor(binary=True, row_factory=tuple_row)


def holds_large_result(returns: int, result: Any) -> bool:
    """Whether a kept cursor now holds a checkpoint too large to keep (the caller closes it, and
    the connection's next call makes a new one)."""
    return (
        returns == ONE_CHECKPOINT
        and _core.get_tuple_rows_nbytes(result) > _core.KEEP_CURSOR_MAX_BYTES
    )


def autocommit_if_idle(conn: Connection[Any]) -> bool:
    """Switch an idle non-autocommit connection to autocommit; True if the caller must switch back.

    Every saver operation is a single statement, which Postgres runs atomically on its own: with
    autocommit it costs one round trip instead of BEGIN + statement + COMMIT. The switch is client-side
    only (psycopg sends nothing), and a connection inside the caller's own transaction is left alone:
    our statement then joins that transaction.
    """
    if not needs_autocommit_switch(conn.autocommit, conn.info.transaction_status):
        return False
    conn.autocommit = True
    return True


def needs_autocommit_switch(autocommit: bool, status: pq.TransactionStatus) -> bool:
    return not autocommit and status == _IDLE


def _can_restore(conn: Connection[Any] | AsyncConnection[Any]) -> bool:
    # A closed or broken connection cannot be switched back (the pool discards it), and a failed
    # restore must never replace the exception already on its way to the caller.
    return not conn.closed and conn.info.transaction_status == _IDLE


def restore_autocommit(conn: Connection[Any]) -> None:
    if _can_restore(conn):
        try:
            conn.autocommit = False
        except Exception:  # pragma: no cover - defensive
            logger.debug("could not restore autocommit=False", exc_info=True)


async def arestore_autocommit(conn: AsyncConnection[Any]) -> None:
    if _can_restore(conn):
        try:
            # no network I/O when the connection is idle, so no cancellation point either
            await conn.set_autocommit(False)
        except Exception:  # pragma: no cover - defensive
            logger.debug("could not restore autocommit=False", exc_info=True)
