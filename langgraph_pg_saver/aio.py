"""AsyncPostgresSaver: the asyncio checkpointer over a psycopg async pool or connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from types import TracebackType
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection, AsyncCursor, errors, pq
from psycopg.rows import TupleRow, tuple_row
from psycopg_pool import AsyncConnectionPool

from . import _core, _lifecycle, _migrate
from ._base import (
    ANY_ROWS,
    DEFAULT_PREPARE_THRESHOLD,
    DEFAULT_SCHEMA,
    NO_ROWS,
    ONE_CHECKPOINT,
    ONE_ROW,
    _SaverBase,
    arestore_autocommit,
    holds_large_result,
    needs_autocommit_switch,
    statement_cursor,
)
from ._lifecycle import Report
from ._sql import Queries
from .errors import ParentCheckpointMissingError, PgSaverError, SaverClosedError
from .pool import AsyncLifoConnectionPool

logger = logging.getLogger(__name__)

_MISSING_SCHEMA = (errors.UndefinedTable, errors.InvalidSchemaName)
_IDLE_STATUS = pq.TransactionStatus.IDLE
T = TypeVar("T")


class AsyncPostgresSaver(_SaverBase):
    """The asyncio twin of :class:`PostgresSaver`: same tables, same SQL, same behaviour.

    Args:
        conn: a ``psycopg_pool.AsyncConnectionPool`` (concurrent calls use concurrent connections) or a
            single ``psycopg.AsyncConnection`` (calls are serialized on it), configured any way.
        pipe: accepted for compatibility with ``langgraph-checkpoint-postgres``; unused.
        serde: the serializer (LangGraph's default when None).
        schema: the Postgres schema for the tables (default ``public``).

    The synchronous methods (``get_tuple``, ``list``, ``put``, ...) work from threads other than the
    event loop's (LangGraph calls them that way): they run the async method on the saver's loop.
    """

    def __init__(
        self,
        conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
        pipe: object | None = None,
        serde: SerializerProtocol | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
    ) -> None:
        super().__init__(serde=serde, schema=schema)
        self._pool: AsyncConnectionPool[Any] | None = None
        self._conn: AsyncConnection[Any] | None = None
        if isinstance(conn, AsyncConnectionPool):
            self._pool = conn
        elif isinstance(conn, AsyncConnection):
            self._conn = conn
        else:
            raise TypeError(
                "AsyncPostgresSaver needs a psycopg AsyncConnection or psycopg_pool "
                f"AsyncConnectionPool, not {type(conn).__name__}"
            )
        self._lock = asyncio.Lock()
        self._owns_pool = False
        self._opened_once = False
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the saver's pool or connection lives on (shared with LangGraph's clones)."""
        return self._state.loop

    @loop.setter
    def loop(self, value: asyncio.AbstractEventLoop | None) -> None:
        self._state.loop = value

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        serde: SerializerProtocol | None = None,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 10,
        prepare_threshold: int | None = DEFAULT_PREPARE_THRESHOLD,
        pool_kwargs: dict[str, Any] | None = None,
        connect_kwargs: dict[str, Any] | None = None,
    ) -> AsyncPostgresSaver:
        """A saver that creates and owns an async pool to ``conn_string``.

        Use ``async with AsyncPostgresSaver.from_conn_string(dsn) as saver:`` or ``await
        saver.open()`` / ``await saver.close()``. See :meth:`PostgresSaver.from_conn_string`.
        """
        kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": prepare_threshold}
        kwargs.update(connect_kwargs or {})
        pool: AsyncConnectionPool[Any] = AsyncLifoConnectionPool(
            conn_string,
            min_size=min_size,
            max_size=max_size,
            kwargs=kwargs,
            open=False,
            name="langgraph-pg-saver",
            **(pool_kwargs or {}),
        )
        saver = cls(pool, serde=serde, schema=schema)
        saver._owns_pool = True
        saver._closed = True  # until open()
        return saver

    async def open(self, *, wait: bool = True, timeout: float = 30.0) -> AsyncPostgresSaver:
        """Open the pool this saver owns (a no-op for a pool or connection you passed in)."""
        self.loop = asyncio.get_running_loop()
        if self._owns_pool and self._pool is not None:
            if self._pool.closed and self._opened_once:
                raise SaverClosedError(
                    "this saver's pool was closed; create a new saver to reconnect"
                )
            self._opened_once = True
            await self._pool.open(wait=wait, timeout=timeout)
        self._closed = False
        return self

    async def close(self) -> None:
        """Close the saver; closes the pool only if ``from_conn_string`` created it."""
        self._closed = True
        if self._owns_pool and self._pool is not None:
            await self._pool.close()

    async def __aenter__(self) -> AsyncPostgresSaver:
        if self._closed:
            await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        self._check_open()
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        if self._pool is not None:
            async with self._pool.connection() as conn:
                yield conn
        else:
            assert self._conn is not None
            async with self._lock:
                yield self._conn

    @asynccontextmanager
    async def _cursor(self) -> AsyncIterator[AsyncCursor[TupleRow]]:
        # getconn/putconn directly, as in PostgresSaver._cursor (the hot statements use _fetch)
        self._check_open()
        pool = self._pool
        if pool is None:
            async with self._connection() as conn, _op_cursor(conn) as cur:
                yield cur
            return
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        conn = await pool.getconn()
        try:
            async with _op_cursor(conn) as cur:
                yield cur
        finally:
            await pool.putconn(conn)

    async def _fetch(
        self, query: bytes, params: _core.Params, returns: int, upsert: bytes | None = None
    ) -> Any:
        """Run one hot-path statement; see :meth:`PostgresSaver._fetch`."""
        pool = self._pool
        if pool is None or self._closed:
            async with self._cursor() as cur:
                return await _fetch_rows(await cur.execute(upsert or query, params), returns)
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        conn = await pool.getconn()
        try:
            if conn.autocommit:
                cur = statement_cursor(conn, returns, params)
                try:
                    result = await _fetch_rows(await cur.execute(query, params), returns)
                except errors.UniqueViolation:
                    if upsert is None:
                        raise
                    result = await _fetch_rows(await cur.execute(upsert, params), returns)
                if holds_large_result(returns, result):
                    await cur.close()
                return result
            async with _op_cursor(conn) as cur:
                return await _fetch_rows(await cur.execute(upsert or query, params), returns)
        finally:
            await pool.putconn(conn)

    # ------------------------------------------------------------------ schema

    async def setup(self, *, check: bool = False) -> None:
        """Create or upgrade the tables; safe from many workers at once. See :meth:`PostgresSaver.setup`."""
        q = self._q
        async with self._cursor() as cur:
            applied = await _read_applied(cur, q)
            if not _migrate.pending(q.schema, applied):
                return
            if check:
                _migrate.check(q.schema, applied)
            conn = cur.connection
            async with conn.transaction():
                await cur.execute(
                    q["migrations_lock"], {"key": _migrate.lock_key(q.schema)}, prepare=False
                )
                await cur.execute(q["schema_exists"], {"schema": q.schema}, prepare=False)
                row = await cur.fetchone()
                if not (row and row[0]):
                    await cur.execute(q["schema_create"], prepare=False)
                await cur.execute(q["migrations_bootstrap"], prepare=False)
                await cur.execute(q["migrations_bootstrap_additive"], prepare=False)
                await cur.execute(q["migrations_applied"], prepare=False)
                applied = _migrate.applied_from_rows(await cur.fetchall())
                for mig in _migrate.pending(q.schema, applied):
                    logger.info(
                        "applying migration %04d_%s to schema %s", mig.version, mig.name, q.schema
                    )
                    # several statements: the simple query protocol of a text cursor
                    async with conn.cursor(binary=False) as ddl:
                        await ddl.execute(q.migration(mig), prepare=False)
                    await cur.execute(
                        q["migrations_record"],
                        {"version": mig.version, "name": mig.name, "additive": mig.additive},
                        prepare=False,
                    )

    async def verify_schema(self) -> None:
        """Raise unless the schema is current; changes nothing."""
        await self.setup(check=True)

    # ------------------------------------------------------------------ the base contract (async)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (the latest of its thread and namespace without an id)."""
        sel = _core.get_tuple_select(config)
        rows = await self._fetch(self._q.get_tuple(sel.predicates), sel.params, ONE_CHECKPOINT)
        return _core.get_tuple_rows_to_tuple(self.serde, rows)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first; every criterion runs in SQL."""
        sel = _core.list_select(config, filter, before, limit)
        rows = await self._fetch(self._q.read_tuples(sel.predicates), sel.params, ANY_ROWS)
        for tup in _core.read_rows_to_tuples(self.serde, rows):
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and its changed channel values (one statement)."""
        params = _core.put_params(self.serde, config, checkpoint, metadata, new_versions)
        insert, upsert = self._put_sql(params)
        if await self._fetch(insert, params, ONE_ROW, upsert) is None:
            raise ParentCheckpointMissingError(
                params["thread_id"], params["checkpoint_ns"], params["parent_checkpoint_id"]
            )
        return _core.put_result(params)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes (one statement)."""
        params = _core.put_writes_params(self.serde, config, writes, task_id, task_path)
        if params is None:
            return
        query, upsert = self._put_writes_sql(params)
        await self._fetch(query, params, NO_ROWS, upsert)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and blob of ``thread_id``."""
        tid = _core.thread_id_param(thread_id)
        await self._fetch(self._q["delete_thread"], {"thread_id": tid}, NO_ROWS)

    # ------------------------------------------------------------------ DeltaChannel history and lifecycle

    async def _drive(self, steps: _lifecycle.Steps) -> Any:
        """Run a lifecycle step generator: each step on a pooled connection, in one transaction."""
        try:
            step = next(steps)
            while True:
                step = steps.send(await self._run_step(step))
        except StopIteration as done:
            return done.value

    async def _run_step(self, step: _lifecycle.Step) -> _lifecycle.Rows:
        async with self._cursor() as cur:
            if not step.transactional:
                stmt = step.statements[0]
                await cur.execute(stmt.query, stmt.params, prepare=stmt.prepare)
                return await cur.fetchall() if cur.description else []
            own = cur.connection.info.transaction_status == pq.TransactionStatus.IDLE
            async with cur.connection.transaction():
                # a transaction-local setting; never leaked into a transaction of the caller's
                if step.lock_timeout is not None and own:
                    timeout = _lifecycle.lock_timeout_param(step.lock_timeout)
                    await cur.execute(
                        self._q["set_lock_timeout"], {"lock_timeout": timeout}, prepare=False
                    )
                for stmt in step.statements:
                    await cur.execute(stmt.query, stmt.params, prepare=stmt.prepare)
                return await cur.fetchall() if cur.description else []

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of each DeltaChannel along the parent chain (one statement)."""
        result: Mapping[str, DeltaChannelHistory] = await self._drive(
            _lifecycle.delta_history(self._q, self.serde, config, channels)
        )
        return result

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """DeltaChannel-safe prune; see :meth:`PostgresSaver.prune`."""
        await self._drive(_lifecycle.prune(self._q, thread_ids, strategy))

    async def acopy_thread(
        self, source_thread_id: str, target_thread_id: str, *, overwrite: bool = False
    ) -> None:
        """Copy a whole thread; see :meth:`PostgresSaver.copy_thread`."""
        await self._drive(
            _lifecycle.copy_thread(self._q, source_thread_id, target_thread_id, overwrite=overwrite)
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete what these runs created; see :meth:`PostgresSaver.delete_for_runs`."""
        await self._drive(_lifecycle.delete_for_runs(self._q, run_ids))

    async def aretention(
        self,
        *,
        keep_last: int | None = None,
        idle_for: timedelta | None = None,
        thread_ids: Sequence[str] | None = None,
        dry_run: bool = False,
        thread_batch: int = _lifecycle.DEFAULT_THREAD_BATCH,
        batch: int = _lifecycle.DEFAULT_BATCH,
        lock_timeout: float | None = _lifecycle.DEFAULT_LOCK_TIMEOUT,
        start_after: str = "",
        progress: Callable[[Report], None] | None = None,
    ) -> Report:
        """Retention in bounded batches; see :meth:`PostgresSaver.retention`."""
        report: Report = await self._drive(
            _lifecycle.retention(
                self._q,
                keep_last=keep_last,
                idle_for=idle_for,
                thread_ids=thread_ids,
                dry_run=dry_run,
                thread_batch=thread_batch,
                batch=batch,
                lock_timeout=lock_timeout,
                start_after=start_after,
                progress=progress,
            )
        )
        return report

    # ------------------------------------------------------------------ sync bridge

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            coro.close()
            if loop is None:
                raise PgSaverError(
                    "AsyncPostgresSaver is not bound to an event loop yet: open it (or call an async "
                    "method) inside your loop before using its synchronous methods from other threads"
                )
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncPostgresSaver are only allowed from a thread other than "
                "its event loop's; inside the loop use the async methods (aget_tuple, alist, aput...)"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run_sync(self.aget_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._run_sync(collect())

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run_sync(self.aput(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._run_sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._run_sync(self.adelete_thread(thread_id))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self._run_sync(self.aget_delta_channel_history(config=config, channels=channels))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._run_sync(self.aprune(thread_ids, strategy=strategy))

    def copy_thread(
        self, source_thread_id: str, target_thread_id: str, *, overwrite: bool = False
    ) -> None:
        self._run_sync(self.acopy_thread(source_thread_id, target_thread_id, overwrite=overwrite))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._run_sync(self.adelete_for_runs(run_ids))

    def retention(
        self,
        *,
        keep_last: int | None = None,
        idle_for: timedelta | None = None,
        thread_ids: Sequence[str] | None = None,
        dry_run: bool = False,
        thread_batch: int = _lifecycle.DEFAULT_THREAD_BATCH,
        batch: int = _lifecycle.DEFAULT_BATCH,
        lock_timeout: float | None = _lifecycle.DEFAULT_LOCK_TIMEOUT,
        start_after: str = "",
        progress: Callable[[Report], None] | None = None,
    ) -> Report:
        return self._run_sync(
            self.aretention(
                keep_last=keep_last,
                idle_for=idle_for,
                thread_ids=thread_ids,
                dry_run=dry_run,
                thread_batch=thread_batch,
                batch=batch,
                lock_timeout=lock_timeout,
                start_after=start_after,
                progress=progress,
            )
        )


async def _read_applied(cur: AsyncCursor[TupleRow], q: Queries) -> dict[int, bool] | None:
    conn = cur.connection
    # inside the caller's transaction, a savepoint keeps a missing table from aborting it
    guard = (
        contextlib.nullcontext()
        if conn.info.transaction_status == _IDLE_STATUS
        else conn.transaction()
    )
    try:
        async with guard:
            await cur.execute(q["migrations_applied"], prepare=False)
            rows = await cur.fetchall()
    except _MISSING_SCHEMA:
        return None
    return _migrate.applied_from_rows(rows)


async def _fetch_rows(cur: AsyncCursor[TupleRow], returns: int) -> Any:
    if returns == ONE_ROW:
        return await cur.fetchone()
    return None if returns == NO_ROWS else await cur.fetchall()


@asynccontextmanager
async def _op_cursor(conn: AsyncConnection[Any]) -> AsyncIterator[AsyncCursor[TupleRow]]:
    """A binary tuple cursor for one saver statement, in autocommit (see autocommit_if_idle)."""
    switched = needs_autocommit_switch(conn.autocommit, conn.info.transaction_status)
    if switched:
        await conn.set_autocommit(True)
    try:
        async with conn.cursor(binary=True, row_factory=tuple_row) as cur:
            yield cur
    finally:
        if switched:
            await arestore_autocommit(conn)
