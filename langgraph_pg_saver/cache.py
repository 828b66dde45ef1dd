"""LangGraph's node cache on Postgres: :class:`PostgresCache` and :class:`AsyncPostgresCache`.

A node compiled with a ``CachePolicy`` (``graph.compile(cache=...)``) has its result looked up by
the policy's key before it runs, and stored after, through LangGraph's ``BaseCache``. These keep
the entries in the saver's schema (migration 0017's ``pgsaver_cache``), on the saver's pool: a
service running on Postgres needs no Redis to skip an expensive node, and every worker sees the
entries every other worker stored.

What a ``BaseCache`` promises, as ``InMemoryCache`` keeps it: ``get`` returns the entries of the
keys asked that exist and have not expired; ``set`` stores each value with its TTL in seconds
(``None``: no expiry), replacing what the key held; ``clear(namespaces)`` deletes the entries of
exactly those namespaces, ``clear()`` every entry. Values go through the cache's ``serde``
(LangGraph's default without pickle, as ``BaseCache`` has it), compressed as the savers compress
values, and sealed with their namespace and key under a ``KeyringSerializer``.

Expired entries are never returned; :meth:`PostgresCache.sweep` deletes them in batches, one
worker at a time across the deployment (the others' sweeps return 0 meanwhile), as the store's
TTL sweep does. Errors are raised after the driver's retries (a cache that answered "miss" to an
outage would hide it; the saver on the same server fails the run anyway).

Both classes have the sync and the async methods (``BaseCache`` asks for both): the sync one runs
the async methods in a worker thread, the async one runs the sync methods on its event loop (from
another thread, as LangGraph calls them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Generic, TypeVar

from langgraph.cache.base import BaseCache, FullKey, Namespace, ValueT
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from typing_extensions import Self

from langgraph_pg_saver import telemetry as _telemetry
from langgraph_pg_saver.checkpoint import bridge as _bridge
from langgraph_pg_saver.codec.crypto import SUFFIX
from langgraph_pg_saver.codec.values import dump_at, load_at, sealer
from langgraph_pg_saver.db import schema as _schema
from langgraph_pg_saver.db import schema_async as _schema_async
from langgraph_pg_saver.db.driver import Driver
from langgraph_pg_saver.db.driver_async import AsyncDriver
from langgraph_pg_saver.db.owner import PoolOwner
from langgraph_pg_saver.db.owner_async import AsyncPoolOwner
from langgraph_pg_saver.db.pool import DEFAULT_PREPARE_THRESHOLD
from langgraph_pg_saver.db.retry import DEFAULT_RETRY, RetryPolicy
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA, Queries, queries_for
from langgraph_pg_saver.errors import EncryptionKeyError, InvalidInputError

__all__ = ["AsyncPostgresCache", "PostgresCache"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: expired entries one sweep statement deletes
SWEEP_BATCH = 10_000


def ns_text(ns: Namespace) -> str:
    """A namespace as stored: the JSON array of its strings (any strings, kept apart exactly)."""
    if not isinstance(ns, tuple) or not all(isinstance(part, str) for part in ns):
        raise InvalidInputError(f"a cache namespace must be a tuple of str, not {ns!r}")
    # ASCII escapes: any str, lone surrogates included, stored as the same exact text
    return json.dumps(list(ns), separators=(",", ":"))


def _key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidInputError(f"a cache key must be a str, not {key!r}")
    if "\x00" in key:
        raise InvalidInputError(f"a cache key cannot hold a NUL character: {key!r}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            f"a cache key cannot hold a lone surrogate character: {key!r}"
        ) from None
    return key


def _ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl):
        raise InvalidInputError(f"a cache TTL must be a number of seconds or None, not {ttl!r}")
    return float(ttl)


def _place(ns: str, key: str) -> tuple[object, ...]:
    """Where an entry's value is sealed under a KeyringSerializer."""
    return ("cache", ns, key)


def get_params(keys: Sequence[FullKey]) -> tuple[dict[str, Any], dict[tuple[str, str], FullKey]]:
    """``cache_get``'s parameters, and the keys asked by their stored form."""
    asked: dict[tuple[str, str], FullKey] = {}
    for ns, key in keys:
        asked[(ns_text(ns), _key(key))] = (ns, key)
    pairs = sorted(asked)
    return {"nss": [p[0] for p in pairs], "keys": [p[1] for p in pairs]}, asked


def one(params: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters of the one-row form of ``cache_get`` / ``cache_set`` (``*_one``) for
    parameters of a single key, else None."""
    if len(params["keys"]) != 1:
        return None
    return {name[:-1] if name != "nss" else "ns": values[0] for name, values in params.items()}


def get_query(q: Queries, params: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """``cache_get``, or ``cache_get_one`` for one key."""
    single = one(params)
    return (q["cache_get"], params) if single is None else (q["cache_get_one"], single)


def set_query(q: Queries, params: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """``cache_set``, or ``cache_set_one`` for one entry."""
    single = one(params)
    return (q["cache_set"], params) if single is None else (q["cache_set_one"], single)


def found(
    serde: SerializerProtocol, rows: Sequence[Any], asked: Mapping[tuple[str, str], FullKey]
) -> dict[FullKey, Any]:
    """``cache_get``'s rows as the entries found, each value opened at its place."""
    out: dict[FullKey, Any] = {}
    crypt = sealer(serde)
    for ns, key, type_, blob in rows:
        full = asked[(ns, key)]
        if crypt is not None and crypt.strict and not type_.endswith(SUFFIX):
            # stored before the KeyringSerializer (reencrypt leaves the cache alone): a miss, so
            # the node runs and its set replaces the entry sealed
            continue
        try:
            out[full] = load_at(serde, type_, bytes(blob), _place(ns, key))
        except EncryptionKeyError:
            # sealed with a key the keyring no longer holds (rotated out): a miss, as above
            logger.debug("cache entry %r sealed with a key no longer held: a miss", full)
    return out


def set_params(
    serde: SerializerProtocol, pairs: Mapping[FullKey, tuple[Any, int | None]]
) -> dict[str, Any]:
    """``cache_set``'s parameters: every value serialized (compressed where it pays, sealed at
    its place under a KeyringSerializer), sorted by namespace and key."""
    rows = []
    for (ns, key), (value, ttl) in pairs.items():
        text, name = ns_text(ns), _key(key)
        type_, data = dump_at(
            serde, value, "the cached value of key", name, _place(text, name), compress=True
        )
        rows.append((text, name, type_, data, _ttl(ttl)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return {
        "nss": [r[0] for r in rows],
        "keys": [r[1] for r in rows],
        "types": [r[2] for r in rows],
        "blobs": [r[3] for r in rows],
        "ttls": [r[4] for r in rows],
    }


def clear_params(namespaces: Sequence[Namespace] | None) -> dict[str, Any]:
    if namespaces is None:
        return {"all": True, "nss": []}
    if isinstance(namespaces, tuple) and namespaces and all(isinstance(p, str) for p in namespaces):
        raise InvalidInputError(
            f"clear takes a sequence of namespaces, not one namespace: pass [{namespaces!r}]"
        )
    return {"all": False, "nss": sorted({ns_text(ns) for ns in namespaces})}


class _Owned:
    """``from_conn_string``, the same for both classes (each makes its own kind of pool)."""

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        serde: SerializerProtocol | None = None,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 10,
        prepare_threshold: int | None = DEFAULT_PREPARE_THRESHOLD,
        connect_kwargs: dict[str, Any] | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 30.0,
    ) -> Self:
        """A cache that creates and owns a connection pool to ``conn_string``; use it as a
        context manager (``with PostgresCache.from_conn_string(dsn) as cache:``, ``async with``
        for AsyncPostgresCache). The options are the savers' (docs/guide.md, "Connections and
        options")."""
        owner: Any = cls
        pool = owner._owned_pool(
            conn_string,
            name="langgraph-pg-saver-cache",
            min_size=min_size,
            max_size=max_size,
            prepare_threshold=prepare_threshold,
            connect_kwargs=connect_kwargs,
            timeout=timeout,
        )
        made: Self = owner(pool, serde=serde, schema=schema, retry=retry)._own_pool()
        return made


class PostgresCache(_Owned, PoolOwner, BaseCache[ValueT], Generic[ValueT]):
    """LangGraph's ``BaseCache`` on Postgres, on a sync pool or connection (the saver's:
    ``PostgresCache(saver.conn)``, or its own: :meth:`from_conn_string`).

    Args:
        conn: a ``psycopg_pool.ConnectionPool`` or a ``psycopg.Connection``.
        serde: the serializer of the values (LangGraph's ``JsonPlusSerializer`` without pickle
            by default, as ``BaseCache`` has it; a ``KeyringSerializer`` encrypts them).
        schema: the saver's schema (``setup()`` makes the table there with the savers'
            migrations).
        retry: how a call a transient error interrupted is rerun (the savers' policy).

    The async methods run the sync ones in a worker thread (``asyncio.to_thread``).
    """

    _driver: Driver
    _noun = "cache"

    def __init__(
        self,
        conn: Connection[Any] | ConnectionPool[Any],
        *,
        serde: SerializerProtocol | None = None,
        schema: str = DEFAULT_SCHEMA,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        BaseCache.__init__(self, serde=serde)
        self._q: Queries = queries_for(schema)
        self._driver = Driver(conn, self._q, owner=type(self).__name__, retry=retry)

    def setup(self) -> None:
        """Create or upgrade the tables (the savers' migrations, which include the cache's);
        safe from many workers at once."""
        _schema.migrate(self._driver, check=False)

    @_telemetry.instrumented("cache.get")
    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The entries of ``keys`` that exist and have not expired."""
        if not keys:
            return {}
        params, asked = get_params(keys)
        rows = self._driver.fetch_all(*get_query(self._q, params))
        return found(self.serde, rows, asked)

    @_telemetry.instrumented("cache.set")
    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store each value with its TTL in seconds (None: no expiry), replacing what its key
        held; one statement."""
        if not pairs:
            return
        self._driver.execute(*set_query(self._q, set_params(self.serde, pairs)))

    @_telemetry.instrumented("cache.clear")
    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of ``namespaces`` (each exactly that namespace), or every entry."""
        self._driver.execute(self._q["cache_clear"], clear_params(namespaces))

    @_telemetry.instrumented("cache.sweep")
    def sweep(self) -> int:
        """Delete expired entries, in batches; how many went. Another worker's sweep running at
        the same time makes this one return 0: one sweep at a time."""
        total = 0
        params = {"schema": self._q.schema, "limit": SWEEP_BATCH}
        while True:
            row = self._driver.fetch_one(self._q["cache_sweep"], params)
            if row is None or not row[0]:
                return total
            total += int(row[1])
            if int(row[1]) < SWEEP_BATCH:
                return total

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """:meth:`get` in a worker thread."""
        return await asyncio.to_thread(self.get, keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """:meth:`set` in a worker thread."""
        await asyncio.to_thread(self.set, pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """:meth:`clear` in a worker thread."""
        await asyncio.to_thread(self.clear, namespaces)

    async def asweep(self) -> int:
        """:meth:`sweep` in a worker thread."""
        return await asyncio.to_thread(self.sweep)


class AsyncPostgresCache(_Owned, AsyncPoolOwner, BaseCache[ValueT], Generic[ValueT]):
    """LangGraph's ``BaseCache`` on Postgres, on an async pool or connection (the async
    saver's: ``AsyncPostgresCache(saver.conn)``, or its own: :meth:`from_conn_string`); the
    arguments are :class:`PostgresCache`'s.

    The sync methods run the async ones on the cache's event loop, from another thread (as
    LangGraph calls them for a graph run with ``invoke`` in a worker thread); called on the
    loop's own thread they raise ``asyncio.InvalidStateError`` rather than block it (as the async
    saver's do).
    """

    _driver: AsyncDriver
    _noun = "cache"

    def __init__(
        self,
        conn: AsyncConnection[Any] | AsyncConnectionPool[Any],
        *,
        serde: SerializerProtocol | None = None,
        schema: str = DEFAULT_SCHEMA,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        BaseCache.__init__(self, serde=serde)
        self._q: Queries = queries_for(schema)
        self._driver = AsyncDriver(conn, self._q, owner=type(self).__name__, retry=retry)

    async def setup(self) -> None:
        """Create or upgrade the tables (the savers' migrations, which include the cache's);
        safe from many workers at once."""
        await _schema_async.migrate(self._driver, check=False)

    @_telemetry.instrumented("cache.get")
    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The entries of ``keys`` that exist and have not expired."""
        if not keys:
            return {}
        params, asked = get_params(keys)
        rows = await self._driver.fetch_all(*get_query(self._q, params))
        return found(self.serde, rows, asked)

    @_telemetry.instrumented("cache.set")
    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store each value with its TTL in seconds (None: no expiry), replacing what its key
        held; one statement."""
        if not pairs:
            return
        await self._driver.execute(*set_query(self._q, set_params(self.serde, pairs)))

    @_telemetry.instrumented("cache.clear")
    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of ``namespaces`` (each exactly that namespace), or every entry."""
        await self._driver.execute(self._q["cache_clear"], clear_params(namespaces))

    @_telemetry.instrumented("cache.sweep")
    async def asweep(self) -> int:
        """Delete expired entries, in batches; how many went. Another worker's sweep running at
        the same time makes this one return 0: one sweep at a time."""
        total = 0
        params = {"schema": self._q.schema, "limit": SWEEP_BATCH}
        while True:
            row = await self._driver.fetch_one(self._q["cache_sweep"], params)
            if row is None or not row[0]:
                return total
            total += int(row[1])
            if int(row[1]) < SWEEP_BATCH:
                return total

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        return _bridge.run_sync(
            self._driver.loop, coro, "AsyncPostgresCache", "aget, aset, aclear, asweep"
        )

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """:meth:`aget` on the cache's loop (from another thread)."""
        return self._run_sync(self.aget(keys))

    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """:meth:`aset` on the cache's loop (from another thread)."""
        self._run_sync(self.aset(pairs))

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """:meth:`aclear` on the cache's loop (from another thread)."""
        self._run_sync(self.aclear(namespaces))

    def sweep(self) -> int:
        """:meth:`asweep` on the cache's loop (from another thread)."""
        return self._run_sync(self.asweep())
