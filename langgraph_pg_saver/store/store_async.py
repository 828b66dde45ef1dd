"""AsyncPostgresStore: LangGraph's BaseStore (long-term memory across threads) on Postgres.

The source of both stores: the sync one is generated from this module by
``tools/async_to_sync.py``. The rules (what is stored, what a filter selects) are in ``_store``,
the batch plan in ``_store_base``; statements run through the savers' driver (pool or connection,
retries after transient errors, close).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import ListNamespacesOp, Op, Result, SearchOp, TTLConfig
from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool

import langgraph_pg_saver.store.rules as _store
from langgraph_pg_saver import telemetry as _telemetry
from langgraph_pg_saver.db import schema_async as _schema
from langgraph_pg_saver.db import steps as _steps
from langgraph_pg_saver.db.driver_async import CLOSE_TIMEOUT, AsyncDriver
from langgraph_pg_saver.db.owner_async import AsyncPoolOwner
from langgraph_pg_saver.db.policy import READ_ONLY_RECHECK, Row
from langgraph_pg_saver.db.pool import DEFAULT_PREPARE_THRESHOLD
from langgraph_pg_saver.db.retry import DEFAULT_RETRY, RetryPolicy
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA
from langgraph_pg_saver.errors import (
    PgSaverError,
    PrivilegeError,
    ReadOnlyError,
    SchemaError,
)
from langgraph_pg_saver.store.base import SEARCH_PAGE, AsyncStoreBase, BatchPlan
from langgraph_pg_saver.store.rows import (
    HashRow,
    ImportRow,
    ItemRow,
    NearestRow,
    NearRow,
    PrefixRow,
    SourceRow,
    SweepRow,
    WriteRow,
)

# isort: off
# [async-only]
import asyncio

from langgraph_pg_saver.store.backlog import Backlog
# [/async-only]
# isort: on

logger = logging.getLogger(__name__)
_monotonic = time.monotonic

#: expired items the TTL sweep deletes per statement (and transaction)
SWEEP_BATCH = 10_000
#: how long the TTL sweep's fast path (store_sweep: no row locks first) may wait for a row another
#: transaction holds before it gives the batch up to store_sweep_skip_locked; well below
#: deadlock_timeout (1 s by default), so a writer waiting for a row the sweep deleted waits at
#: most about that long too
SWEEP_LOCK_TIMEOUT = "50ms"
#: store_write's tries for a batch of a store with an index before it is written in a transaction
#: that locks its items first (other writers changed them in each try's instant between its
#: snapshot and its locks)
WRITE_TRIES = 4


class _StaleVectors(Exception):
    """A field's stored vector changed between reading its hash and writing (rolls back)."""


def _check_vectors(rows: list[Any]) -> None:
    """store_vector_put's count of unchanged fields whose vector is not of their text any more."""
    if rows and int(rows[0][0]):
        raise _StaleVectors


#: pgvector's default hnsw.ef_search: the most rows an HNSW index scan returns unless told more
DEFAULT_EF_SEARCH = 40
#: the fewest vectors a semantic search reads from the ANN index
MIN_CANDIDATES = 40
#: the least hnsw.ef_search of a semantic search (ivfflat.probes: a tenth of it): pgvector's
#: default; more candidates than that raise it (up to MAX_EF_SEARCH)
EF_SEARCH = 40
#: a semantic search with a prefix or filter scans exactly whenever it matches at most this many
#: items (more when the store is larger: ANN_TUPLES)
PROBE_ITEMS = 500
#: what a vector read by the ANN index's iterative scan costs, in items of the exact scan
#: (measured on 10,000 and 100,000 items of 64 dimensions, 2 cores, load from other work): the
#: index reads about cand * items / matches vectors to find cand of the matches, so the exact
#: scan is chosen while matches^2 < cand * ANN_TUPLES * items
ANN_TUPLES = 8
#: the same with ``iterative_scan`` off, where the index reads its first ``ef_search``
#: candidates whatever the matches: the exact scan is chosen while matches < ef * FIRST_TUPLES
#: (on 100,000 items of 64 dimensions the index's 40 candidates, joined to their items for a
#: filter, cost about what the exact scan of 70 to 140 matches does, their count included)
FIRST_TUPLES = 4
#: with ``iterative_scan`` off, the index's first candidates are at least this many per vector
#: asked for (50 for 10 items, where pgvector's default is 40: the official store's recall or
#: more, at less than its time in every shape of ``make bench``)
FIRST_CANDIDATES = 5
#: pgvector's largest hnsw.ef_search
MAX_EF_SEARCH = 1000
_NO_PGVECTOR = (
    "semantic search (index=...) needs the pgvector extension, which this Postgres server does "
    "not have: install pgvector (https://github.com/pgvector/pgvector; Debian/Ubuntu: "
    "postgresql-<version>-pgvector), or use the store without index="
)


def _pgvector_at_least(rows: Any, version: tuple[int, int]) -> bool:
    """Whether store_pgvector_version's row names that version or a newer one."""
    parts = str(rows[0][0] if rows else "0").split(".")
    return tuple(int(p) for p in parts[:2] if p.isdigit()) >= version


class AsyncPostgresStore(AsyncPoolOwner, AsyncStoreBase):
    """A LangGraph store (``BaseStore``) keeping items in Postgres, in the tables of this
    package's schema (``pgsaver_store``).

    Args:
        conn: a ``psycopg_pool.AsyncConnectionPool`` (recommended: no instance lock, every
            operation checks out its own connection) or a single ``psycopg.AsyncConnection``.
        pipe: accepted for compatibility with ``langgraph-checkpoint-postgres``; unused.
        deserializer: as for the official store, called only on a value the connection did not
            load into a dict (a jsonb loader of its own returning the raw JSON), with what the
            connection returned; psycopg's own loader makes dicts, which are returned as read.
        index: semantic search (needs pgvector; :meth:`setup` makes the vectors table and its
            index): ``dims``, ``embed``, ``fields`` (a path or a list of paths, default the
            whole value), ``distance_type`` and ``ann_index_config`` (``kind``,
            ``vector_type``, ``m``, ``ef_construction``, ``lists``/``nlist``, and the search
            options ``ef_search`` and ``probes``), as the official store takes them. Without it
            a search's ``query`` is ignored.
        ttl: ``TTLConfig``: ``default_ttl`` (minutes; 0 expires at once), ``refresh_on_read``
            (default True), ``omit_expired`` (default False: an expired item is returned until
            a sweep deletes it) and ``sweep_interval_minutes`` for :meth:`start_ttl_sweeper`.
        schema: the Postgres schema of the tables (default ``public``).
        read_only: the store only reads (pointed at a hot standby or read replica): reads skip
            the TTL refresh (``refresh_on_read``), and puts, deletes, ``sweep_ttl``,
            ``start_ttl_sweeper`` and the import raise :class:`ReadOnlyError` at once, sending
            nothing. Without it, reads on a read-only server still work (the refresh the server
            refuses is skipped, and tried again a minute later) and its writes raise the same
            error.
    """

    _driver: AsyncDriver
    _noun = "store"

    def __init__(
        self,
        conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        pipe: object | None = None,
        deserializer: Any = None,
        index: Any = None,
        ttl: TTLConfig | None = None,
        schema: str = DEFAULT_SCHEMA,
        retry: RetryPolicy = DEFAULT_RETRY,
        read_only: bool = False,
    ) -> None:
        super().__init__(schema=schema, index=index, ttl=ttl, deserializer=deserializer)
        self._driver = AsyncDriver(
            conn, self._q, owner=type(self).__name__, retry=retry, read_only=read_only
        )
        self._sweeper: Any = None
        self._iterative: bool | None = None
        #: whether the schema has the search function (None: not known yet)
        self._nearest: bool | None = None
        #: whether the schema has the write function (None: not known yet)
        self._writer: bool | None = None
        # [async-only]
        try:  # made inside the loop (as the official store must be): bound to it at once
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        self._backlog = Backlog(self._run_batch, self._slots)
        # [/async-only]

    # [async-only]
    def _slots(self) -> int:
        """How many calls run at once before the rest wait in the backlog: the pool's size."""
        pool = self._driver.pool
        return pool.max_size if pool is not None else 1

    # [/async-only]
    @property
    def conn(self) -> AsyncConnection[Any] | AsyncConnectionPool[Any]:
        """The pool or connection the store was given, or the pool ``from_conn_string`` made."""
        driver = self._driver
        target = driver.pool if driver.pool is not None else driver.conn
        assert target is not None
        return target

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pipeline: bool = False,
        pool_config: dict[str, Any] | None = None,
        index: Any = None,
        ttl: TTLConfig | None = None,
        schema: str = DEFAULT_SCHEMA,
        prepare_threshold: int | None = DEFAULT_PREPARE_THRESHOLD,
        connect_kwargs: dict[str, Any] | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 30.0,
        read_only: bool = False,
    ) -> AsyncPostgresStore:
        """A store that creates and owns a connection pool to ``conn_string``; use it as a
        context manager (``async with AsyncPostgresStore.from_conn_string(dsn) as store:``).

        ``pool_config``: ``min_size`` (1), ``max_size`` (10) and ``kwargs`` (connection
        arguments), as for the official store; a pool is made either way. The other options are
        the savers' (docs/guide.md, "Connections and options")."""
        config = dict(pool_config or {})
        pool = cls._owned_pool(
            conn_string,
            name="langgraph-pg-saver-store",
            min_size=int(config.get("min_size", 1)),
            max_size=int(config.get("max_size", 10)),
            prepare_threshold=prepare_threshold,
            connect_kwargs={**(config.get("kwargs") or {}), **(connect_kwargs or {})},
            timeout=timeout,
        )
        return cls(
            pool, index=index, ttl=ttl, schema=schema, retry=retry, read_only=read_only
        )._own_pool()

    async def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Stop the TTL sweeper and close the store (its pool, if ``from_conn_string`` made it);
        calls still running get ``timeout`` seconds, then are cancelled."""
        await self.stop_ttl_sweeper(timeout=timeout)
        await super().close(timeout)

    # [async-only]
    def _bind_loop(self) -> None:
        self.loop = asyncio.get_running_loop()

    # [/async-only]

    async def setup(self, *, check: bool = False, distribute: bool | None = None) -> None:
        """Create or upgrade the tables (the savers' migrations, which include the store's);
        safe from many workers at once. ``check=True`` changes nothing and raises
        ``SchemaOutdatedError`` if the schema is not current. With an ``index``, also the
        pgvector extension, the vectors table of its dimension and its ANN index.
        ``distribute``: as the savers' ``setup()`` takes it (on Citus, the checkpoint tables
        are distributed; the store's own stay on the coordinator: docs/scaling.md)."""
        # [async-only]
        self.loop = asyncio.get_running_loop()
        # [/async-only]
        await _schema.migrate(self._driver, check=check, distribute=distribute)
        spec = self.index_spec
        if spec is None:
            return
        rows = await self._driver.run_step(
            _steps.Step((_steps.Stmt(self._q["store_vector_column"], {"schema": self._q.schema}),))
        )
        have = rows[0][0] if rows else None
        want = f"{spec.vector_type}({spec.dims})"
        if have is not None and have != want:
            raise SchemaError(
                f"the store's vectors in schema {self._q.schema!r} are {have}; this store's index "
                f"asks for {want}. Drop {self._q.schema}.pgsaver_store_vectors to embed again "
                "with the new index (items are kept), or use the index it was made with"
            )
        if check or self._driver.read_only:
            if have is None:
                self._driver.refuse_write("setup")
                raise SchemaError(
                    f"the store's vectors table does not exist in schema {self._q.schema!r}: run "
                    "setup() once with this index (a role that may create tables)"
                )
            if check:
                for what, name in (
                    ("search", _store.nearest_function(spec)),
                    ("write", _store.write_function(spec)),
                ):
                    row = await self._driver.fetch_one(
                        self._q["store_function"], {"schema": self._q.schema, "name": name}
                    )
                    if not row or not int(row[0]):
                        raise SchemaError(
                            f"the store's {what} function {name} does not exist in schema "
                            f"{self._q.schema!r} (its vectors table predates it): run setup() "
                            "once with this index"
                        )
            return
        schema_sql = self._q.schema_sql
        statements = [
            _steps.Stmt(self._q["store_setup_lock"], {"schema": self._q.schema}),
            _steps.Stmt(self._q["store_vector_extension"], None),
        ]
        statements += [
            _steps.Stmt(text.encode(), None) for text in _store.index_ddl(schema_sql, spec)
        ]
        zero = _store.zero_index_ddl(schema_sql, spec)
        if zero is not None:
            statements.append(_steps.Stmt(zero.encode(), None))
        statements.append(_steps.Stmt(_store.value_index_ddl(schema_sql).encode(), None))
        statements.append(_steps.Stmt(_store.write_ddl(schema_sql, spec).encode(), None))
        statements.append(_steps.Stmt(self._q["store_pgvector_version"], None))

        def function(rows: _steps.Rows) -> _steps.Step:
            # iterative scans (and their settings in the function's SET clauses): pgvector 0.8+
            iterative = _pgvector_at_least(rows, (0, 8))
            ddl = _store.nearest_ddl(schema_sql, spec, iterative)
            old = _store.nearest_old_ddl(schema_sql, spec)
            return _steps.Step((_steps.Stmt(ddl.encode(), None), _steps.Stmt(old.encode(), None)))

        try:
            await self._driver.run_step(
                _steps.Step(tuple(statements), lock_timeout=30.0, then=function)
            )
            self._nearest = None
            self._writer = None
        except ReadOnlyError:
            if have == want:
                return  # a standby whose vectors are as this index asks: nothing to change
            raise
        except errors.FeatureNotSupported as exc:
            raise PgSaverError(_NO_PGVECTOR + f" ({str(exc).strip()})") from exc
        except errors.UndefinedFile as exc:
            raise PgSaverError(_NO_PGVECTOR + f" ({str(exc).strip()})") from exc
        except PrivilegeError as exc:
            # the driver names a table privilege; here it is the extension that may not be made
            cause = exc.__cause__
            if not isinstance(cause, errors.InsufficientPrivilege) or "extension" not in str(cause):
                raise
            raise PgSaverError(
                "setup(): creating the pgvector extension needs a role allowed to (a superuser, "
                "or the database owner with pgvector trusted): run CREATE EXTENSION vector once "
                f"as such a role ({str(cause).strip()})"
            ) from cause

    # ------------------------------------------------------------------ batches

    @_telemetry.instrumented("store.batch")
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations: reads first (they see the store as it was before the batch's
        writes), then every put and delete of the batch in one transaction. On the async
        store, calls beyond the pool's connections wait in the store and run merged
        (``store/backlog.py``)."""
        # [async-only]
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        return await self._backlog.call(list(ops), self._plan)
        # [/async-only]
        # [sync-only]
        # return self._run_batch(list(ops))
        # [/sync-only]

    async def _run_batch(self, ops: list[Op]) -> list[Result]:
        """One batch, on one connection: what ``abatch`` runs."""
        listed, plan = self._plan(ops)
        if plan.puts and self._driver.read_only:
            deleting = all(v is None for v in plan.puts.values())
            self._driver.refuse_write("delete" if deleting else "put")
        results: list[Result] = [None] * len(listed)
        q = self._q
        refresh: list[tuple[str, str]] = []
        at_prefix, at_key, at_ttl = ItemRow.PREFIX, ItemRow.KEY, ItemRow.TTL_MINUTES
        for prefix, wanted in plan.gets.items():
            keys = sorted({key for _, key, _ in wanted})
            rows = await self._driver.fetch_all(
                q["store_get"],
                {"prefix": prefix, "keys": keys, "omit_expired": self._omit_expired},
            )
            found = {row[at_key]: row for row in rows}
            for i, key, refreshing in wanted:
                row = found.get(key)
                results[i] = None if row is None else self._item(row)
                if row is not None and refreshing and row[at_ttl] is not None:
                    refresh.append((prefix, key))
        # without an index a query is ignored, as by InMemoryStore and the official store
        semantic = self.embeddings is not None and self.index_spec is not None
        queries = sorted({op.query for _, op, _, _, _ in plan.searches if op.query and semantic})
        vectors: dict[str, str] = {}
        if queries:
            assert self.embeddings is not None
            assert self.index_spec is not None
            for text in queries:
                embedded = await self.embeddings.aembed_query(text)
                vectors[text] = _store.vector_text(
                    embedded, self.index_spec.dims, f"the query {text!r}"
                )
        for i, op, under, flt, refreshing in plan.searches:
            if op.query and semantic:
                rows = await self._semantic(op, under, flt, vectors[op.query])
            else:
                rows = await self._search(op, under, flt)
            results[i] = [self._item(row, search=True) for row in rows]
            if refreshing:
                refresh.extend(
                    (row[at_prefix], row[at_key]) for row in rows if row[at_ttl] is not None
                )
        for i, listing in plan.lists:
            results[i] = await self._list_namespaces(listing)
        if refresh:
            await self._refresh_ttls(refresh)
        await self._write(plan)
        return results

    async def _refresh_ttls(self, refresh: list[tuple[str, str]]) -> None:
        """Extend the TTLs of the items a batch read (``refresh_on_read``). Not on a store made
        with ``read_only=True``; on a server that refuses it as read-only (a standby), the read
        stands and the refresh is skipped for ``READ_ONLY_RECHECK`` seconds, then tried again (a
        standby may have been promoted meanwhile): no round trip is added on a primary. Inside a
        transaction of the caller's (its own connection), the refusal aborted that transaction,
        so it is raised, as any write's."""
        driver = self._driver
        if driver.read_only:
            return
        state = driver.state
        seen = state.read_only_seen
        if seen is not None and _monotonic() - seen < READ_ONLY_RECHECK:
            return
        try:
            await driver.execute(
                self._q["store_refresh"],
                {
                    "prefixes": [p for p, _ in refresh],
                    "keys": [k for _, k in refresh],
                    "omit_expired": self._omit_expired,
                },
            )
        except ReadOnlyError as exc:
            if driver.in_caller_transaction():
                # the caller's transaction (a read-only one, or on a standby): the refused
                # UPDATE aborted it, and the caller must know; the server may well be writable
                raise
            if state.read_only_seen is None:
                logger.warning(
                    "%s: %s is read-only: reads do not refresh TTLs here (pass read_only=True "
                    "to a store that reads from a standby)",
                    driver.owner,
                    exc.server,
                )
            state.read_only_seen = _monotonic()
            return
        state.read_only_seen = None

    async def _search(self, op: SearchOp, prefix: str | None, flt: _store.FilterPlan) -> list[Any]:
        q = self._q
        params: dict[str, Any] = {
            "prefix": prefix,
            "below": None if prefix is None else _store.below(prefix),
            "filter": flt.prefilter,
            "filters": flt.alternatives,
            "omit_expired": self._omit_expired,
        }
        at_exact = ItemRow.VALUE_EXACT
        if flt.exact and not op.offset:
            rows = await self._driver.fetch_all(
                q["store_search"], {**params, "limit": op.limit, "offset": 0}
            )
            if all(row[at_exact] is None for row in rows):  # plain rows: the prefilter was exact
                return rows
        elif flt.exact:
            # the rows before the offset are read too: a lossy one the check drops moves it
            rows = await self._driver.fetch_all(
                q["store_search"], {**params, "limit": op.offset + op.limit, "offset": 0}
            )
            if all(row[at_exact] is None for row in rows):
                return rows[op.offset :]
        # candidates checked one page at a time, then offset and limit applied here
        wanted = op.offset + op.limit
        matched: list[Any] = []
        start = 0
        page = max(SEARCH_PAGE, 2 * wanted)
        while len(matched) < wanted:
            rows = await self._driver.fetch_all(
                q["store_search"], {**params, "limit": page, "offset": start}
            )
            for row in rows:
                value = _store.row_to_item(row).value
                if _store.matches(flt.filter, value):
                    matched.append(row)
            if len(rows) < page:
                break
            start += page
        return matched[op.offset : wanted]

    async def _semantic(
        self, op: SearchOp, prefix: str | None, flt: _store.FilterPlan, query: str
    ) -> list[Any]:
        """The items nearest to ``query``, then items without vectors (InMemoryStore's order:
        they come after every scored one): one statement, the search function setup() made
        (``rules.nearest_ddl``; docs/performance.md, "Semantic search"). Only a filter the
        prefilter cannot decide whose check drops more of the rows than were read needs another,
        with more rows. A schema whose setup() predates the function gets the older way."""
        spec = self.index_spec
        assert spec is not None
        if self._nearest is False:
            return await self._semantic_steps(op, prefix, flt, query)
        wanted = op.offset + op.limit
        # an item has a vector per field (more for a path such as tags[*]): that many vectors
        # hold ``wanted`` items
        per_item = len(spec.fields) * (4 if any("*" in name for name, _ in spec.fields) else 1)
        cand = wanted * per_item
        if spec.kind == "flat" or (spec.distance == "cosine" and _store.zero_vector(query)):
            probe: int | None = None  # no index, or a query no ANN index can rank by: exact
        elif prefix is None and flt.prefilter is None:
            probe = 0  # every item is a candidate: the index
        elif spec.iterative_scan == "off":
            # the index's first candidates cost about ef_search * FIRST_TUPLES items of the
            # exact scan whatever the matches (the function's bound): counting more is waste
            probe = 4 * wanted
        else:
            probe = max(PROBE_ITEMS, 4 * wanted)
        params: dict[str, Any] = {
            "query": query,
            "prefix": prefix,
            "below": None if prefix is None else _store.below(prefix),
            "filter": flt.prefilter,
            "filters": flt.alternatives,
            "omit_expired": self._omit_expired,
            "probe": probe,
            "tuples": FIRST_TUPLES if spec.iterative_scan == "off" else ANN_TUPLES,
            "scan": spec.iterative_scan,
        }
        statement = self._q.render("store_nearest", vdist=spec.distance)
        exact = flt.exact
        rows_cap = max(4 * wanted, wanted + MIN_CANDIDATES)
        at_exact, at_distance = NearestRow.VALUE_EXACT, NearestRow.DISTANCE
        while True:
            if exact:  # the limit in SQL; only lossy rows (value_exact) are checked, those
                # before the offset too (one failing the check must not count towards it)
                page = {"n": wanted, "skip": 0, "ulim": op.limit, "total": wanted}
            else:  # every row checked here: more rows, offset and limit applied after
                page = {"n": rows_cap, "skip": 0, "ulim": rows_cap, "total": 2 * rows_cap}
            vectors = max(cand, page["n"] * per_item)
            page["cand"] = vectors
            # at least the index's query-time options (ann_index_config's ef_search, probes)
            # (iterative_scan off: what the first candidates hold is the answer; a few more than
            # pgvector's 40 for 10 items, FIRST_CANDIDATES per vector asked for)
            least = FIRST_CANDIDATES * vectors if spec.iterative_scan == "off" else vectors
            ef = min(max(spec.search.get("ef_search", EF_SEARCH), least), MAX_EF_SEARCH)
            page["ef"] = ef
            page["probes"] = max(spec.search.get("probes", 1), ef // 10)
            try:
                rows = await self._driver.fetch_all(statement, {**params, **page})
            except errors.UndefinedFunction as exc:
                # the function itself missing, not an operator or function its body calls
                missing = _store.nearest_function(spec) in (exc.diag.message_primary or "")
                if not missing or self._driver.in_caller_transaction():
                    raise
                logger.warning(
                    "%s: schema %r has no %s (made by setup() of this release): semantic "
                    "search runs several statements until setup() runs again",
                    self._driver.owner,
                    self._q.schema,
                    _store.nearest_function(spec),
                )
                self._nearest = False
                return await self._semantic_steps(op, prefix, flt, query)
            self._nearest = True
            scored = [row for row in rows if row[at_distance] is not None]
            unscored = [row for row in rows if row[at_distance] is None]
            if exact:
                if all(
                    row[at_exact] is None
                    or _store.matches(flt.filter, _store.row_to_item(row).value)
                    for row in rows
                ):
                    # InMemoryStore's order: the offset skips scored items; the unscored
                    # fill what the scored leave of the limit
                    scored = scored[op.offset : wanted]
                    unscored = unscored[: max(0, op.limit - len(scored))]
                    break
                exact = False  # a lossy row failed the check: every row checked
                continue
            ok = [r for r in scored if _store.matches(flt.filter, _store.row_to_item(r).value)]
            if len(ok) < wanted and len(scored) >= rows_cap:
                rows_cap *= 4  # the check dropped too many: more of the nearest
                continue
            scored = ok[op.offset : wanted]
            need = op.limit - len(scored)
            if need > 0:
                fill = [
                    r for r in unscored if _store.matches(flt.filter, _store.row_to_item(r).value)
                ]
                if len(fill) < need and len(unscored) >= rows_cap:
                    rows_cap *= 4
                    continue
                unscored = fill[:need]
            else:
                unscored = []
            break
        # rows.ScoredRow: the item's columns, then its score
        width = ItemRow.WIDTH
        out = [
            (*row[:width], _store.score(float(row[at_distance]), spec.distance)) for row in scored
        ]
        out.extend((*row[:width], None) for row in unscored)
        return out[: op.limit]

    async def _semantic_steps(
        self, op: SearchOp, prefix: str | None, flt: _store.FilterPlan, query: str
    ) -> list[Any]:
        """A schema without the search function: the nearest vectors, read in growing numbers until
        ``offset + limit`` items pass the filter (or none are left), then items without vectors
        (InMemoryStore's order: they come after every scored one)."""
        spec = self.index_spec
        assert spec is not None
        q = self._q
        statement = q.render("store_vector_search", vtype=spec.vector_type, vop=spec.distance)
        wanted = op.offset + op.limit
        candidates = max(40, 4 * wanted * len(spec.fields))
        params: dict[str, Any] = {
            "prefix": prefix,
            "below": None if prefix is None else _store.below(prefix),
            "filter": flt.prefilter,
            "filters": flt.alternatives,
            "query": query,
            "omit_expired": self._omit_expired,
        }
        exact = flt.exact
        deep = False  # the ANN scan told to go on past the rows the namespace filter drops
        at_prefix, at_exact = NearRow.PREFIX, NearRow.VALUE_EXACT
        while True:
            search = {**params, "candidates": candidates, "rows": wanted if exact else None}
            if not deep and (candidates <= DEFAULT_EF_SEARCH or spec.kind == "flat"):
                # the index's defaults return this many: one statement, one round trip
                rows = await self._driver.fetch_all(statement, search)
            else:
                # more candidates than an HNSW scan returns by default (hnsw.ef_search), more
                # IVFFlat lists probed, and a scan that does not stop at the namespace filter:
                # set for this transaction only
                ef = min(max(candidates, spec.search.get("ef_search", 0)), MAX_EF_SEARCH)
                probes = max(1, candidates // 10, spec.search.get("probes", 0))
                knobs = {"ef": str(ef), "probes": str(probes)}
                steps = [_steps.Stmt(q["store_ef_search"], knobs, prepare=None)]
                if await self._iterative_scans():
                    steps.append(_steps.Stmt(q["store_iterative_scan"], None, prepare=None))
                steps.append(_steps.Stmt(statement, search, prepare=None))
                rows = await self._driver.run_step(_steps.Step(tuple(steps)))
            given, held = (
                (int(rows[0][NearRow.GIVEN]), int(rows[0][NearRow.HELD])) if rows else (0, 0)
            )
            found = [row for row in rows if row[at_prefix] is not None]
            kept = [
                row
                for row in found
                if (exact and row[at_exact] is None)
                or _store.matches(flt.filter, _store.row_to_item(row).value)
            ]
            if exact and len(kept) < len(found):
                exact = False  # a lossy row failed the check: read every candidate
                continue
            if len(kept) >= wanted:
                break
            if given < held and not deep and spec.kind != "flat":
                deep = True  # the index stopped before the prefix's vectors ran out
                continue
            if given < candidates:
                break  # every vector under the prefix was seen
            candidates *= 4
        # rows.ScoredRow: the item's columns, then its score
        width, at_distance = ItemRow.WIDTH, NearRow.DISTANCE
        scored = [
            (*row[:width], _store.score(float(row[at_distance]), spec.distance))
            for row in kept[op.offset : wanted]
        ]
        if len(scored) < op.limit:
            scored.extend(
                (*row[:width], None)
                for row in await self._unscored(params, flt, op.limit - len(scored))
            )
        return scored

    async def _unscored(
        self, params: dict[str, Any], flt: _store.FilterPlan, need: int
    ) -> list[Any]:
        """Up to ``need`` items without vectors that pass the filter, newest first."""
        out: list[Any] = []
        start = 0
        page = max(SEARCH_PAGE, need)
        while len(out) < need:
            rows = await self._driver.fetch_all(
                self._q["store_unscored"], {**params, "limit": page, "offset": start}
            )
            out.extend(
                row for row in rows if _store.matches(flt.filter, _store.row_to_item(row).value)
            )
            if len(rows) < page:
                break
            start += page
        return out[:need]

    async def _iterative_scans(self) -> bool:
        """Whether the server's pgvector has iterative index scans (0.8 or newer)."""
        if self._iterative is None:
            row = await self._driver.fetch_one(self._q["store_pgvector_version"], {})
            self._iterative = _pgvector_at_least([row] if row else [], (0, 8))
        return self._iterative

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        start = _store.literal_prefix(op.match_conditions or ())
        prefix = ".".join(start) if start else None
        rows = await self._driver.fetch_all(
            self._q["store_prefixes"],
            {
                "prefix": prefix,
                "below": None if prefix is None else _store.below(prefix),
                "omit_expired": self._omit_expired,
            },
        )
        at_prefix = PrefixRow.PREFIX
        return self._namespaces(op, (row[at_prefix] for row in rows))

    async def _write(self, plan: BatchPlan) -> None:
        """The batch's puts and deletes: one statement (one round trip) unless some indexed text
        is new or changed; then it is embedded and the batch sent again."""
        if not plan.puts:
            return
        if plan.texts and self.embeddings is not None and self.index_spec is not None:
            await self._write_indexed(plan)
            return
        put, delete = self._put_params(plan)
        q = self._q
        if put is not None and delete is not None:
            params = {**put, "del_prefixes": delete["prefixes"], "del_keys": delete["keys"]}
            await self._driver.execute(q["store_put_delete"], params)
        elif put is not None:
            await self._driver.execute(q["store_put"], put)
        elif delete is not None:
            await self._driver.execute(q["store_delete"], delete)

    async def _write_indexed(self, plan: BatchPlan) -> None:
        """store_write, first with every indexed field taken as unchanged: it writes if each
        stored hash matches, else writes nothing and names the fields to embed; those are
        embedded (one call) and the batch sent again with their embeddings. An item another
        writer changed meanwhile makes a try write nothing: the next reads it as it is then.
        Each try calls the write function setup() made (``rules.write_ddl``: the statement
        planned once per session); a schema without it gets the statement itself."""
        spec = self.index_spec
        assert spec is not None
        fields = self._fields(plan)
        texts = {(p, k, f): text for p, k, f, text, _ in fields}
        vectors: dict[tuple[str, str, str], str] = {}
        at_ok, at_still = WriteRow.OK, WriteRow.STILL
        at_prefix, at_key, at_field = WriteRow.PREFIX, WriteRow.KEY, WriteRow.FIELD
        for _ in range(WRITE_TRIES):
            rows = await self._write_try(spec, self._write_params(plan, fields, vectors))
            if not rows or rows[0][at_ok]:
                return
            if not rows[0][at_still]:
                continue  # an item changed between the statement's snapshot and its lock
            need = [
                (r[at_prefix], r[at_key], r[at_field])
                for r in rows
                if r[at_prefix] is not None and (r[at_prefix], r[at_key], r[at_field]) in texts
            ]
            await self._embed(need, texts, vectors)
        await self._write_locked(plan)

    async def _write_try(self, spec: _store.IndexSpec, params: dict[str, Any]) -> list[Any]:
        """One try of store_write: through the write function while the schema has it, else the
        statement (a schema set up by an older release: said once, and remembered)."""
        q = self._q
        if self._writer is not False:
            try:
                rows = await self._driver.fetch_all(
                    q.render("store_write_call", vtype=spec.vector_type), params
                )
            except errors.UndefinedFunction as exc:
                # the function itself missing, not an operator or function its body calls
                if _store.write_function(spec) not in (exc.diag.message_primary or ""):
                    raise
                logger.warning(
                    "%s: schema %r has no %s (made by setup() of this release): indexed writes "
                    "send the statement, planned at every call while the tables are small, "
                    "until setup() runs again",
                    self._driver.owner,
                    q.schema,
                    _store.write_function(spec),
                )
                self._writer = False
                if self._driver.in_caller_transaction():
                    raise  # the caller's transaction is aborted: its next call sends the statement
            else:
                self._writer = True
                return rows
        return await self._driver.fetch_all(q.render("store_write", vtype=spec.vector_type), params)

    async def _embed(
        self,
        need: list[tuple[str, str, str]],
        texts: dict[tuple[str, str, str], str],
        vectors: dict[tuple[str, str, str], str],
    ) -> None:
        """Embed the texts of the fields ``need`` names (each distinct text once, one call) into
        ``vectors``."""
        spec = self.index_spec
        assert spec is not None
        assert self.embeddings is not None
        done = {texts[f]: vector for f, vector in vectors.items()}
        wanted: dict[str, tuple[str, str, str]] = {}  # text -> the first field that has it
        for f in need:
            if texts[f] not in done:
                wanted.setdefault(texts[f], f)
        if wanted:
            embedded = await self.embeddings.aembed_documents(list(wanted))
            if len(embedded) != len(wanted):
                raise PgSaverError(
                    f"the embedding function returned {len(embedded)} embeddings for "
                    f"{len(wanted)} texts; nothing was written"
                )
            for (text, (_, key, name)), vector in zip(wanted.items(), embedded, strict=True):
                done[text] = _store.vector_text(
                    vector, spec.dims, f"field {name!r} of item {key!r}"
                )
        for f in need:
            vectors[f] = done[texts[f]]

    async def _write_locked(self, plan: BatchPlan) -> None:
        """The batch in a transaction that writes its items (locking them) before reading the
        stored hashes, then the vectors; the last try embeds every field."""
        for _ in range(3):
            try:
                await self._write_once(plan)
                return
            except _StaleVectors:
                continue  # another writer changed a field meanwhile: read and embed again
        await self._write_once(plan, everything=True)

    async def _write_once(self, plan: BatchPlan, everything: bool = False) -> None:
        put, delete = self._put_params(plan)
        q = self._q
        vectors = None
        if plan.texts and self.embeddings is not None and self.index_spec is not None:
            known: dict[tuple[str, str, str], str] = {}
            if not everything:
                rows = await self._driver.fetch_all(
                    q["store_vector_hashes"],
                    {"prefixes": [p for p, _ in plan.texts], "keys": [k for _, k in plan.texts]},
                )
                at_prefix, at_key, at_field = HashRow.PREFIX, HashRow.KEY, HashRow.FIELD
                at_hash = HashRow.TEXT_HASH
                known = {(r[at_prefix], r[at_key], r[at_field]): r[at_hash] for r in rows}
            texts = self._to_embed(plan, known)
            embedded = await self.embeddings.aembed_documents(texts) if texts else []
            if len(embedded) != len(texts):
                raise PgSaverError(
                    f"the embedding function returned {len(embedded)} embeddings for "
                    f"{len(texts)} texts; nothing was written"
                )
            vectors = self._vector_params(plan, known, dict(zip(texts, embedded, strict=True)))
        statements = []
        if delete is not None:
            statements.append(_steps.Stmt(q["store_delete"], delete, prepare=None))
        if put is not None:
            statements.append(_steps.Stmt(q["store_put"], put, prepare=None))
        if vectors is not None:
            statement = q.render("store_vector_put", vtype=self.index_spec.vector_type)  # type: ignore[union-attr]
            statements.append(_steps.Stmt(statement, vectors, prepare=None))
        if len(statements) == 1:
            await self._driver.execute(statements[0].query, statements[0].params or {})
        elif statements:
            await self._driver.run_step(
                _steps.Step(tuple(statements), then=_check_vectors if vectors else None)
            )

    # ------------------------------------------------------------------ import

    async def aimport_official(
        self,
        *,
        source_schema: str = DEFAULT_SCHEMA,
        batch: int = 1000,
        reembed: bool = False,
        progress: Any = None,
    ) -> dict[str, int]:
        """Copy the items of the official ``langgraph-checkpoint-postgres`` store (its tables
        ``store`` and ``store_vectors`` in ``source_schema`` of this database) into this store,
        ``batch`` items per transaction, in key order.

        Idempotent and resumable: an item already here is left as it is, so running it again
        continues where an interrupted run stopped. Values, timestamps and TTLs are kept. With an
        index, the source's vectors are copied as they are (the dimension must match), or, with
        ``reembed=True``, every imported item is embedded again with this store's index. Returns
        the counts: ``items`` read, ``imported``, ``vectors`` copied, ``embedded`` texts.
        """
        _steps.batch_size(batch)
        self._driver.refuse_write("import_official")
        source = _store.SourceTables(source_schema)
        q = self._q
        found = await self._driver.fetch_one(source.exists(), source.names())
        has_store = bool(found and found[SourceRow.HAS_STORE])
        has_vectors = bool(found and found[SourceRow.HAS_VECTORS])
        if not has_store:
            raise PgSaverError(
                f"no table {source_schema}.store of the official store in this database: pass "
                "source_schema= (the schema its tables are in)"
            )
        spec = self.index_spec
        copy = spec if spec is not None and has_vectors and not reembed else None
        if copy is not None:
            column = await self._driver.fetch_one(source.vector_column(), source.names())
            want = f"{copy.vector_type}({copy.dims})"
            have = column[0] if column else None
            if have is not None and have.split("(")[-1] != want.split("(")[-1]:
                raise PgSaverError(
                    f"the official store's vectors are {have} and this store's index is {want}: "
                    "import with reembed=True to embed the items with this index"
                )
        counts = {"items": 0, "imported": 0, "vectors": 0, "embedded": 0}
        after: tuple[str, str] | None = None
        while True:
            keys = {
                "first": after is None,
                "k1": after[0] if after else None,
                "k2": after[1] if after else None,
            }
            rows = await self._driver.run_step(
                _steps.Step(
                    (_steps.Stmt(source.items(q.schema_sql, copy), {**keys, "limit": batch}),),
                    lock_timeout=30.0,
                )
            )
            batch_row = rows[0]
            read = batch_row[ImportRow.ITEMS]
            imported = batch_row[ImportRow.IMPORTED]
            last_prefix = batch_row[ImportRow.LAST_PREFIX]
            last_key = batch_row[ImportRow.LAST_KEY]
            moved = batch_row[ImportRow.VECTORS]
            if not read:
                break
            counts["items"] += int(read)
            counts["imported"] += int(imported)
            counts["vectors"] += int(moved)
            if spec is not None and reembed:
                counts["embedded"] += await self._reembed(
                    await self._driver.fetch_all(
                        source.rows(q.schema_sql), {**keys, "p2": last_prefix, "q2": last_key}
                    )
                )
            after = (last_prefix, last_key)
            if progress is not None:
                progress(dict(counts))
            if int(read) < batch:
                break
        return counts

    async def _reembed(self, rows: list[Any]) -> int:
        """Embed items again with this store's index (an import's batch); their values and
        timestamps stay as they are."""
        spec = self.index_spec
        assert spec is not None
        assert self.embeddings is not None
        plan = BatchPlan()
        at_prefix, at_key = ItemRow.PREFIX, ItemRow.KEY
        for row in rows:
            item = _store.row_to_item(row)
            plan.texts[(row[at_prefix], row[at_key])] = _store.index_texts(spec, item.value, None)
        texts = self._to_embed(plan, {})
        embedded = await self.embeddings.aembed_documents(texts) if texts else []
        vectors = self._vector_params(plan, {}, dict(zip(texts, embedded, strict=True)))
        if vectors is not None:
            statement = self._q.render("store_vector_put", vtype=spec.vector_type)
            await self._driver.execute(statement, vectors)
        return len(texts)

    # ------------------------------------------------------------------ TTL

    async def sweep_ttl(self) -> int:
        """Delete expired items, in batches; returns how many. Another worker's sweep running at
        the same time makes this one a no-op (0): one sweep at a time across workers."""
        self._driver.refuse_write("sweep_ttl")
        total = 0
        after: Any = None
        while True:
            row = await self._sweep_batch(after)
            if row is None or not row[SweepRow.HELD]:
                return total
            total += int(row[SweepRow.DELETED])
            if int(row[SweepRow.FOUND]) < SWEEP_BATCH:
                return total
            after = row[SweepRow.LAST]

    async def _sweep_batch(self, after: Any) -> Row | None:
        """One batch of the sweep (a SweepRow): store_sweep, which deletes without locking the
        rows first and waits at most ``SWEEP_LOCK_TIMEOUT`` for a row another transaction holds;
        after such a wait (lock_not_available: the statement rolled back whole, the driver does
        not rerun it), the same batch by store_sweep_skip_locked, which skips the rows others
        hold. In a transaction or pipeline of the caller's, where a failed statement would abort
        the caller's work (and the timeout would outlast the statement), only the second."""
        params = {"limit": SWEEP_BATCH, "schema": self._q.schema, "after": after}
        if self._driver.statement_fails_alone():
            try:
                return await self._driver.fetch_one(
                    self._q["store_sweep"], {**params, "lock_timeout": SWEEP_LOCK_TIMEOUT}
                )
            except errors.LockNotAvailable:
                logger.debug("TTL sweep: a row is held by another transaction; skipping it")
        return await self._driver.fetch_one(self._q["store_sweep_skip_locked"], params)

    def _refuse_write(self, operation: str) -> None:
        self._driver.refuse_write(operation)
