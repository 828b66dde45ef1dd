# generated from langgraph_pg_saver/db/driver_async.py by tools/async_to_sync.py: do not edit
# (change langgraph_pg_saver/db/driver_async.py, then run `make generate`)
"""Driver: how a sync saver (or store) runs its statements on a psycopg pool or connection.

The source is the async driver; the policy both share is in ``db/policy.py``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import Connection, Cursor, errors
from psycopg.rows import TupleRow, tuple_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from langgraph_pg_saver import telemetry as _telemetry
from langgraph_pg_saver.db import steps as _steps
from langgraph_pg_saver.db.call import ALL, NOTHING, ONE, Call
from langgraph_pg_saver.db.policy import (
    IDLE,
    KEEP_CURSOR_MAX_BYTES,
    LOST_RACE,
    READ_ONLY,
    THREAD_DELETED,
    WATCHDOG,
    Params,
    Row,
    State,
    behind_pooler,
    can_restore,
    check_options,
    closed_error,
    concurrent_update_error,
    figures,
    first_check_params,
    function_unusable,
    in_pipeline,
    kept_cursor,
    mark_pooler_checked,
    needs_autocommit_switch,
    needs_first_check,
    params_nbytes,
    prepare_flag,
    privilege_error,
    read_only_error,
    record_stats,
    rows_nbytes,
    server_of,
    server_timeout,
    server_timeout_error,
    statement_timeout_error,
    target_of,
    thread_deleted_error,
    timeout_error,
    uses_function,
)
from langgraph_pg_saver.db.retry import (
    DEFAULT_RETRY,
    RetryPolicy,
    duplicate_key,
    is_transient,
    lost_connection,
    remote_failure,
    socket_readable,
)
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.errors import (
    PgSaverError,
    PrivilegeError,
    ReadOnlyError,
    SaverClosedError,
)

# isort: off
import threading

_sleep = time.sleep
# isort: on

logger = logging.getLogger(__name__)

#: how long close() waits for running operations before it cancels them, by default
CLOSE_TIMEOUT = 5.0
#: how long a pool whose opening timed out is given to stop its connection attempts
OPEN_FAILED_CLOSE = 1.0
#: a rerun whose call's wait is spent still gets this long to find an idle connection
_RERUN_MIN_WAIT = 0.1
#: the longest pause between the reruns of a call that failed on another server the database
#: uses (a Citus worker down: retry.remote_failure), so it goes on within about this long of it
#: accepting again
REMOTE_RETRY_PAUSE = 1.0
#: and the shortest (a policy without delays does not spin against the coordinator)
REMOTE_RETRY_MIN_PAUSE = 0.05
#: how long the question after a refused write (is the server a standby?) waits for a connection:
#: the error it adds to is already there, so it never waits the pool's whole timeout
_IN_RECOVERY_WAIT = 2.0
_monotonic = time.monotonic


class Driver:
    """Connections, cursors and statements for one saver and its clones.

    Args:
        conn: a pool (each operation checks out its own connection) or one connection (operations
            are serialized on it), configured any way.
        q: the SQL of the saver's schema.
        owner: the saver's class name, for error messages.
        retry: how an operation that a transient error interrupted is rerun (``retry.py``).
        read_only: the saver or store only reads (a standby): :meth:`refuse_write` raises
            ReadOnlyError before a write sends anything.
    """

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        q: Queries,
        *,
        owner: str,
        retry: RetryPolicy = DEFAULT_RETRY,
        statement_timeout: float | None = None,
        read_only: bool = False,
    ) -> None:
        check_options(retry, statement_timeout)
        if not isinstance(read_only, bool):
            raise TypeError(f"read_only must be True or False, not {read_only!r}")
        self.read_only = read_only
        self.q = q
        #: whether the driver finds out if the database has citus (State.citus) at its first
        #: connection: the savers' statements have Citus forms (the store's have none)
        self.finds_citus = False
        self.owner = owner
        self.retry = retry
        self.statement_timeout = statement_timeout
        self.pool: ConnectionPool[Any] | None = None
        self.conn: Connection[Any] | None = None
        if isinstance(conn, ConnectionPool):
            self.pool = conn
            _telemetry.watch_pool(self)
        elif isinstance(conn, Connection):
            self.conn = conn
        else:
            raise TypeError(
                f"{owner} needs a psycopg Connection or psycopg_pool ConnectionPool, "
                f"not {type(conn).__name__}"
            )
        self.owns_pool = False
        self.state = State(closed=False)
        self._lock = threading.Lock()

    def own_pool(self) -> None:
        """The pool was made for the saver (from_conn_string): :meth:`open` and :meth:`close` open
        and close it, and the driver is closed until :meth:`open`."""
        if self.pool is None:  # pragma: no cover - from_conn_string always passes a pool
            raise TypeError("own_pool() needs a pool")
        self.owns_pool = True
        self.state.closed = True

    @property
    def closed(self) -> bool:
        return self.state.closed

    def check_open(self) -> None:
        if self.state.closed:
            raise closed_error(self.owner)

    def server(self) -> str:
        """``host:port/dbname`` of the server, as far as known without a round trip."""
        return target_of(self.pool, self.conn)

    def refuse_write(self, operation: str) -> None:
        """Raise ReadOnlyError if the saver or store was made with ``read_only=True``: a write
        is refused before it sends anything (``operation`` names it)."""
        if self.read_only:
            raise ReadOnlyError(self.owner, operation, self.server(), flagged=True)

    # ------------------------------------------------------------------ lifecycle

    def open(self, *, wait: bool, timeout: float | None) -> None:
        """Open the pool made for the saver (a pool or connection of the caller's is left alone),
        waiting up to ``timeout`` seconds (None: the pool's own wait, from_conn_string's
        ``timeout=``) for its first connections. When they do not come, the pool is closed again
        (nothing keeps trying in the background) and ConnectionTimeoutError names the server and
        the last connection error."""
        if self.owns_pool and self.pool is not None:
            if self.pool.closed and self.state.opened_once:
                raise SaverClosedError(
                    "this saver's pool was closed; create a new saver to reconnect"
                )
            self.state.opened_once = True
            pool = self.pool
            wait_for = pool.timeout if timeout is None else timeout
            started = _monotonic()
            try:
                pool.open(wait=wait, timeout=wait_for)
            except PoolTimeout as exc:
                error = timeout_error(pool, _monotonic() - started, exc)
                with contextlib.suppress(Exception):
                    pool.close(timeout=OPEN_FAILED_CLOSE)
                raise error from exc
        self.state.closed = False

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Refuse new operations; wait up to ``timeout`` seconds (None: as long as it takes) for
        the ones running, then cancel what is left on the server and wait for it to end, so that
        nothing of this saver commits after close returns; close the pool only if it was made
        for the saver."""
        state = self.state
        state.closed = True
        if state.active:
            started = _monotonic()
            while state.active and (timeout is None or _monotonic() - started < timeout):
                _sleep(0.005)
            for conn in list(state.inflight):
                if conn in state.inflight:  # still ours: not handed to someone else meanwhile
                    with contextlib.suppress(Exception):
                        conn.cancel_safe(timeout=2.0)
            cancelled = _monotonic()
            while state.active and _monotonic() - cancelled < 10.0:
                _sleep(0.005)
        if self.owns_pool and self.pool is not None:
            self.pool.close()

    # ------------------------------------------------------------------ connections and cursors

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Connection[Any]]:
        """A connection for one operation: checked out of the pool (waiting at most ``timeout``
        seconds; None: the pool's own wait), or the caller's under the lock."""
        self.check_open()
        state = self.state
        state.active += 1
        try:
            if self.pool is not None:
                # getconn/putconn rather than pool.connection(), whose exit commits or rolls
                # back: the driver's statements run in autocommit or in transaction blocks of
                # their own
                conn = self._getconn(self.pool, timeout)
                state.inflight.add(conn)
                try:
                    yield conn
                except errors.ReadOnlySqlTransaction as exc:
                    exc.lgps_server = server_of(conn)  # type: ignore[attr-defined]
                    raise
                finally:
                    state.inflight.discard(conn)
                    self.pool.putconn(conn)
            else:
                assert self.conn is not None
                with self._lock:
                    self.check_open()  # closed while this call waited for the connection
                    state.inflight.add(self.conn)
                    try:
                        yield self.conn
                    except errors.ReadOnlySqlTransaction as exc:
                        exc.lgps_server = server_of(self.conn)  # type: ignore[attr-defined]
                        raise
                    finally:
                        state.inflight.discard(self.conn)
        finally:
            state.active -= 1

    def _getconn(self, pool: ConnectionPool[Any], timeout: float | None = None) -> Connection[Any]:
        """A connection of the pool, never one the server has ended while it sat idle.

        An idle connection has nothing to read unless its server wrote to it, which it does when
        it ends the session (a killed backend, a shutdown): then the socket is readable. Looking
        costs a system call, not a round trip; only such a connection gets psycopg_pool's check
        (one round trip), and a dead one goes back to the pool, which replaces it. (The pool's
        own ``check`` option waits a second, then longer, after each failed check.)
        """
        conn: Connection[Any]
        for _ in range(pool.max_size + 1):
            conn = self._getconn_unchecked(pool, timeout)
            if not socket_readable(conn):
                return conn
            try:
                ConnectionPool.check_connection(conn)
            except Exception:
                pool.putconn(conn)  # broken: the pool discards and replaces it
                continue
            except BaseException:  # cancelled meanwhile: the connection goes back all the same
                pool.putconn(conn)
                raise
            return conn
        conn = self._getconn_unchecked(pool, timeout)
        return conn

    def _getconn_unchecked(
        self, pool: ConnectionPool[Any], timeout: float | None = None
    ) -> Connection[Any]:
        started = _monotonic()
        try:
            conn: Connection[Any] = pool.getconn(timeout)
        except PoolClosed as exc:
            if self.state.closed:
                raise closed_error(self.owner) from exc
            raise
        except PoolTimeout as exc:
            raise timeout_error(pool, _monotonic() - started, exc) from exc
        if self.state.closed:  # closed while this call waited: it never starts a statement
            pool.putconn(conn)
            raise closed_error(self.owner)
        _telemetry.pool_waited(_monotonic() - started)
        return conn

    @contextmanager
    def cursor(
        self, timeout: float | None = None, query: bytes | None = None
    ) -> Iterator[Cursor[TupleRow]]:
        """A binary tuple cursor for one operation, on a connection in autocommit unless it is
        inside a transaction of the caller's (the statements then join it); ``timeout`` as for
        :meth:`connection`; ``query``: the statement it will run (a StatsPlan may need the
        statistics check first)."""
        with self.connection(timeout) as conn, self.cursor_on(conn, query) as cur:
            yield cur

    @contextmanager
    def cursor_on(
        self, conn: Connection[Any], query: bytes | None = None
    ) -> Iterator[Cursor[TupleRow]]:
        """:meth:`cursor` on a connection already checked out."""
        if in_pipeline(conn):
            # the caller's pipeline: a nested block, synced when the operation ends
            with conn.pipeline(), conn.cursor(binary=True, row_factory=tuple_row) as cur:
                if self.finds_citus and self.state.citus is None:
                    # the statements' forms, before the first renders (a catalog read)
                    self._find_citus(conn)
                if self.state.citus:
                    conn.prepare_threshold = None
                yield cur
            return
        switched = needs_autocommit_switch(conn.autocommit, conn.info.transaction_status)
        if switched:
            conn.set_autocommit(True)
        try:
            if conn.info.transaction_status == IDLE and needs_first_check(conn, query):
                self._check_pooler(conn)
            if self.finds_citus and self.state.citus is None:
                # a catalog read, harmless inside the caller's transaction too
                self._find_citus(conn)
            if self.state.citus:
                conn.prepare_threshold = None
            with conn.cursor(binary=True, row_factory=tuple_row) as cur:
                yield cur
        finally:
            if switched and can_restore(conn):
                try:
                    # no network I/O on an idle connection
                    conn.set_autocommit(False)
                except Exception:  # pragma: no cover - defensive
                    logger.debug("could not restore autocommit=False", exc_info=True)

    def _check_pooler(self, conn: Connection[Any]) -> None:
        """Stop preparing statements on a connection that talks to a pooling proxy (see
        ``policy.needs_first_check``), and find out whether the tables are large enough for the
        StatsPlan statements to be prepared (``policy.needs_first_check``): one round trip, once
        per connection, and again at most every ``STATS_RECHECK`` seconds while they are small."""
        with conn.cursor(binary=True, row_factory=tuple_row) as cur:
            cur.execute(self.q["first_check"], first_check_params(), prepare=False)
            row = cur.fetchone()
        if row is not None:
            record_stats(conn, self.q.schema, row[1], row[2], row[5])
        mark_pooler_checked(conn)
        if row is not None:
            self.state.citus = bool(row[3])
            self.state.lists = bool(row[4])
            self.state.deleted = bool(row[6])
        if self.state.citus:
            # Citus: the calls of our functions, which it delegates to the thread's worker, and
            # nothing prepared (docs/scaling.md)
            conn.prepare_threshold = None
            return
        if row is not None and behind_pooler(conn, row[0]):
            logger.info(
                "%s: a pooling proxy (PgBouncer or the like) is between this connection and "
                "Postgres: its statements are not prepared (prepare_threshold=None)",
                self.owner,
            )

    def _find_citus(self, conn: Connection[Any]) -> None:
        """Whether the database has the citus extension (``State.citus``): once per driver, on
        its first connection that the first check did not ask (one that prepares nothing)."""
        with conn.cursor(binary=True, row_factory=tuple_row) as cur:
            cur.execute(self.q["citus_installed"], prepare=False)
            row = cur.fetchone()
        self.state.citus = bool(row and row[0])
        self.state.lists = bool(row and row[1])
        self.state.deleted = bool(row and row[2])

    def find_citus(self) -> bool:
        """``State.citus``, asked of the server if not known yet (a statement rendered before
        any connection was made: the savers' lists and lifecycle jobs ask first)."""
        if self.finds_citus and self.state.citus is None:
            with self.connection() as conn, self.cursor_on(conn):
                pass
        return self.state.citus is True

    def in_caller_transaction(self) -> bool:
        """Whether the caller's single connection is inside a transaction of the caller's (or
        one a failed statement aborted): the driver's statements join it, so no step of its own
        can start (no I/O)."""
        return self.conn is not None and self.conn.info.transaction_status != IDLE

    def statement_fails_alone(self) -> bool:
        """Whether a statement the driver runs now is a transaction of its own, so that its
        failure rolls back nothing else and its ``set_config(..., true)`` ends with it: a pooled
        connection, or the caller's single one neither inside a transaction of the caller's nor
        in the caller's pipeline (whose statements up to the next sync share one implicit
        transaction). No I/O."""
        conn = self.conn
        return conn is None or (conn.info.transaction_status == IDLE and not in_pipeline(conn))

    # ------------------------------------------------------------------ one statement

    def execute(self, query: bytes, params: Params) -> None:
        """Run one statement for its effect."""
        self.run(Call(query, params))

    def fetch_one(self, query: bytes, params: Params) -> Row | None:
        """Run one statement and return its first row (None without one)."""
        row: Row | None = self.run(Call(query, params, ONE))
        return row

    def fetch_all(self, query: bytes, params: Params) -> list[Row]:
        """Run one statement and return all its rows."""
        rows: list[Row] = self.run(Call(query, params, ALL))
        return rows

    def run(self, call: Call) -> Any:
        """Run ``call`` (the form this connection takes: see :class:`Call`) and return what its
        ``returns`` asks for; rerun per the retry policy after a transient error (see
        :meth:`_rerun_wait` for how long the reruns wait for a connection)."""
        retry = 0
        wait: float | None = None
        deadline = 0.0
        while True:
            try:
                return self._run_once(call, wait)
            except Exception as exc:
                retry += 1
                if retry == 1:
                    deadline = self._rerun_deadline()
                self._retry_or_raise(exc, retry, deadline)
                wait = self._rerun_wait(deadline)

    def _rerun_deadline(self) -> float:
        """When the reruns of a call that just failed stop waiting for a connection: the pool's
        wait (from_conn_string's ``timeout=``) from now."""
        timeout = self.pool.timeout if self.pool is not None else 0.0
        return _monotonic() + timeout

    @staticmethod
    def _rerun_wait(deadline: float) -> float:
        """How long a rerun may wait for a connection. The reruns of one call share one wait: a
        call whose statement was lost with its server (a restart, a failover) waits for the
        server through its reruns for up to ``timeout`` seconds from the failure, however many
        of the retry policy's attempts the outage spends, rather than ``timeout`` per attempt;
        the policy's attempts bound the statements that fail, its pauses (about 0.75 s in all by
        default) are spent inside the same wait."""
        return max(_RERUN_MIN_WAIT, deadline - _monotonic())

    def _retry_or_raise(self, exc: Exception, retry: int, deadline: float) -> None:
        """Return to rerun the operation that failed with ``exc`` (see :meth:`_may_retry`);
        otherwise raise: ``exc``, or the error of ours that says what it means."""
        if self._may_retry(exc, retry, deadline):
            return
        if self.state.closed and not isinstance(exc, PgSaverError):
            # cancelled by close(), or its pool closed under it
            raise closed_error(self.owner) from exc
        if isinstance(exc, errors.InsufficientPrivilege):
            raise self._privilege_error(exc) from exc
        if isinstance(exc, errors.QueryCanceled) and server_timeout(exc):
            raise server_timeout_error(self.owner, exc) from exc
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate == LOST_RACE:
            raise concurrent_update_error(exc) from exc
        if sqlstate == THREAD_DELETED:
            raise thread_deleted_error(exc) from exc
        if sqlstate == READ_ONLY:
            raise read_only_error(
                self.owner, exc, self.server(), standby=self._in_recovery()
            ) from exc
        raise exc

    def _in_recovery(self) -> bool | None:
        """After a write refused as read-only: whether the server is a standby (None: unknown).
        One round trip, on this rare path only, waiting at most ``_IN_RECOVERY_WAIT`` for a
        connection."""
        try:
            with self.cursor(_IN_RECOVERY_WAIT) as cur:
                cur.execute(self.q["in_recovery"], prepare=False)
                row = cur.fetchone()
        except Exception:  # the error to raise is the read-only one
            logger.debug("could not ask whether the server is a standby", exc_info=True)
            return None
        return None if row is None else bool(row[0])

    def _privilege_error(self, exc: errors.InsufficientPrivilege) -> PrivilegeError:
        """Name the table and the privilege the role lacks (Postgres names the table only)."""
        missing: list[tuple[str, str]] = []
        try:
            with self.cursor() as cur:
                cur.execute(self.q["missing_privileges"], {"schema": self.q.schema}, prepare=False)
                missing = [(str(r[0]), str(r[1])) for r in cur.fetchall()]
        except Exception:  # the error to raise is the permission error
            logger.debug("could not list the missing privileges", exc_info=True)
        return privilege_error(self.owner, self.q.schema, exc, missing)

    def _may_retry(self, exc: Exception, retry: int, deadline: float | None = None) -> bool:
        """Whether to rerun an idempotent operation that failed with ``exc`` (retry number
        ``retry``), after waiting its turn: only on a pool, while open, for a transient error,
        up to the policy's attempts; a failure the server reports about another server (a Citus
        worker: ``retry.remote_failure``) until ``deadline`` too, pausing at most
        ``REMOTE_RETRY_PAUSE`` between tries, so the call goes on within about that long of the
        worker accepting again, as a call waiting for its own server does."""
        if (
            self.pool is None
            or self.state.closed
            or not is_transient(exc)
            or getattr(exc, "lgps_commit_unknown", False)
        ):
            return False
        pause = self.retry.delay(retry)
        # a policy of no retries (attempts=1) is kept for these too: errors at once
        remote = deadline is not None and self.retry.attempts > 1 and remote_failure(exc)
        left = deadline - _monotonic() if remote and deadline is not None else 0.0
        if retry >= self.retry.attempts and left <= 0:
            return False
        if remote and left > 0:
            pause = max(REMOTE_RETRY_MIN_PAUSE, min(pause, REMOTE_RETRY_PAUSE, left))
        logger.warning(
            "%s: retrying after %s: %s (retry %d of %s)",
            self.owner,
            type(exc).__name__,
            str(exc).strip().splitlines()[0] if str(exc).strip() else "",
            retry,
            "the call's timeout" if remote else self.retry.attempts - 1,
        )
        if lost_connection(exc):
            # the pool's other idle connections went with it, most likely (a restart, a
            # failover): drop the dead ones now rather than fail on each in turn
            with contextlib.suppress(Exception):
                self.pool.check()
        _sleep(pause)
        self.state.retries += 1
        _telemetry.retried(exc)
        return not self.state.closed

    def _run_once(self, call: Call, wait: float | None = None) -> Any:
        if self.statement_timeout is None:
            return self._run_unwatched(call, wait)
        if call.upsert is not None:
            # the upsert directly: a second statement after a conflict would be watched as well,
            # but costs a round trip the timeout's users did not ask for
            call = call._replace(query=call.upsert)
        fired = False
        try:
            with self.connection(wait) as conn:
                token = WATCHDOG.arm(conn, self.statement_timeout)
                try:
                    with self.cursor_on(conn, call.query) as cur:
                        self._send(cur, conn, call)
                        return _fetch(cur, call.returns)
                finally:
                    fired = WATCHDOG.disarm(token)
        except errors.QueryCanceled as exc:
            if fired:
                raise statement_timeout_error(self.owner, self.statement_timeout) from exc
            raise

    def _send(self, cur: Cursor[Any], conn: Connection[Any], call: Call) -> None:
        """Execute the call's statement on a connection in autocommit, its upsert after a unique
        violation; on one that prepares nothing (or for a StatsPlan, on one that found the
        tables small: ``policy.uses_function``), its ``unprepared`` form (a call of our
        server-side function) instead, while the functions are usable: a schema without them
        (migrated by an older release) or a role that may not execute them gets the statement,
        and the saver stops calling them."""
        unprepared = call.unprepared
        if (
            unprepared is not None
            and uses_function(call.query, conn)
            and conn.autocommit
            and self.state.functions
        ):
            try:
                cur.execute(unprepared[0], unprepared[1](call.params))
                return
            except (errors.UniqueViolation, errors.InternalError_) as exc:
                if call.upsert is None or not duplicate_key(exc):
                    raise
                cur.execute(call.upsert, call.params)
                return
            except (errors.UndefinedFunction, errors.InsufficientPrivilege) as exc:
                if not function_unusable(exc):
                    raise
                self._functions_unusable(exc)
        query, upsert = call.query, call.upsert
        if call.plain is not None and not self.state.functions:
            query, upsert = call.plain
        try:
            cur.execute(query, call.params, prepare=prepare_flag(query, conn))
        except (errors.UniqueViolation, errors.InternalError_) as exc:
            if upsert is None or not duplicate_key(exc):
                raise
            cur.execute(upsert, call.params)
        except (errors.UndefinedFunction, errors.InsufficientPrivilege) as exc:
            if call.plain is None or query is call.plain[0] or not function_unusable(exc):
                raise
            self._functions_unusable(exc)
            self._send(cur, conn, call)

    def _direct(self, cur: Cursor[TupleRow], call: Call) -> Any:
        """The call on a connection that is not in autocommit, or not pooled: a failed statement
        would abort the transaction it is in, so the upsert (if any) runs directly. Where our
        functions cannot be called, the statements that need none; a call that finds so out
        runs again only outside a transaction (nothing of the caller's was aborted)."""
        query = call.query
        if call.plain is not None and not self.state.functions:
            query = call.plain[0]
            statement = call.plain[1] or query
        else:
            statement = call.upsert or query
        try:
            cur.execute(statement, call.params, prepare=prepare_flag(query, cur.connection))
        except (errors.UndefinedFunction, errors.InsufficientPrivilege) as exc:
            if call.plain is None or not self.state.functions or not function_unusable(exc):
                raise
            self._functions_unusable(exc)
            if cur.connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raise
            return self._direct(cur, call)
        return _fetch(cur, call.returns)

    def _functions_unusable(self, exc: Exception) -> None:
        """Our server-side functions cannot be called here: say so once; the calls of this saver
        and its clones send the statements that need none from now on."""
        self.state.functions = False
        logger.warning(
            "%s: cannot call the server-side functions of migrations 0006, 0007, 0011 and 0014 (%s); "
            "sending the statements instead, whose plans may fall to a sequential scan after "
            "statistics of empty tables. Run setup() with the migration role to add them, or "
            "GRANT EXECUTE on them",
            self.owner,
            str(exc).strip(),
        )

    def _run_unwatched(self, call: Call, wait: float | None = None) -> Any:
        # The hot path: getconn, a cursor, execute, fetch, putconn, without generator context
        # managers, and on a connection already in autocommit (what from_conn_string makes) without
        # looking at its transaction status.
        pool = self.pool
        returns = call.returns
        if pool is None or self.state.closed or (returns == ALL and call.size_column is None):
            with self.cursor(wait, call.query) as cur:
                return self._direct(cur, call)
        state = self.state
        state.active += 1
        try:
            conn = self._getconn(pool, wait)
        except BaseException:
            state.active -= 1
            raise
        inflight = state.inflight
        inflight.add(conn)
        try:
            if not conn.autocommit:
                with self.cursor_on(conn, call.query) as cur:
                    return self._direct(cur, call)
            if needs_first_check(conn, call.query):
                self._check_pooler(conn)
            kept = params_nbytes(call.params) <= KEEP_CURSOR_MAX_BYTES
            cur = kept_cursor(conn) if kept else conn.cursor(binary=True, row_factory=tuple_row)
            self._send(cur, conn, call)
            result = _fetch(cur, returns)
            size_column = call.size_column
            if not kept or (
                size_column is not None and rows_nbytes(result, size_column) > KEEP_CURSOR_MAX_BYTES
            ):
                # the next call on this connection makes a new kept cursor
                cur.close()
            return result
        except errors.ReadOnlySqlTransaction as exc:
            exc.lgps_server = server_of(conn)  # type: ignore[attr-defined]
            raise
        finally:
            inflight.discard(conn)
            try:
                pool.putconn(conn)
            finally:
                state.active -= 1

    # ------------------------------------------------------------------ lifecycle steps

    def drive(self, steps: _steps.Steps) -> Any:
        """Run a step generator of ``_lifecycle``: each step on one connection, in one transaction;
        the rows of its last statement go back into the generator."""
        try:
            step = next(steps)
            while True:
                step = steps.send(self.run_step(step))
        except StopIteration as done:
            return done.value

    def run_step(self, step: _steps.Step) -> list[Row]:
        """One step in its own transaction; rerun as a whole after a transient error (its
        transaction rolled back)."""
        retry = 0
        wait: float | None = None
        deadline = 0.0
        while True:
            try:
                return self._run_step_once(step, wait)
            except Exception as exc:
                retry += 1
                if retry == 1:
                    deadline = self._rerun_deadline()
                self._retry_or_raise(exc, retry, deadline)
                wait = self._rerun_wait(deadline)

    def _run_step_once(self, step: _steps.Step, wait: float | None = None) -> list[Row]:
        with self.cursor(wait, _steps.first_query(step)) as cur:
            conn = cur.connection
            if not step.transactional:
                stmt = step.statements[0]
                cur.execute(stmt.query, stmt.params, prepare=_steps.prepare(stmt, conn))
                return _rows(cur)
            own = cur.connection.info.transaction_status == IDLE
            committing = False
            try:
                with cur.connection.transaction():
                    # a transaction-local setting; never set inside a transaction of the caller's
                    if step.lock_timeout is not None and own:
                        timeout = _steps.lock_timeout_param(step.lock_timeout)
                        cur.execute(
                            self.q["set_lock_timeout"], {"lock_timeout": timeout}, prepare=False
                        )
                    part: _steps.Step | None = step
                    while part is not None:
                        for stmt in part.statements:
                            cur.execute(stmt.query, stmt.params, prepare=_steps.prepare(stmt, conn))
                        rows = _rows(cur)
                        part = part.then(rows) if part.then is not None else None
                    committing = True
            except Exception as exc:
                if committing:
                    # lost during COMMIT: the step may have committed, and a rerun would not
                    # find what it did (a copy_thread would see its target in use)
                    with contextlib.suppress(AttributeError):
                        exc.lgps_commit_unknown = True  # type: ignore[attr-defined]
                raise
            return rows

    # ------------------------------------------------------------------ figures

    def stats(self) -> dict[str, Any]:
        """The pool's figures (psycopg_pool's get_stats) and the saver's own."""
        return figures(self.state, self.pool)


def _rows(cur: Cursor[TupleRow]) -> list[Row]:
    """All rows of the last statement, [] for one without rows. In pipeline mode the result has not
    arrived when execute returns (description is None): fetchall fetches it first."""
    if cur.description is None and not in_pipeline(cur.connection):
        return []
    try:
        return cur.fetchall()
    except psycopg.ProgrammingError:
        if cur.description is None:  # fetched now: a statement without rows
            return []
        raise


def _fetch(cur: Cursor[TupleRow], returns: int) -> Any:
    if returns == ONE:
        return cur.fetchone()
    return None if returns == NOTHING else cur.fetchall()
