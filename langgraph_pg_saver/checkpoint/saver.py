# generated from langgraph_pg_saver/checkpoint/saver_async.py by tools/async_to_sync.py: do not edit
# (change langgraph_pg_saver/checkpoint/saver_async.py, then run `make generate`)
"""PostgresSaver: the synchronous checkpointer over a psycopg pool or connection."""

from __future__ import annotations

import builtins
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import Connection
from psycopg.errors import UndefinedFunction
from psycopg_pool import ConnectionPool

from langgraph_pg_saver import telemetry as _telemetry
from langgraph_pg_saver.checkpoint import history as _history
from langgraph_pg_saver.checkpoint import imports as _import
from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint import legacy as _legacy
from langgraph_pg_saver.checkpoint import lifecycle as _lifecycle
from langgraph_pg_saver.checkpoint import metadata as _metadata
from langgraph_pg_saver.checkpoint import reading as _reading
from langgraph_pg_saver.checkpoint import threads as _threads
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.checkpoint.base import SaverBase
from langgraph_pg_saver.checkpoint.imports import ImportReport
from langgraph_pg_saver.codec import values as _values
from langgraph_pg_saver.codec.compress import Compression
from langgraph_pg_saver.codec.elements import ListStorage
from langgraph_pg_saver.db import schema as _schema
from langgraph_pg_saver.db.driver import Driver
from langgraph_pg_saver.db.owner import PoolOwner
from langgraph_pg_saver.db.policy import function_unusable, server_timeout
from langgraph_pg_saver.db.pool import DEFAULT_PREPARE_THRESHOLD
from langgraph_pg_saver.db.retry import DEFAULT_RETRY, RetryPolicy
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA, LIST_PAGE
from langgraph_pg_saver.db.steps import Report
from langgraph_pg_saver.errors import (
    InvalidInputError,
    ParentCheckpointMissingError,
    PrivilegeError,
    StatementTimeoutError,
    ThreadDeletedError,
)

logger = logging.getLogger(__name__)


class PostgresSaver(PoolOwner, SaverBase):
    """A LangGraph checkpointer storing threads in Postgres.

    Args:
        conn: a ``psycopg_pool.ConnectionPool`` (recommended: every call checks out its own
            connection, so calls from several threads or tasks run concurrently) or a single
            ``psycopg.Connection`` (calls are then serialized on it). Either may be configured
            any way: autocommit or not, any row factory.
        pipe: accepted for compatibility with ``langgraph-checkpoint-postgres``. A connection in
            pipeline mode works with or without it: each operation runs in a nested pipeline block,
            synced when it ends, and returns what it would without a pipeline.
        serde: the serializer for checkpoints, channel values and writes (LangGraph's default when None).
        schema: the Postgres schema for the tables (default ``public``); validated and quoted.
        compression: ``"zstd"`` (default): channel values, writes and checkpoint bodies of 512
            bytes or more are stored zstd-compressed where that saves an eighth (make bench's storage:
            0.46x the official saver's, against 0.74x without); ``None``: stored as serialized. Either way both forms are read.
        read_only: the saver only reads (pointed at a hot standby or read replica): every write
            (put, put_writes, delete_thread, prune, copy_thread, retention, delete_for_runs,
            reencrypt, import_official, setup with migrations to apply) raises
            :class:`ReadOnlyError` at once, sending nothing; reads, dry runs and
            ``setup(check=True)`` work. Without it, a write the server refuses as read-only
            raises the same error.
        list_storage: ``"whole"`` (default): a channel value is stored whole at each version, as
            LangGraph serializes it. ``"elements"``: a plain list value (``messages``, any
            appended list) is stored as its elements, each once per thread, so a conversation's
            storage grows with its length rather than its square (docs/guide.md, "Lists stored as
            their elements": what it saves, what it costs, and the rolling upgrade it needs).
            Either way both forms are read.
    """

    _driver: Driver
    _noun = "saver"

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        pipe: object | None = None,
        serde: SerializerProtocol | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
        retry: RetryPolicy = DEFAULT_RETRY,
        single_writer: bool = False,
        statement_timeout: float | None = None,
        compression: Compression = "zstd",
        read_only: bool = False,
        list_storage: ListStorage = "whole",
    ) -> None:
        super().__init__(
            serde=serde,
            schema=schema,
            single_writer=single_writer,
            compression=compression,
            list_storage=list_storage,
        )
        self._driver = Driver(
            conn,
            self._queries[0],
            owner=type(self).__name__,
            retry=retry,
            statement_timeout=statement_timeout,
            read_only=read_only,
        )
        self._driver.finds_citus = True  # its statements have Citus forms (docs/scaling.md)

    @property
    def _pool(self) -> ConnectionPool[Any] | None:
        return self._driver.pool

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
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 30.0,
        single_writer: bool = False,
        statement_timeout: float | None = None,
        compression: Compression = "zstd",
        read_only: bool = False,
        list_storage: ListStorage = "whole",
    ) -> PostgresSaver:
        """A saver that creates and owns a connection pool to ``conn_string``.

        Use it as a context manager (``with PostgresSaver.from_conn_string(dsn) as
        saver:``) or call :meth:`open` and :meth:`close` yourself. Hot-path statements (put,
        put_writes, get_tuple, list, delete_thread, DeltaChannel history) become server-side prepared
        statements after ``prepare_threshold`` uses on a connection (default 5, as in psycopg), which
        saves their planning time; lifecycle and schema statements are never prepared. Behind
        PgBouncer or another pooling proxy nothing is prepared, whatever ``prepare_threshold``
        says: the driver detects one on each connection's first use. ``pipeline`` is accepted for
        compatibility and unused.

        Connections heal: a transient error (a lost connection, a restart, a serialization
        failure) reruns the call on another connection per ``retry`` (``NO_RETRY`` switches that
        off); a connection the server ended while it was idle is never used (see the driver);
        while the server is away, the pool tries to reconnect about every second, so calls
        waiting for a connection resume within about a second of it accepting again; TCP
        keepalives are on, idle connections above ``min_size`` close after 30 s (all of them:
        a burst gives its server slots back) and every connection is replaced after 30 minutes.
        ``pool_kwargs`` and ``connect_kwargs`` (and parameters in ``conn_string``) take
        precedence.

        ``single_writer``: one writer per thread; a second writer that would fork a thread
        raises ``ConcurrentUpdateError`` instead (docs/guide.md, "One writer per thread").

        ``statement_timeout``: seconds a hot-path call (put, put_writes, get_tuple, list,
        delete_thread) may run on the server before it is cancelled there and raises
        ``StatementTimeoutError`` (kept on the client: pooler-safe). None (default): no limit.

        ``compression``: ``"zstd"`` (default) or ``None``, as for the constructor.

        ``read_only``: a saver that reads from a standby, as for the constructor.

        ``list_storage``: ``"whole"`` (default) or ``"elements"``, as for the constructor.

        ``timeout``: how long a call waits for a connection (psycopg_pool's ``timeout``) before
        ``ConnectionTimeoutError``, which names the server, the wait and the last connection
        error; each connection attempt gives up after 10 s (libpq's ``connect_timeout``).
        """
        pool = cls._owned_pool(
            conn_string,
            name="langgraph-pg-saver",
            min_size=min_size,
            max_size=max_size,
            prepare_threshold=prepare_threshold,
            connect_kwargs=connect_kwargs,
            timeout=timeout,
            pool_kwargs=pool_kwargs,
        )
        return cls(
            pool,
            serde=serde,
            schema=schema,
            retry=retry,
            single_writer=single_writer,
            statement_timeout=statement_timeout,
            compression=compression,
            read_only=read_only,
            list_storage=list_storage,
        )._own_pool()

    def healthcheck(self, timeout: float = _schema.HEALTHCHECK_TIMEOUT) -> dict[str, Any]:
        """For readiness probes: one round trip, never retried, waiting at most ``timeout``
        seconds (default 2) for a connection, so it answers while the server is down. ``ok``
        (reachable and the schema current), ``reachable``, ``schema_current``, ``round_trip_ms``,
        ``error`` (why not ok) and ``stats`` (see :meth:`stats`)."""
        return _schema.healthcheck(self._driver, timeout)

    def stats(self) -> dict[str, Any]:
        """Figures for monitoring: ``closed``, ``running`` (operations in flight), ``retries``
        (calls rerun after a transient error) and ``pool`` (psycopg_pool's ``get_stats()``, for
        a pool)."""
        return self._driver.stats()

    # ------------------------------------------------------------------ schema

    def setup(self, *, check: bool = False, distribute: bool | None = None) -> None:
        """Create or upgrade the tables; safe to call from many workers at once.

        With ``check=True`` nothing is changed: a missing or outdated schema raises
        :class:`SchemaOutdatedError` (for runtime roles without DDL rights), and on a database
        with the citus extension a schema not yet distributed :class:`SchemaNotDistributedError`.

        ``distribute``: where the database has the citus extension, setup() distributes the
        checkpoint tables by ``thread_id`` (co-located), makes the migrations table a reference
        table and distributes the functions by their thread argument (``None``, the default:
        whenever citus is installed; ``True``: an error without citus; ``False``: never).
        docs/scaling.md.
        """
        _schema.migrate(self._driver, check=check, distribute=distribute)

    def verify_schema(self) -> None:
        """Raise :class:`SchemaOutdatedError` / :class:`SchemaTooNewError` unless the schema is current."""
        self.setup(check=True)

    # ------------------------------------------------------------------ the base contract

    @_telemetry.instrumented("get_tuple")
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (the latest of its thread and namespace without an id)."""
        self._driver.find_citus()  # the statements' forms for this database
        rows = self._driver.run(self._get_tuple_call(_reading.get_tuple_select(config)))
        tup = _reading.get_tuple_rows_to_tuple(self.serde, rows)
        if tup is not None:
            self._migrate_pending_sends((tup,))
        return tup

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first; thread, namespace, metadata filter, before and limit run in SQL.

        Without a limit, or with one above 250, the checkpoints are read in pages of 250 (one
        statement each, as they are iterated), so no statement reads a whole long thread (a
        role's ``statement_timeout`` applies to each)."""
        self._driver.find_citus()  # the statements' forms for this database
        sel = _reading.list_select(config, filter, before, limit, self._visible_metadata)
        # rows are fetched and the connection released before the caller iterates, so a caller
        # that calls the saver again inside its loop never waits on its own connection
        tuples: Iterable[CheckpointTuple] | None = None
        if sel.filter is None:
            if not _reading.pages(limit):
                rows = self._select("read_tuples", sel.predicates, sel.params)
                # (a thread's namespaces merged may read a few more than the limit)
                tuples = itertools.islice(_reading.read_rows_to_tuples(self.serde, rows), limit)
        else:
            tuples = self._filtered(sel, sel.filter)
        if tuples is not None:
            for tup in tuples:
                if tup.parent_config is not None and _legacy.checkpoint_format(tup.checkpoint) < 4:
                    self._migrate_pending_sends((tup,))  # decoded lazily: only such a one
                yield tup
            return
        left, after = limit, None
        while True:  # pages (_reading, "pages of a long list")
            found, after = self._page(sel, after)
            for tup in found:
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                if tup.parent_config is not None and _legacy.checkpoint_format(tup.checkpoint) < 4:
                    self._migrate_pending_sends((tup,))
                yield tup
            if after is None or left == 0:
                return

    def _page(
        self, sel: _reading.Select, after: tuple[str, str, str] | None
    ) -> tuple[Sequence[CheckpointTuple], tuple[str, str, str] | None]:
        """One page of a long list(): its checkpoints (those that match, with a filter), and
        the key to read the next page after (None when this one was the last)."""
        page = _reading.page_select(sel, after)
        plan = sel.filter
        if (plan is None or plan.exact) and self._q.citus and "thread" not in page.predicates:
            # Citus, across threads: the page's keys first, then each thread's checkpoints
            rows = self._driver.fetch_all(self._q.list_keys(page.predicates), page.params)
            read = self._read_keys([_reading.key_of(r) for r in rows])
            found: Sequence[CheckpointTuple] = [*_reading.read_rows_to_tuples(self.serde, read)]
            seen, name = len(rows), "list_keys"
            if plan is not None:
                found = [t for t in found if _metadata.matches(plan.filter, t.metadata)]
        elif plan is None or plan.exact:
            rows = self._driver.fetch_all(self._q.read_tuples(page.predicates), page.params)
            found = [*_reading.read_rows_to_tuples(self.serde, rows)]
            seen, name = len(found), "read_tuples"
            if plan is not None:
                found = [t for t in found if _metadata.matches(plan.filter, t.metadata)]
        else:
            rows = self._driver.fetch_all(self._q.list_keys(page.predicates), page.params)
            seen, name = len(rows), "list_keys"
            keys = _reading.matching_keys(self.serde, plan, rows, None)
            found = []
            if keys:
                read = self._read_keys(keys)
                found = [
                    t
                    for t in _reading.read_rows_to_tuples(self.serde, read)
                    if _metadata.matches(plan.filter, t.metadata)
                ]
        return found, (_reading.last_key(name, rows) if seen >= LIST_PAGE else None)

    def _filtered(
        self, sel: _reading.Select, plan: _metadata.FilterPlan
    ) -> Sequence[CheckpointTuple] | None:
        """list() with a metadata filter: SQL chooses candidates (a superset of the matches), each
        is checked with InMemorySaver's rule (_metadata). Candidates that fail leave a limit short:
        the selection then runs again over more of them. None when that would read more than a
        page (LIST_PAGE), or there is no limit: the caller then reads pages."""
        want = sel.params["limit"]
        fetch = _reading.first_fetch(plan, want)
        while fetch is not None and fetch <= LIST_PAGE:
            params = {**sel.params, "limit": fetch}
            found: list[CheckpointTuple] = []
            if plan.exact:  # the usual filter: candidates are matches but for rows stored lossy
                rows = self._select("read_tuples", sel.predicates, params)
                found = [*_reading.read_rows_to_tuples(self.serde, rows)]
                seen = len(found)
            else:  # check the candidates' metadata first, then read only the matches
                rows = self._select("list_keys", sel.predicates, params)
                seen = len(rows)
                keys = _reading.matching_keys(self.serde, plan, rows, want)
                if keys:
                    rows = self._read_keys(keys)
                    found = [*_reading.read_rows_to_tuples(self.serde, rows)]
            matched = [t for t in found if _metadata.matches(plan.filter, t.metadata)]
            if want is None or len(matched) >= want or seen < fetch:
                return matched[:want]
            fetch *= 4
        return None

    def _select(
        self, name: str, predicates: tuple[str, ...], params: dict[str, Any]
    ) -> Sequence[Any]:
        """The rows of ``read_tuples`` or ``list_keys`` (``name``). Across threads with a limit, a
        walk of the newest checkpoints comes first (``*_recent``, prepared); when fewer than the
        limit of them pass, every match if there are fewer than 5,000 (``*_capped``); only when
        there are more (or none) does the statement over the whole table run, planned for this
        filter (docs/design.md, section 10)."""
        if name == "read_tuples" and self._q.citus and "thread" not in predicates:
            # Citus, across threads: the keys first (fanned out to the shards, merged by the
            # coordinator), then each thread's checkpoints on its worker
            keys = self._select("list_keys", predicates, params)
            return self._read_keys([_reading.key_of(r) for r in keys])
        limit = params["limit"]
        if limit is not None:
            recent = self._q.recent(name, predicates, limit)
            if recent is not None:
                rows = self._driver.fetch_all(recent, params)
                if _reading.checkpoints_in(name, rows) >= limit:
                    return rows
            capped = self._q.capped(name, predicates)
            if capped is not None:
                rows = self._driver.fetch_all(capped, params)
                if rows:  # at least one checkpoint, and every match was counted
                    return rows
        if name == "read_tuples":
            return self._driver.fetch_all(self._q.read_tuples(predicates, limit), params)
        return self._driver.fetch_all(self._q.list_keys(predicates), params)

    def _read_keys(self, keys: Sequence[tuple[str, str, str]]) -> Sequence[Any]:
        """read_tuples_keys' rows for checkpoints given by key: one statement; on Citus one per
        thread (each on its worker), merged as one statement's rows."""
        if not self._q.citus:
            return self._driver.fetch_all(self._q["read_tuples_keys"], _reading.keys_params(keys))
        parts = [
            self._driver.fetch_all(self._q["read_tuples_keys"], params)
            for params in _reading.keys_by_thread(keys)
        ]
        return _reading.merged_rows(parts)

    def _migrate_pending_sends(self, tuples: Sequence[CheckpointTuple]) -> None:
        """Checkpoints of format < 4 read their Send packets from their parent's writes (one more
        statement, only when such a checkpoint was read)."""
        params = _legacy.pending_sends_params(tuples)
        if params is not None:
            rows = self._driver.fetch_all(self._q["pending_sends"], params)
            _legacy.migrate_pending_sends(self.serde, tuples, rows)

    @_telemetry.instrumented("put")
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the values of the channels in ``new_versions`` (one statement)."""
        self._driver.refuse_write("put")
        self._driver.find_citus()  # the statements' forms for this database
        put = _writing.put_params(
            self.serde,
            config,
            checkpoint,
            metadata,
            new_versions,
            compress=self._compression is not None,
            elements=self._stores_elements,
        )
        stored = self._driver.run(self._put_call(put, metadata))
        if stored is None or stored[0] is False:
            # the parent is not stored: a second statement, on this rare path only
            orphan = self._driver.run(self._put_orphan_call(put, metadata))
            if orphan is None:
                p = put.params
                at = None
                if self._q.deleted:
                    # whether the thread was deleted after the parent was stored (migration 0018)
                    at = self._driver.drive(_lifecycle.refuse_checkpoint(self._q, p))
                if at is not None:
                    self._drop_late_subgraphs(p["thread_id"])
                    raise ThreadDeletedError(
                        "put",
                        p["thread_id"],
                        p["checkpoint_ns"],
                        p["parent_checkpoint_id"],
                        _lifecycle.deleted_time(at),
                    )
                raise ParentCheckpointMissingError(
                    p["thread_id"], p["checkpoint_ns"], p["parent_checkpoint_id"]
                )
        status = put.params["status"]
        if status is not None and self._q.citus and self._claims(metadata):
            # on Citus a guarded put runs as a statement, which cannot keep the status row
            # (_put_status__citus): the call that does, delegated to the thread's worker
            self._driver.run(self._status_mark_call(put.params, status))
        _telemetry.written("put", 1 + len(new_versions), put.params)
        return _writing.put_result(put.params)

    def _drop_late_subgraphs(self, thread_id: str) -> None:
        """After a refusal: what the late run's subgraphs stored since the delete, deleted in a
        transaction of its own (``lifecycle.drop_late_subgraphs``). Best effort: the refusal is
        what the caller gets, and the run's next refusal tries again. Nothing where the caller's
        transaction or pipeline holds the connection (a failure would end theirs)."""
        if not self._driver.statement_fails_alone():
            return
        try:
            self._driver.drive(_lifecycle.drop_late_subgraphs(self._q, thread_id))
        except Exception as exc:  # the ThreadDeletedError under way matters more
            logger.warning(
                "thread %s: the late run's subgraph rows were not deleted: %s", thread_id, exc
            )

    @_telemetry.instrumented("put_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for the checkpoint of ``config`` (one statement)."""
        self._driver.refuse_write("put_writes")
        self._driver.find_citus()  # the statements' forms for this database
        built = _writing.put_writes_params(
            self.serde, config, writes, task_id, task_path, compress=self._compression is not None
        )
        if built is None:
            return
        try:
            self._driver.run(self._put_writes_call(built))
        except ThreadDeletedError:
            self._drop_late_subgraphs(built.params["thread_id"])
            raise
        mark = _writing.writes_status(built.params["checkpoint_ns"], writes)
        if mark is not None:
            # an interrupt or an error at a root checkpoint: the thread's status row says so
            self._driver.run(self._status_mark_call(built.params, mark))
        _telemetry.written("put_writes", len(writes), getattr(built, "params", None))

    @_telemetry.instrumented("delete_thread")
    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and blob of ``thread_id``, in all namespaces.

        Returns None, as LangGraph's ``delete_thread`` does: an unknown ``thread_id`` is a silent
        no-op. ``prune([thread_id], strategy="delete")`` does the same under the thread's lock and
        returns a :class:`Report` whose ``missing`` names an id that held no checkpoint.
        """
        self._driver.find_citus()  # the statements' forms for this database
        self._driver.refuse_write("delete_thread")
        tid = _keys.thread_id_param(thread_id)
        try:
            self._driver.run(self._delete_thread_call(tid))
        except StatementTimeoutError as exc:
            # the server's statement_timeout cut the one statement short (a very long thread):
            # the same delete in short statements, in one transaction (the saver's own
            # statement_timeout, a bound the caller set for this call, is not worked around)
            if not server_timeout(exc.__cause__) or self._driver.in_caller_transaction():
                raise
            self._driver.drive(_lifecycle.delete_thread(self._q, tid))

    @_telemetry.instrumented("search_threads")
    def search_threads(
        self,
        *,
        status: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ns: str | None = None,
        idle_for: timedelta | None = None,
        active_within: timedelta | None = None,
        limit: int = 50,
        after: str | None = None,
        sizes: bool = True,
    ) -> builtins.list[_threads.ThreadInfo]:
        """Threads newest first, by status and search: ``status`` "idle", "pending" (nodes
        scheduled, not finished: a run in progress, or stopped by a breakpoint, a crash or a
        cancel), "interrupted" (waiting on an interrupt: ``ThreadInfo.interrupts`` holds their
        values) or "error" (a task of the last superstep raised: ``ThreadInfo.errors``), or any
        (None); ``metadata``: the newest root checkpoint's metadata holds these items (as
        ``list(filter=...)`` matches them); ``ns``: the thread has checkpoints in this namespace
        or one below it (``"research"`` for ``"research:<task id>"``); ``idle_for`` /
        ``active_within``: its newest root checkpoint is older / newer than that.

        Pages of ``limit``: pass the last thread's ``cursor`` as ``after`` for the next. Threads
        of a status come newest first by when they took it; the others by their newest root
        checkpoint. ``sizes``: each thread's checkpoints and bytes (rows of all four tables, parts
        of lists stored as their elements included; reading them costs in proportion to the threads' rows). docs/guide.md, "Threads by
        status", says what each status can tell and what it costs a put."""
        found = _threads.search(
            status=status,
            metadata=metadata,
            ns=ns,
            idle_for=idle_for,
            active_within=active_within,
            limit=limit,
            after=after,
            sizes=sizes,
        )
        self._driver.find_citus()  # the statements' forms for this database
        query = {
            "threads_by_status": self._q["threads_by_status"],
            "threads_recent": self._q["threads_recent"],
            "threads_walk": self._q["threads_walk"],
        }[found.query]
        out: builtins.list[_threads.ThreadInfo] = []
        params = found.params
        while True:
            rows = self._driver.fetch_all(query, params)
            got, last = _threads.page(self.serde, found, rows)
            out.extend(got)
            if len(out) >= found.limit or last is None:
                break
            # a metadata filter checked in Python left the page short: the next rows
            after_id, after_thread = _threads.decode_cursor(last)
            params = {**params, "after_id": after_id, "after_thread": after_thread}
        out = out[: found.limit]
        if not out:
            return out
        wanted = _threads.status_params(out)
        writes = self._driver.fetch_all(self._q["thread_status_writes"], wanted) if wanted else []
        sized = None
        if found.sizes:
            ids = {"thread_ids": [t.thread_id for t in out]}
            sized = self._driver.fetch_all(self._q["thread_sizes"], ids)
        return _threads.with_details(self.serde, out, writes, sized)

    # ------------------------------------------------------------------ DeltaChannel history and lifecycle

    @_telemetry.instrumented("get_delta_channel_history")
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed of each DeltaChannel along the parent chain of ``config``'s checkpoint.

        One statement for all channels (a recursive walk in Postgres), with the semantics of the base
        class: parent-chain ancestors only, the target's own writes excluded, per channel up to the
        nearest ancestor storing a value (its writes included), writes oldest first.
        """
        self._driver.find_citus()  # the statements' forms for this database
        driver = self._driver
        functions = driver.state.functions
        try:
            result: Mapping[str, DeltaChannelHistory] = driver.drive(
                _history.delta_history(self._q, self.serde, config, channels, functions)
            )
        except (UndefinedFunction, PrivilegeError) as exc:
            # a schema older than migration 0011, or a role that may not execute the function
            # (the driver's PrivilegeError, from psycopg's): the statement instead, as put and
            # get_tuple do; not inside the caller's transaction, which the failure aborted
            cause = exc if isinstance(exc, UndefinedFunction) else exc.__cause__
            if not functions or not isinstance(cause, Exception) or not function_unusable(cause):
                raise
            driver._functions_unusable(cause)
            if driver.in_caller_transaction():
                raise  # the next call, in a transaction not aborted, sends the statement
            result = driver.drive(
                _history.delta_history(self._q, self.serde, config, channels, False)
            )
        return result

    @_telemetry.instrumented("prune")
    def prune(  # type: ignore[override]  # returns a Report (None upstream)
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", dry_run: bool = False
    ) -> Report:
        """Prune threads. ``keep_latest`` keeps the newest checkpoint of every namespace (with its
        writes) plus every ancestor its DeltaChannels need; ``delete`` removes the threads.

        Runs in bounded batches, one short transaction each; returns what was removed (with
        ``dry_run``, what would be, removing nothing). An id that holds no checkpoint is no error:
        the report names it in ``missing`` (sorted). See :meth:`retention` for keeping the last
        N and deleting idle threads.
        """
        self._driver.find_citus()  # the statements' forms for this database
        if not dry_run:
            self._driver.refuse_write("prune")
        report: Report = self._driver.drive(
            _lifecycle.prune(self._q, thread_ids, strategy, dry_run=dry_run)
        )
        return report

    @_telemetry.instrumented("copy_thread")
    def copy_thread(  # type: ignore[override]  # returns a Report (None upstream)
        self, source_thread_id: str, target_thread_id: str, *, overwrite: bool = False
    ) -> Report:
        """Copy every checkpoint, write and blob of every namespace, keeping ids and order.

        A target that already has checkpoints raises :class:`ThreadNotEmptyError` (nothing is copied)
        unless ``overwrite=True``, which replaces it in the same transaction. A source that holds no
        checkpoint is no error: nothing is copied, the target is left as it is (``overwrite`` or
        not), and the report names the source in ``missing``. Returns what was copied.
        """
        self._driver.find_citus()  # the statements' forms for this database
        self._driver.refuse_write("copy_thread")
        report: Report = self._driver.drive(
            _lifecycle.copy_thread(
                self._q, source_thread_id, target_thread_id, overwrite=overwrite, serde=self.serde
            )
        )
        return report

    @_telemetry.instrumented("reencrypt")
    def reencrypt(
        self,
        thread_id: str | None = None,
        *,
        batch: int = _lifecycle.DEFAULT_BATCH,
        full: bool = False,
        dry_run: bool = False,
        progress: Callable[[Report], None] | None = None,
    ) -> Report:
        """Seal every stored value of ``thread_id`` (or of every thread) again with the
        KeyringSerializer's current key: after adding a key (rotation), or to encrypt what was
        stored before the serializer was used (``strict=False``; its metadata then keeps only the
        ``plaintext_metadata`` keys in clear).

        Works ``batch`` rows per short transaction (the rows are locked meanwhile; the agents keep
        running). Interrupted, it resumes by being run again: values already under the current key
        are skipped. ``full=True`` seals everything again, current key or not: after a key was
        added to ``plaintext_metadata``, so that older checkpoints get it in clear too (filters on
        it in SQL miss them until then). Run it once every process writes with the new key. Returns what was sealed again (checkpoints, writes, blobs, threads whose
        checkpoints changed). A value that fails to open stops it with the error naming the value.
        ``dry_run`` counts what would be sealed again and changes nothing. A ``thread_id`` that
        holds no checkpoint is no error: nothing is done and the report names it in ``missing``.
        """
        self._driver.find_citus()  # the statements' forms for this database
        crypt = _values.sealer(self.serde)
        if crypt is None:
            raise InvalidInputError(
                "reencrypt needs the saver's serde to be a KeyringSerializer, not "
                f"{type(self.serde).__name__}"
            )
        if not dry_run:
            self._driver.refuse_write("reencrypt")
        report: Report = self._driver.drive(
            _lifecycle.reencrypt(
                self._q,
                crypt,
                thread_id=thread_id,
                batch=batch,
                full=full,
                dry_run=dry_run,
                progress=progress,
            )
        )
        return report

    @_telemetry.instrumented("import_official")
    def import_official(
        self,
        *,
        source_schema: str = DEFAULT_SCHEMA,
        thread_batch: int = _lifecycle.DEFAULT_THREAD_BATCH,
        dry_run: bool = False,
        start_after: str = "",
        progress: Callable[[Report], None] | None = None,
        reimport: Sequence[str] = (),
    ) -> ImportReport:
        """Copy the threads of ``langgraph-checkpoint-postgres`` (its tables ``checkpoints``,
        ``checkpoint_blobs`` and ``checkpoint_writes`` in ``source_schema`` of this database)
        into this saver: every namespace, pending writes, inline values, old-format checkpoints,
        each checkpoint's ``ts`` as its ``created_at`` (so idle retention sees its age).

        Threads go in id order, ``thread_batch`` per transaction; an interrupted import resumes by
        running again (or from ``start_after=report.last_thread_id``). What was imported is
        recorded, so running it again copies only what is new in the source since (checkpoints
        that extend what was imported, and the pending writes added at the newest one), never a
        checkpoint imported before and pruned or deleted here since: a thread deleted here stays
        deleted, and one written here since the import is left as it is and listed in
        ``diverged`` when the source has something new for it. ``reimport``: thread ids to import
        again whole, as if never imported (what is here stays; what is missing comes back).
        ``dry_run`` counts what it would copy and writes nothing. The saver's ``serde`` must read
        what the official saver wrote (its default serializer does).
        ``langgraph-pg-saver import-official --verify`` also compares every imported checkpoint
        held here with what the official saver reads.
        """
        self._driver.find_citus()  # the statements' forms for this database
        if not dry_run:
            self._driver.refuse_write("import_official")
        report: ImportReport = self._driver.drive(
            _import.import_official(
                self._q,
                self.serde,
                source_schema=source_schema,
                thread_batch=thread_batch,
                dry_run=dry_run,
                start_after=start_after,
                progress=progress,
                reimport=reimport,
            )
        )
        return report

    @_telemetry.instrumented("delete_for_runs")
    def delete_for_runs(  # type: ignore[override]  # returns a Report (None upstream)
        self, run_ids: Sequence[str], *, dry_run: bool = False
    ) -> Report:
        """Delete every row these runs wrote, in one transaction: their checkpoints, their writes
        wherever they sit (a durability="exit" run's DeltaChannel writes on the checkpoint it
        started from, a resume's writes on the interrupted checkpoint), and the values only those
        checkpoints referenced; returns what was deleted, and in ``missing`` the run ids that
        matched nothing (not an error). ``dry_run``: what would go, deleting nothing.

        A run is known by the run id of the config of its calls: ``metadata["run_id"]``,
        ``configurable["run_id"]``, or the config's own ``run_id`` (``graph.invoke(x, {"run_id":
        ...})``, which LangGraph gives the root graph only). Refuses, deleting nothing (and so does
        a dry run), with :class:`DeltaDependencyError` when a surviving checkpoint rebuilds a
        DeltaChannel from a checkpoint or writes of these runs, and with
        :class:`EntangledRunError` when some of their rows cannot be told from another run's.
        """
        self._driver.find_citus()  # the statements' forms for this database
        if not dry_run:
            self._driver.refuse_write("delete_for_runs")
        report: Report = self._driver.drive(
            _lifecycle.delete_for_runs(self._q, run_ids, dry_run=dry_run)
        )
        return report

    @_telemetry.instrumented("retention")
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
        keep_deleted: timedelta | None = _lifecycle.DEFAULT_KEEP_DELETED,
    ) -> Report:
        """Bound table growth: delete threads idle longer than ``idle_for`` and keep only the newest
        ``keep_last`` checkpoints of each namespace of the others (plus DeltaChannel ancestry).

        Works through threads in id order (all, or ``thread_ids``), ``thread_batch`` at a time, deleting
        at most ``batch`` checkpoints per short transaction with ``lock_timeout`` seconds to get its
        locks. ``dry_run`` reports what would go (threads, checkpoints, writes, blobs, bytes) and deletes
        nothing. An interrupted run resumes with ``start_after=report.last_thread_id``. Of the
        ``thread_ids`` given (after ``start_after``), those that hold no checkpoint when the job
        starts are no error: they are left alone and named in the report's ``missing``.
        Last (not in a dry run), the records of deletes older than ``keep_deleted`` are forgotten:
        a run still going when its thread was deleted is refused while the record is kept
        (``ThreadDeletedError``; None keeps the records).
        """
        self._driver.find_citus()  # the statements' forms for this database
        if not dry_run:
            self._driver.refuse_write("retention")
        report: Report = self._driver.drive(
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
                keep_deleted=keep_deleted,
            )
        )
        return report
