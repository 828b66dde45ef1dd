"""PostgresSaver: the synchronous checkpointer over a psycopg pool or connection."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import Connection, Cursor, errors, pq
from psycopg.rows import TupleRow, tuple_row
from psycopg_pool import ConnectionPool

from . import _core, _migrate
from ._base import DEFAULT_SCHEMA, _SaverBase, autocommit_if_idle
from ._sql import Queries

logger = logging.getLogger(__name__)

_MISSING_SCHEMA = (errors.UndefinedTable, errors.InvalidSchemaName)
_IDLE_STATUS = pq.TransactionStatus.IDLE


class PostgresSaver(_SaverBase):
    """A LangGraph checkpointer storing threads in Postgres.

    Args:
        conn: a ``psycopg_pool.ConnectionPool`` (recommended: every call checks out its own
            connection, so threads run concurrently) or a single ``psycopg.Connection`` (calls are then
            serialized on it). Either may be configured any way: autocommit or not, any row factory.
        pipe: accepted for compatibility with ``langgraph-checkpoint-postgres``; unused, because every
            operation is already a single statement.
        serde: the serializer for checkpoints, channel values and writes (LangGraph's default when None).
        schema: the Postgres schema for the tables (default ``public``); validated and quoted.
    """

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        pipe: object | None = None,
        serde: SerializerProtocol | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
    ) -> None:
        super().__init__(serde=serde, schema=schema)
        self._pool: ConnectionPool[Any] | None = None
        self._conn: Connection[Any] | None = None
        if isinstance(conn, ConnectionPool):
            self._pool = conn
        elif isinstance(conn, Connection):
            self._conn = conn
        else:
            raise TypeError(
                f"PostgresSaver needs a psycopg Connection or psycopg_pool ConnectionPool, not {type(conn).__name__}"
            )
        self._lock = threading.Lock()
        self._owns_pool = False

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
        prepare_threshold: int | None = None,
        pool_kwargs: dict[str, Any] | None = None,
        connect_kwargs: dict[str, Any] | None = None,
    ) -> PostgresSaver:
        """A saver that creates and owns a connection pool to ``conn_string``.

        Use it as a context manager (``with PostgresSaver.from_conn_string(dsn) as saver:``) or call
        :meth:`open` and :meth:`close` yourself. ``prepare_threshold=None`` (the default) never
        prepares statements, which works behind transaction-mode poolers such as PgBouncer; set an
        int to prepare on direct connections. ``pipeline`` is accepted for compatibility and unused.
        """
        kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": prepare_threshold}
        kwargs.update(connect_kwargs or {})
        pool: ConnectionPool[Any] = ConnectionPool(
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

    def open(self, *, wait: bool = True, timeout: float = 30.0) -> PostgresSaver:
        """Open the pool this saver owns (a no-op for a pool or connection you passed in)."""
        if self._owns_pool and self._pool is not None:
            self._pool.open(wait=wait, timeout=timeout)
        self._closed = False
        return self

    def close(self) -> None:
        """Close the saver; closes the pool only if ``from_conn_string`` created it."""
        self._closed = True
        if self._owns_pool and self._pool is not None:
            self._pool.close()

    def __enter__(self) -> PostgresSaver:
        if self._closed:
            self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _connection(self) -> Iterator[Connection[Any]]:
        self._check_open()
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
        else:
            assert self._conn is not None
            with self._lock:
                yield self._conn

    @contextmanager
    def _cursor(self) -> Iterator[Cursor[TupleRow]]:
        with self._connection() as conn:
            switched = autocommit_if_idle(conn)
            try:
                with conn.cursor(binary=True, row_factory=tuple_row) as cur:
                    yield cur
            finally:
                if switched:
                    conn.autocommit = False

    # ------------------------------------------------------------------ schema

    def setup(self, *, check: bool = False) -> None:
        """Create or upgrade the tables; safe to call from many workers at once.

        With ``check=True`` nothing is changed: a missing or outdated schema raises
        :class:`SchemaOutdatedError` (for runtime roles without DDL rights).
        """
        q = self._q
        with self._cursor() as cur:
            applied = _read_applied(cur, q)
            if not _migrate.pending(q.schema, applied):
                return
            if check:
                _migrate.check(q.schema, applied)
            conn = cur.connection
            with conn.transaction():
                cur.execute(q["migrations_lock"], {"key": _migrate.lock_key(q.schema)})
                row = cur.execute(q["schema_exists"], {"schema": q.schema}).fetchone()
                if not (row and row[0]):
                    cur.execute(q["schema_create"])
                cur.execute(q["migrations_bootstrap"])
                applied = [r[0] for r in cur.execute(q["migrations_applied"]).fetchall()]
                for mig in _migrate.pending(q.schema, applied):
                    logger.info(
                        "applying migration %04d_%s to schema %s", mig.version, mig.name, q.schema
                    )
                    # several statements: the simple query protocol of a text cursor
                    with conn.cursor(binary=False) as ddl:
                        ddl.execute(q.migration(mig), prepare=False)
                    cur.execute(q["migrations_record"], {"version": mig.version, "name": mig.name})

    def verify_schema(self) -> None:
        """Raise :class:`SchemaOutdatedError` / :class:`SchemaTooNewError` unless the schema is current."""
        self.setup(check=True)

    # ------------------------------------------------------------------ the base contract

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (the latest of its thread and namespace without an id)."""
        sel = _core.get_tuple_select(config)
        with self._cursor() as cur:
            row = cur.execute(self._q.select_tuples(sel.predicates), sel.params).fetchone()
        return None if row is None else _core.row_to_tuple(self.serde, row)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first; thread, namespace, metadata filter, before and limit run in SQL."""
        sel = _core.list_select(config, filter, before, limit)
        with self._cursor() as cur:
            rows = cur.execute(self._q.select_tuples(sel.predicates), sel.params).fetchall()
        # rows are fetched and the connection released before the caller iterates, so a caller
        # that calls the saver again inside its loop never waits on its own connection
        for row in rows:
            yield _core.row_to_tuple(self.serde, row)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the values of the channels in ``new_versions`` (one statement)."""
        params = _core.put_params(self.serde, config, checkpoint, metadata, new_versions)
        with self._cursor() as cur:
            cur.execute(self._q["put"], params)
        return _core.put_result(config, checkpoint)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for the checkpoint of ``config`` (one statement)."""
        params = _core.put_writes_params(self.serde, config, writes, task_id, task_path)
        if params is None:
            return
        with self._cursor() as cur:
            cur.execute(self._q["put_writes"], params)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and blob of ``thread_id``, in all namespaces."""
        tid = _core.thread_id_param(thread_id)
        with self._cursor() as cur:
            cur.execute(self._q["delete_thread"], {"thread_id": tid})


def _read_applied(cur: Cursor[TupleRow], q: Queries) -> list[int] | None:
    """Applied migration versions, or None when the migrations table does not exist yet."""
    conn = cur.connection
    try:
        if conn.info.transaction_status == _IDLE_STATUS:
            return [r[0] for r in cur.execute(q["migrations_applied"]).fetchall()]
        # inside the caller's transaction: a savepoint keeps a missing table from aborting it
        with conn.transaction():
            return [r[0] for r in cur.execute(q["migrations_applied"]).fetchall()]
    except _MISSING_SCHEMA:
        return None
