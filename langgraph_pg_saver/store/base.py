"""What PostgresStore and AsyncPostgresStore share (no I/O): options, input checks, how a batch is
split into statements, and the half of BaseStore each side lacks (the async store's ``batch`` for
other threads, the sync store's ``abatch`` in an executor)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    Embeddings,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
)

import langgraph_pg_saver.store.rules as _store
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA, Queries, queries_for
from langgraph_pg_saver.errors import InvalidInputError, PgSaverError

logger = logging.getLogger("langgraph_pg_saver.store")

#: candidates a search reads per statement when the filter is checked in Python
SEARCH_PAGE = 256
#: minutes between TTL sweeps when neither the call nor the TTLConfig says
DEFAULT_SWEEP_MINUTES = 5.0


@dataclass
class BatchPlan:
    """A batch split as the store runs it: reads first (they see the state before the batch's
    writes, as InMemoryStore's batch does), then the writes in one transaction."""

    gets: dict[str, list[tuple[int, str, bool]]] = field(default_factory=dict)
    searches: list[tuple[int, SearchOp, str | None, _store.FilterPlan, bool]] = field(
        default_factory=list
    )
    lists: list[tuple[int, ListNamespacesOp]] = field(default_factory=list)
    #: (prefix, key) -> (jsonb text, exact text, ttl) or None for a delete; the last put wins
    puts: dict[tuple[str, str], tuple[str, str | None, float | None] | None] = field(
        default_factory=dict
    )
    #: (prefix, key) -> the (field, text) pairs to embed, for the puts of a store with an index
    texts: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)


class StoreBase(BaseStore):
    supports_ttl: bool = True

    def __init__(
        self,
        *,
        schema: str = DEFAULT_SCHEMA,
        index: Any = None,
        ttl: TTLConfig | None = None,
        deserializer: Callable[[bytes], dict[str, Any]] | None = None,
    ) -> None:
        self.index_spec: _store.IndexSpec | None = None
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Embeddings | None = None
        if index is not None:
            self.index_spec = _store.index_spec(index)
            self.index_config = dict(index)
            self.embeddings = ensure_embeddings(index["embed"])
        self._q: Queries = queries_for(schema)
        self.ttl_config: TTLConfig | None = ttl
        self._deserializer = deserializer

    @property
    def schema(self) -> str:
        return self._q.schema

    def _refuse_write(self, operation: str) -> None:
        """Raise ReadOnlyError for a store made with ``read_only=True`` (the stores' own)."""

    def _sweep_interval(self, minutes: float | None) -> float:
        """Seconds between sweeps: the call's minutes, else the TTLConfig's, else 5; 0 (or
        None) means the next of these, as the official store reads it."""
        if self.ttl_config and (minutes is None or _zero(minutes)):
            minutes = self.ttl_config.get("sweep_interval_minutes")
        if minutes is None or _zero(minutes):
            minutes = DEFAULT_SWEEP_MINUTES
        if (
            isinstance(minutes, bool)
            or not isinstance(minutes, (int, float))
            or not math.isfinite(minutes)
            or minutes < 0
        ):
            raise InvalidInputError(
                f"sweep_interval_minutes must be a positive number, not {minutes!r}"
            )
        return float(minutes) * 60

    # ------------------------------------------------------------------ batches

    def _default_ttl(self, ttl: object) -> float | None:
        if ttl is NOT_PROVIDED:
            if not self.ttl_config:
                return None
            return _store.check_ttl(self.ttl_config.get("default_ttl"), "default_ttl")
        return _store.check_ttl(ttl)

    @property
    def _omit_expired(self) -> bool:
        """Whether reads leave out items whose TTL ran out but no sweep deleted yet: the TTL
        config's ``omit_expired`` (LangGraph's contract: False unless set). Left in, they come
        back, and a read's refresh gives them a new TTL (as the official store does)."""
        return bool(self.ttl_config and self.ttl_config.get("omit_expired", False))

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return bool(refresh_ttl)
        return True if self.ttl_config is None else self.ttl_config.get("refresh_on_read", True)

    def _plan(self, ops: Iterable[Op]) -> tuple[list[Op], BatchPlan]:
        """Check every op (raising before anything runs) and split the batch."""
        listed = list(ops)
        plan = BatchPlan()
        for i, op in enumerate(listed):
            if isinstance(op, GetOp):
                # (): nothing is stored there, so it reads None (as LangGraph lets it through)
                prefix = _store.check_namespace(op.namespace, empty=True)
                key = _store.check_key(op.key)
                plan.gets.setdefault(prefix, []).append((i, key, self._refresh(op.refresh_ttl)))
            elif isinstance(op, SearchOp):
                prefix = _store.check_namespace(op.namespace_prefix, "namespace_prefix", empty=True)
                _store.check_page(op.limit, op.offset)
                if op.query is not None and not isinstance(op.query, str):
                    raise InvalidInputError(f"query must be a str, not {op.query!r}")
                flt = _store.plan_filter(_store.check_filter(op.filter))
                plan.searches.append((i, op, prefix or None, flt, self._refresh(op.refresh_ttl)))
            elif isinstance(op, ListNamespacesOp):
                _store.check_page(op.limit, op.offset)
                for condition in op.match_conditions or ():
                    if condition.match_type not in ("prefix", "suffix"):
                        raise InvalidInputError(
                            f"match_type must be 'prefix' or 'suffix', not {condition.match_type!r}"
                        )
                    _store.check_namespace(
                        tuple(label for label in condition.path if label != "*"),
                        "match condition path",
                        empty=True,
                    )
                if op.max_depth is not None and (
                    isinstance(op.max_depth, bool)
                    or not isinstance(op.max_depth, int)
                    or op.max_depth < 1
                ):
                    raise InvalidInputError(
                        f"max_depth must be a positive int or None, not {op.max_depth!r}"
                    )
                plan.lists.append((i, op))
            elif isinstance(op, PutOp):
                # LangGraph's rules for ops given to batch (validate_op_namespace): the labels
                # only. The root label "langgraph" is refused by put()/aput() (BaseStore), not
                # here: a delete or a batch write under it goes through, as in the official
                # store. A delete at () deletes nothing; a value at () is refused, as put()
                # refuses it (stored there, it would read back under the namespace ("",)).
                prefix = _store.check_namespace(op.namespace, empty=op.value is None)
                key = _store.check_key(op.key)
                plan.texts.pop((prefix, key), None)
                if op.value is None:
                    plan.puts[(prefix, key)] = None
                else:
                    text, exact = _store.encode_value(op.value)  # type: ignore[arg-type]
                    plan.puts[(prefix, key)] = (text, exact, self._default_ttl(op.ttl))
                    if self.index_spec is not None:
                        fields = _index_fields(op.index)
                        plan.texts[(prefix, key)] = (
                            []
                            if fields is False
                            else _store.index_texts(self.index_spec, op.value, fields)
                        )
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        return listed, plan

    def _item(self, row: Sequence[Any], search: bool = False) -> Item:
        """The Item of a row; ``deserializer`` only reads a value the connection did not load
        into a dict (``rules.row_to_item``), as the official store calls it."""
        return _store.row_to_item(row, search=search, loader=self._deserializer)

    def _vector_params(
        self,
        plan: BatchPlan,
        known: dict[tuple[str, str, str], str],
        embedded: dict[str, list[float]],
    ) -> dict[str, Any] | None:
        """The ``store_vector_put`` parameters: every field of the batch's indexed puts, with the
        embedding of its text when the text changed (``known``: the stored hashes)."""
        spec = self.index_spec
        if spec is None or not plan.texts:
            return None
        # one entry per field in each list (store_vector_put unnests them side by side)
        prefixes: list[str] = []
        keys: list[str] = []
        fields: list[str] = []
        hashes: list[str] = []
        vectors: list[str | None] = []
        for (prefix, key), pairs in plan.texts.items():
            for name, text in pairs:
                digest = _store.text_hash(text)
                vector = None
                if known.get((prefix, key, name)) != digest:
                    vector = _store.vector_text(
                        embedded[text], spec.dims, f"field {name!r} of item {key!r}"
                    )
                prefixes.append(prefix)
                keys.append(key)
                fields.append(name)
                hashes.append(digest)
                vectors.append(vector)
        return {
            "item_prefixes": [p for p, _ in plan.texts],
            "item_keys": [k for _, k in plan.texts],
            "prefixes": prefixes,
            "keys": keys,
            "fields": fields,
            "hashes": hashes,
            "embeddings": vectors,
        }

    @staticmethod
    def _to_embed(plan: BatchPlan, known: dict[tuple[str, str, str], str]) -> list[str]:
        """The distinct texts of the batch whose field is new or changed."""
        out: dict[str, None] = {}
        for (prefix, key), pairs in plan.texts.items():
            for name, text in pairs:
                if known.get((prefix, key, name)) != _store.text_hash(text):
                    out[text] = None
        return list(out)

    @staticmethod
    def _fields(plan: BatchPlan) -> list[tuple[str, str, str, str, str]]:
        """(prefix, key, field, text, text hash) of every indexed field of the batch's puts."""
        return [
            (prefix, key, name, text, _store.text_hash(text))
            for (prefix, key), pairs in plan.texts.items()
            for name, text in pairs
        ]

    @staticmethod
    def _write_params(
        plan: BatchPlan,
        fields: list[tuple[str, str, str, str, str]],
        vectors: dict[tuple[str, str, str], str],
    ) -> dict[str, Any]:
        """The ``store_write`` parameters: the batch's puts and deletes, and each indexed field
        with its text hash and, for those in ``vectors``, its embedding (the others are taken as
        unchanged: the statement checks)."""
        puts = [(k, v) for k, v in plan.puts.items() if v is not None]
        deletes = [k for k, v in plan.puts.items() if v is None]
        return {
            "prefixes": [k[0] for k, _ in puts],
            "keys": [k[1] for k, _ in puts],
            "values": [v[0] for _, v in puts],
            "exacts": [v[1] for _, v in puts],
            "ttls": [v[2] for _, v in puts],
            "del_prefixes": [k[0] for k in deletes],
            "del_keys": [k[1] for k in deletes],
            "f_prefixes": [f[0] for f in fields],
            "f_keys": [f[1] for f in fields],
            "fields": [f[2] for f in fields],
            "hashes": [f[4] for f in fields],
            "embeddings": [vectors.get((f[0], f[1], f[2])) for f in fields],
        }

    @staticmethod
    def _put_params(plan: BatchPlan) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The ``store_put`` and ``store_delete`` parameters of a batch (None: nothing to do)."""
        puts = [(k, v) for k, v in plan.puts.items() if v is not None]
        deletes = [k for k, v in plan.puts.items() if v is None]
        put = (
            {
                "prefixes": [k[0] for k, _ in puts],
                "keys": [k[1] for k, _ in puts],
                "values": [v[0] for _, v in puts],
                "exacts": [v[1] for _, v in puts],
                "ttls": [v[2] for _, v in puts],
            }
            if puts
            else None
        )
        delete = (
            {"prefixes": [k[0] for k in deletes], "keys": [k[1] for k in deletes]}
            if deletes
            else None
        )
        return put, delete

    def _namespaces(self, op: ListNamespacesOp, prefixes: Iterable[str]) -> list[tuple[str, ...]]:
        """InMemoryStore's list_namespaces on the stored namespaces."""
        found: Iterable[tuple[str, ...]] = (tuple(p.split(".")) for p in prefixes)
        for c in op.match_conditions or ():
            found = [
                ns for ns in found if _store.namespace_matches(ns, c.match_type, tuple(c.path))
            ]
        if op.max_depth is not None:
            unique = sorted({ns[: op.max_depth] for ns in found})
        else:
            unique = sorted(set(found))
        return unique[op.offset : op.offset + op.limit]


def _zero(minutes: object) -> bool:
    return not isinstance(minutes, bool) and isinstance(minutes, (int, float)) and minutes == 0


def _index_fields(index: object) -> list[str] | Literal[False] | None:
    """A put's ``index``: False (no embedding), None (the index's fields) or a list of paths."""
    if index is None:
        return None
    if index is False:
        return False
    if isinstance(index, str) or not isinstance(index, (list, tuple)):
        raise InvalidInputError(
            f"index must be False, None or a list of field paths, not {index!r}"
        )
    return [str(f) for f in index]


class AsyncStoreBase(StoreBase):
    """The async store's ``batch``: its ``abatch`` run on the store's loop, from another thread
    (LangGraph calls a store's sync methods from worker threads)."""

    loop: asyncio.AbstractEventLoop | None = None
    _sweeper_task: asyncio.Task[None] | None = None
    _sweeper_stop: asyncio.Event | None = None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:  # pragma: no cover - overridden
        raise NotImplementedError

    async def sweep_ttl(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTLConfig's, else
        5) until :meth:`stop_ttl_sweeper` or close. Every worker may run one: the sweeps take
        turns through an advisory lock. A store without a ``ttl`` config starts none, as the
        official store: the task returned is done at once."""
        if not self.ttl_config:
            return asyncio.get_running_loop().create_task(asyncio.sleep(0))
        if self._sweeper_task is not None and not self._sweeper_task.done():
            return self._sweeper_task
        self._refuse_write("start_ttl_sweeper")
        interval = self._sweep_interval(sweep_interval_minutes)
        stop = self._sweeper_stop = asyncio.Event()

        async def run() -> None:
            while not stop.is_set():
                try:
                    swept = await self.sweep_ttl()
                    if swept:
                        logger.info("TTL sweep removed %d expired items", swept)
                except Exception:
                    logger.exception("TTL sweep failed; trying again at the next interval")
                # (asyncio.TimeoutError: not the builtin TimeoutError before Python 3.11)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), interval)

        self._sweeper_task = asyncio.get_running_loop().create_task(run())
        return self._sweeper_task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True once it has stopped (or none ran) within ``timeout``."""
        task = self._sweeper_task
        if task is None:
            return True
        if self._sweeper_stop is not None:
            self._sweeper_stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            return False
        except (asyncio.CancelledError, Exception):  # the task's own end is not the caller's
            if not task.done():
                raise
        self._sweeper_task = None
        return True

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None:
            raise PgSaverError(
                "AsyncPostgresStore is not bound to an event loop yet: open it (or call an async "
                "method) inside your loop before using its synchronous methods from other threads"
            )
        if running is loop:
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncPostgresStore are only allowed from a thread other "
                "than its event loop's; inside the loop use the async methods (aget, asearch, "
                "aput, ...)"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), loop).result()


class SyncStoreBase(StoreBase):
    """The sync store's ``abatch``: its ``batch`` in the loop's default executor."""

    _sweeper_thread: threading.Thread | None = None
    _sweeper_done: concurrent.futures.Future[None] | None = None
    _sweeper_event: threading.Event | None = None

    def batch(self, ops: Iterable[Op]) -> list[Result]:  # pragma: no cover - overridden
        raise NotImplementedError

    def sweep_ttl(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTLConfig's, else
        5) in a thread until :meth:`stop_ttl_sweeper` or close. Every worker may run one: the
        sweeps take turns through an advisory lock. A store without a ``ttl`` config starts
        no thread, as the official store: the future returned is done."""
        if not self.ttl_config:
            none: concurrent.futures.Future[None] = concurrent.futures.Future()
            none.set_result(None)
            return none
        if self._sweeper_done is not None and not self._sweeper_done.done():
            return self._sweeper_done
        self._refuse_write("start_ttl_sweeper")
        interval = self._sweep_interval(sweep_interval_minutes)
        stop = self._sweeper_event = threading.Event()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                while not stop.is_set():
                    try:
                        swept = self.sweep_ttl()
                        if swept:
                            logger.info("TTL sweep removed %d expired items", swept)
                    except Exception:
                        logger.exception("TTL sweep failed; trying again at the next interval")
                    stop.wait(interval)
            finally:
                done.set_result(None)

        self._sweeper_done = done
        self._sweeper_thread = threading.Thread(target=run, name="lgps-ttl-sweeper", daemon=True)
        self._sweeper_thread.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True once it has stopped (or none ran) within ``timeout``."""
        thread = self._sweeper_thread
        if thread is None:
            return True
        if self._sweeper_event is not None:
            self._sweeper_event.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._sweeper_thread = None
        return True
