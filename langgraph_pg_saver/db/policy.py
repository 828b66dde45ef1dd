"""The driver's policy, shared by its async and sync classes: which cursor a statement runs on,
when a connection is switched to autocommit, and how large a result may stay on a kept cursor.

The classes that do the I/O are :class:`~langgraph_pg_saver.db.driver_async.AsyncDriver` (the source)
and :class:`~langgraph_pg_saver.db.driver.Driver` (generated from it by ``tools/async_to_sync.py``).
Nothing here talks to the server.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, overload

from psycopg import AsyncConnection, AsyncCursor, Connection, Cursor, pq
from psycopg.rows import TupleRow, tuple_row

from langgraph_pg_saver.db.retry import RetryPolicy
from langgraph_pg_saver.db.sql import CustomPlan, StatsPlan
from langgraph_pg_saver.errors import (
    ConcurrentUpdateError,
    ConnectionTimeoutError,
    EventLoopError,
    PrivilegeError,
    ReadOnlyError,
    SaverClosedError,
    StatementTimeoutError,
    ThreadDeletedError,
)

Row = tuple[Any, ...]
Params = Mapping[str, Any]

IDLE = pq.TransactionStatus.IDLE

#: A statement whose parameters hold more than this many bytes runs on a cursor of its own, dropped
#: afterwards; so does a read whose result is larger. A cursor keeps its last parameters and result
#: until its next statement, and a kept cursor lives as long as its connection.
KEEP_CURSOR_MAX_BYTES = 256 * 1024

_KEPT_CURSOR = "_lgps_kept_cursor"
_POOLER_CHECKED = "_lgps_pooler_checked"
_STATS = "_lgps_stats"

#: the live size, in pages, each checkpoint table (pgsaver_checkpoints, pgsaver_blobs,
#: pgsaver_writes) must have before a connection prepares their StatsPlan statements: the generic
#: plans of list() and get_tuple were on their indexes from 7 pages of pgsaver_checkpoints on
#: (after statistics of the empty tables, or of tables that size); 32 is four and a half times
#: that (docs/performance.md, "Statistics of empty tables")
TRUSTED_PAGES = 32
#: the same for the store's table: store_delete's and store_refresh's generic plans (a join with
#: an array of keys of unknown length) were on the primary key from 50 pages on, store_get's
#: from 10; 128 is two and a half times the larger
TRUSTED_STORE_PAGES = 128
#: the same for the node cache's table, after statistics of it empty: cache_get_one's generic plan
#: was on the primary key from 10 pages on, cache_get's (a join with arrays of keys) from 97
#: (it scanned at 33); 256 is two and a half times that
TRUSTED_CACHE_PAGES = 256
#: how often (seconds) a connection that found a family's tables small asks again, when it runs
#: one of that family's StatsPlan statements (one round trip, while the tables are small: a busy
#: connection pays it once per 5 s, an idle one not at all); short, so that a service started on
#: empty tables that fills them quickly (a load, a benchmark) prepares within seconds
STATS_RECHECK = 5.0


def needs_first_check(
    conn: Connection[Any] | AsyncConnection[Any], query: bytes | None = None
) -> bool:
    """Whether the driver must run the first-use check on this connection before ``query``: once
    per connection that would prepare (the pooler check, and the statistics check with it), and
    again for a StatsPlan whose family's tables were small ``STATS_RECHECK`` seconds ago or
    more.

    Behind PgBouncer in transaction mode (before 1.21, or without ``max_prepared_statements``) a
    statement prepared on one server session is later sent to another, which fails, or which holds
    another client's statement of the same name. Such a proxy answers the start-up with a cancel key
    of its own, so the process id the client was told differs from ``pg_backend_pid()``: then the
    connection stops preparing (``prepare_threshold = None``), before it prepared anything. A
    connection that takes no attribute is checked once per operation instead.
    """
    if conn.prepare_threshold is None:
        return False
    if not getattr(conn, _POOLER_CHECKED, False):
        return True
    if not isinstance(query, StatsPlan):
        return False
    found = _found(conn, query.schema)
    return found is None or (
        not found[1 + query.family] and time.monotonic() - found[0] >= STATS_RECHECK
    )


def _found(
    conn: Connection[Any] | AsyncConnection[Any], schema: str
) -> tuple[float, bool, bool, bool] | None:
    """What the connection's last statistics check of ``schema`` found (None: never checked)."""
    found: dict[str, tuple[float, bool, bool, bool]] | None = getattr(conn, _STATS, None)
    return None if found is None else found.get(schema)


def first_check_params() -> dict[str, int]:
    """The parameters of the ``first_check`` statement."""
    return {
        "pages": TRUSTED_PAGES,
        "store_pages": TRUSTED_STORE_PAGES,
        "cache_pages": TRUSTED_CACHE_PAGES,
    }


def record_stats(
    conn: Connection[Any] | AsyncConnection[Any],
    schema: str,
    checkpoints: bool,
    store: bool,
    cache: bool,
) -> None:
    """What the check found in ``schema``: whether the checkpoint tables, the store's and the
    node cache's are large enough (``TRUSTED_PAGES``, ``TRUSTED_STORE_PAGES``,
    ``TRUSTED_CACHE_PAGES``) for this connection to prepare their StatsPlan statements."""
    found: dict[str, tuple[float, bool, bool, bool]] | None = getattr(conn, _STATS, None)
    if found is None:
        found = {}
        with contextlib.suppress(AttributeError):
            setattr(conn, _STATS, found)
    found[schema] = (time.monotonic(), bool(checkpoints), bool(store), bool(cache))


def stats_trusted(conn: Connection[Any] | AsyncConnection[Any], query: bytes) -> bool:
    """Whether ``query``, a StatsPlan, may be prepared on ``conn``: its check found the family's
    tables large. Never checked (a connection in the caller's transaction from its first use, a
    connection behind a pooler): no."""
    if not isinstance(query, StatsPlan):
        return False
    found = _found(conn, query.schema)
    return found is not None and found[1 + query.family] is True


def mark_pooler_checked(conn: Connection[Any] | AsyncConnection[Any]) -> None:
    """The check ran (set only once it succeeded, so a failed check is tried again)."""
    with contextlib.suppress(AttributeError):
        setattr(conn, _POOLER_CHECKED, True)


def behind_pooler(conn: Connection[Any] | AsyncConnection[Any], server_pid: object) -> bool:
    """Given ``pg_backend_pid()``: whether the connection talks to a proxy; if so, it stops
    preparing statements."""
    if server_pid == conn.info.backend_pid:
        return False
    conn.prepare_threshold = None
    return True


def params_nbytes(params: Params) -> int:
    """The bytes of the bytea values in ``params`` (what a kept cursor would hold on to)."""
    total = 0
    for value in params.values():
        if type(value) is bytes:
            total += len(value)
        elif type(value) is list:
            total += sum(len(b) for b in value if type(b) is bytes)
    return total


def rows_nbytes(rows: Sequence[Row], column: int) -> int:
    """The bytes in one bytea column of ``rows``."""
    return sum(len(row[column]) for row in rows if row[column] is not None)


@overload
def kept_cursor(conn: Connection[Any]) -> Cursor[TupleRow]: ...
@overload
def kept_cursor(conn: AsyncConnection[Any]) -> AsyncCursor[TupleRow]: ...
def kept_cursor(
    conn: Connection[Any] | AsyncConnection[Any],
) -> Cursor[TupleRow] | AsyncCursor[TupleRow]:
    """The connection's own cursor for small statements (put, put_writes, get_tuple, delete_thread).

    Made once per connection and kept on it as an attribute: a new cursor costs a transformer and its
    empty dumper and loader caches on every call. Only the holder of the connection (one pool
    checkout) uses it. Large parameters or results never stay on it (see ``KEEP_CURSOR_MAX_BYTES``).
    """
    cur: Cursor[TupleRow] | AsyncCursor[TupleRow] | None = getattr(conn, _KEPT_CURSOR, None)
    if cur is None or cur.closed:
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        # a connection class with __slots__ gets a new cursor every time
        with contextlib.suppress(AttributeError):
            setattr(conn, _KEPT_CURSOR, cur)
    return cur


def needs_autocommit_switch(autocommit: bool, status: pq.TransactionStatus) -> bool:
    """Whether an operation must switch the connection to autocommit (and back afterwards).

    Every saver operation is either one statement, which Postgres runs atomically on its own, or
    opens its own transaction block: with autocommit a statement costs one round trip instead of
    BEGIN + statement + COMMIT. The switch is client-side only (psycopg sends nothing on an idle
    connection). A connection inside the caller's own transaction is left alone: our statements then
    join that transaction.
    """
    return not autocommit and status == IDLE


def in_pipeline(conn: Connection[Any] | AsyncConnection[Any]) -> bool:
    """Whether the caller entered ``conn.pipeline()``: results then arrive only when fetched or
    synced, so the driver wraps each operation in a nested pipeline block (synced at its end, so an
    operation's errors are raised by that operation) and always fetches rows explicitly."""
    return conn.pgconn.pipeline_status != pq.PipelineStatus.OFF


def can_restore(conn: Connection[Any] | AsyncConnection[Any]) -> bool:
    """Whether autocommit can be switched back: not on a closed or broken connection (the pool
    discards it), and a failed restore must never replace the exception already on its way."""
    return not conn.closed and conn.info.transaction_status == IDLE


class State:
    """Open or closed, shared by a driver's users: LangGraph clones savers (``with_allowlist`` in
    strict msgpack mode), and a clone must see the original being opened or closed."""

    __slots__ = (
        "active",
        "citus",
        "closed",
        "deleted",
        "functions",
        "inflight",
        "lists",
        "opened_once",
        "read_only_seen",
        "retries",
    )

    def __init__(self, closed: bool) -> None:
        self.closed = closed
        self.opened_once = False
        #: the connections operations are running on now (close cancels what is left on them)
        self.inflight: set[Any] = set()
        #: operations begun and not ended, waiting for a connection included (close waits for them)
        self.active = 0
        #: calls rerun after a transient error, since the saver was made
        self.retries = 0
        #: whether the database has the citus extension (None: not known yet): found by the
        #: first statement of the driver's first connection, setup()'s, or the first check
        self.citus: bool | None = None
        #: whether the schema has migration 0015's pgsaver_elements (None: not known yet; found
        #: with citus): without it, the statements that read no parts, and lists stored whole
        self.lists: bool | None = None
        #: whether the schema has migration 0018's pgsaver_deleted_threads (None: not known
        #: yet; found with lists): without it, deletes record nothing and writes check nothing
        self.deleted: bool | None = None
        #: whether to call the server-side functions of migrations 0006 and 0007 where nothing is
        #: prepared; False once a call found one missing or not executable (the statements then)
        self.functions = True
        #: when a write of a read (the store's TTL refresh) last found the server read-only
        #: (time.monotonic()); None: never
        self.read_only_seen: float | None = None


def function_unusable(exc: Exception) -> bool:
    """Whether ``exc`` says one of our server-side functions cannot be called: not there (a schema
    migrated by an older release) or not executable by this role."""
    text = str(exc)
    return "pgsaver_" in text and (
        getattr(exc, "sqlstate", None) == "42883"
        or (getattr(exc, "sqlstate", None) == "42501" and "function" in text)
    )


def closed_error(owner: str) -> SaverClosedError:
    return SaverClosedError(f"{owner} is closed; create or open a new one")


def check_event_loop(loop: object) -> None:
    """psycopg's async connections need a selector event loop; Windows' default, the
    ProactorEventLoop, cannot wait on sockets the way they do. Say so, and how to fix it, before
    a connection fails deep inside psycopg."""
    if any(cls.__name__ == "ProactorEventLoop" for cls in type(loop).__mro__):
        raise EventLoopError(
            "AsyncPostgresSaver cannot run on the ProactorEventLoop (Windows' default): psycopg "
            "needs a selector event loop. Before starting the loop, call "
            "asyncio.set_event_loop_policy(asyncio.WindowsSelectorEventLoopPolicy()), or pass "
            "loop_factory=asyncio.SelectorEventLoop to asyncio.run() (Python 3.12+); with uvicorn, "
            "run it with --loop asyncio on such a policy, or use the sync PostgresSaver"
        )


def describe_target(conninfo: str) -> str:
    """``host:port/dbname`` of a connection string, for errors (never the password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(conninfo)
    except Exception:
        return "the server"
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port") or "5432"
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"


def server_of(conn: Any) -> str:
    """``host:port/dbname`` of a connection (libpq's own fields: no round trip, no password)."""
    try:
        info = conn.info
        return f"{info.host}:{info.port}/{info.dbname}"
    except Exception:  # a closed connection, or one of a kind without info
        return "the server"


def target_of(pool: Any, conn: Any) -> str:
    """The server a driver talks to, as far as it knows without asking: its connection's, or its
    pool's connection string (a multi-host one names every host)."""
    if conn is not None:
        return server_of(conn)
    return describe_target(
        pool.conninfo if isinstance(getattr(pool, "conninfo", None), str) else ""
    )


#: Postgres's SQLSTATE for a write in a read-only transaction (a standby, default_transaction_read_only)
READ_ONLY = "25006"
#: how long a store that found its server read-only skips the TTL refresh of its reads before
#: trying again (a standby may be promoted meanwhile)
READ_ONLY_RECHECK = 60.0


def read_only_error(
    owner: str,
    exc: BaseException,
    fallback: str,
    operation: str = "",
    *,
    standby: bool | None = None,
) -> ReadOnlyError:
    """The ReadOnlyError for Postgres's 25006: the server the driver attached to the exception
    (``lgps_server``, set where the statement ran), else ``fallback``; ``standby``: whether the
    server said it is in recovery (None: unknown)."""
    server = getattr(exc, "lgps_server", None) or fallback
    primary = getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc).strip()
    return ReadOnlyError(owner, operation, server, flagged=False, cause=primary, standby=standby)


def timeout_error(pool: Any, waited: float, cause: BaseException) -> ConnectionTimeoutError:
    """The error for a pool that gave no connection in time: where to, how long, and the last
    connection error the pool met (from_conn_string's pools record it)."""
    target = describe_target(pool.conninfo if isinstance(pool.conninfo, str) else "")
    last = getattr(pool, "last_connect_error", None)
    why = f"; the last connection attempt failed: {last}" if last else ""
    return ConnectionTimeoutError(
        f"no connection to {target} within {waited:.1f} s (pool {pool.name!r} of up to "
        f"{pool.max_size}){why}. The pool's wait is from_conn_string's timeout= (or the pool's "
        f"own); {cause}"
    )


#: the SQLSTATE pgsaver_claim_head raises (migration 0004)
LOST_RACE = "LG001"


def prepare_flag(query: bytes, conn: Connection[Any] | AsyncConnection[Any]) -> bool | None:
    """execute()'s ``prepare``: False for a CustomPlan (planned for each call's parameters: list()
    across threads) and for a StatsPlan on a connection that did not find its tables large; else
    the connection's prepare_threshold decides."""
    kind = type(query)
    if kind is bytes:
        return None
    if kind is CustomPlan:
        return False
    return None if stats_trusted(conn, query) else False


def uses_function(query: bytes, conn: Connection[Any] | AsyncConnection[Any]) -> bool:
    """Whether a call that carries the call of our function (``Call.unprepared``) sends it rather
    than ``query``: on a connection that prepares nothing, and for a StatsPlan (get_tuple) on one
    that did not find its tables large (the function's plans stay on the indexes)."""
    return conn.prepare_threshold is None or (
        isinstance(query, StatsPlan) and not stats_trusted(conn, query)
    )


def figures(state: State, pool: Any) -> dict[str, Any]:
    """The driver's ``stats()``: its own figures, and the pool's (psycopg_pool's get_stats)."""
    out: dict[str, Any] = {
        "closed": state.closed,
        "running": len(state.inflight),
        "retries": state.retries,
    }
    if pool is not None:
        out["pool"] = dict(pool.get_stats())
    return out


def check_options(retry: object, statement_timeout: object) -> None:
    """The driver's options, checked as it is made (the saver's and store's constructors)."""
    if not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry must be a RetryPolicy, not {type(retry).__name__}")
    if statement_timeout is not None and (
        isinstance(statement_timeout, bool)
        or not isinstance(statement_timeout, (int, float))
        or statement_timeout <= 0
    ):
        raise ValueError(
            f"statement_timeout must be a positive number of seconds or None, "
            f"not {statement_timeout!r}"
        )


def statement_timeout_error(owner: str, seconds: float) -> StatementTimeoutError:
    """The error of a statement the driver's watchdog cancelled on the server."""
    return StatementTimeoutError(
        f"{owner}: the statement ran longer than statement_timeout={seconds} s and was "
        "cancelled on the server; nothing of it was stored"
    )


def server_timeout(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server's own statement_timeout (SQLSTATE 57014 with Postgres'
    message for it; the same SQLSTATE without it is a cancel, as the watchdog's). A server whose
    ``lc_messages`` is not English words the message otherwise: its timeout then stays psycopg's
    ``QueryCanceled``."""
    if getattr(exc, "sqlstate", None) != "57014":
        return False
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) or str(exc)
    return "statement timeout" in primary


def server_timeout_error(owner: str, exc: BaseException) -> StatementTimeoutError:
    """The error of a statement the server cancelled at its own ``statement_timeout`` (a role's or
    database's setting, ``ALTER ROLE ... SET statement_timeout``, or the connection's ``options``),
    which says what runs in short statements and what to do about the rest."""
    return StatementTimeoutError(
        f"{owner}: the server cancelled a statement at its statement_timeout (the setting of the "
        "role, the database or the connection: SHOW statement_timeout); nothing of it was stored. "
        "list() and get_state_history read long threads in pages; copy_thread, prune "
        "(keep_latest), retention(keep_last=...) and reencrypt work in short statements; what "
        'remains one statement (delete_thread or prune(..., strategy="delete") of a very long '
        "thread, copy_thread of one under a KeyringSerializer) needs a larger statement_timeout "
        "for the role that runs it (ALTER ROLE ... SET statement_timeout, or "
        "options='-c statement_timeout=...' in its DSN), or prune(keep_latest) first to shorten "
        "the thread"
    )


def privilege_error(
    owner: str, schema: str, exc: Exception, missing: list[tuple[str, str]]
) -> PrivilegeError:
    """A permission error that names the table and privilege the role lacks (``missing``, from
    the ``missing_privileges`` statement; Postgres names the table only)."""
    lacking = ", ".join(f"{priv} on {table}" for table, priv in missing) or "unknown"
    return PrivilegeError(
        f"{owner}: permission denied ({str(exc).strip()}); the role lacks: {lacking}. "
        f"The runtime role needs USAGE on schema {schema}, SELECT, INSERT, UPDATE "
        "and DELETE on pgsaver_checkpoints, pgsaver_blobs, pgsaver_elements and pgsaver_writes "
        "(pgsaver_store for the store, pgsaver_cache for the node cache), SELECT on "
        "pgsaver_migrations, and EXECUTE on the pgsaver_ functions, which PUBLIC has unless "
        "revoked (docs/guide.md, 'Roles without DDL rights')",
        missing,
    )


def concurrent_update_error(exc: Any) -> ConcurrentUpdateError:
    """The ConcurrentUpdateError for pgsaver_claim_head's exception (its DETAIL holds the keys)."""
    try:
        parts = [str(p) if p is not None else "" for p in json.loads(exc.diag.message_detail)]
    except (TypeError, ValueError, AttributeError):
        parts = []
    thread, ns, parent, newest, child = (parts + [""] * 5)[:5]
    message = getattr(exc.diag, "message_primary", None) or str(exc)
    return ConcurrentUpdateError(
        f"{message}; nothing of this put was stored (single_writer=True: one writer per thread)",
        thread,
        ns,
        parent or None,
        newest,
        child,
    )


#: migration 0018's pgsaver_check_deleted: writes of a thread deleted after their checkpoint
THREAD_DELETED = "LGD01"


def thread_deleted_error(exc: Any, operation: str = "put_writes") -> ThreadDeletedError:
    """The ThreadDeletedError for pgsaver_check_deleted's exception (its DETAIL is the record as
    JSON)."""
    try:
        found = json.loads(exc.diag.message_detail)
        detail = found if isinstance(found, dict) else {}
    except (TypeError, ValueError, AttributeError):
        detail = {}
    keys = ("thread_id", "checkpoint_ns", "checkpoint_id", "deleted_at")
    thread, ns, checkpoint, at = (str(detail.get(k) or "") for k in keys)
    return ThreadDeletedError(operation, thread, ns, checkpoint, at)


class Watchdog:
    """Cancels, on the server, a hot-path statement that outlives the saver's statement_timeout.

    One daemon thread for the process, started on first use. ``arm`` registers a connection and
    its deadline; ``disarm`` removes it and says whether it was cancelled. Cancelling and
    disarming share one lock, so a statement disarmed in time is never cancelled (the cancel
    itself is sent outside the lock: it connects to the server). psycopg's
    ``cancel()`` is safe from another thread, for sync and async connections alike. A timeout
    kept on the client works behind a transaction-mode pooler, where a server-side
    ``statement_timeout`` (session state) would reach other clients' sessions.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, Any] = {}
        self._fired: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, conn: Any, seconds: float) -> int:
        token = next(self._ids)
        with self._cond:
            self._armed[token] = conn
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="langgraph-pg-saver-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching; True if the statement was cancelled for its timeout."""
        with self._cond:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
        return False

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][1] not in self._armed):
                    heapq.heappop(self._heap)  # disarmed in time
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                if deadline > now:
                    self._cond.wait(deadline - now)
                    continue
                heapq.heappop(self._heap)
                conn = self._armed.pop(token)
                self._fired.add(token)
                # outside the lock: libpq's cancel connects to the server, which may take long
                # when the server is unreachable, and arm/disarm must never wait for that
                self._cond.release()
                try:
                    with contextlib.suppress(Exception):  # a connection closed meanwhile
                        conn.cancel()
                finally:
                    self._cond.acquire()


WATCHDOG = Watchdog()
