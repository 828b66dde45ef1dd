"""What the sync and async savers share: options, the SQL of their schema, what each operation
with variants runs (one :class:`Call` per put, put_writes and get_tuple), versions. No I/O: the
savers hand those calls to their driver."""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint import reading as _reading
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.codec import compress as _compress
from langgraph_pg_saver.codec import elements as _elements
from langgraph_pg_saver.codec import values as _values
from langgraph_pg_saver.db.call import ALL, NOTHING, ONE, Call
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA, Queries, queries_for

if TYPE_CHECKING:
    from langgraph_pg_saver.db.driver import Driver
    from langgraph_pg_saver.db.driver_async import AsyncDriver


class SaverBase(BaseCheckpointSaver[str]):
    """Options and statement choices common to :class:`PostgresSaver` and :class:`AsyncPostgresSaver`."""

    _driver: Driver | AsyncDriver

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        schema: str = DEFAULT_SCHEMA,
        single_writer: bool = False,
        compression: _compress.Compression = "zstd",
        list_storage: _elements.ListStorage = "whole",
    ) -> None:
        super().__init__(serde=serde)
        self._compression = _compress.check(compression)
        self._list_storage = _elements.check_storage(list_storage)
        # the statements for one server, and for a database with citus (chosen by the driver's
        # state: shared by the clones LangGraph makes, found once per saver); those for a schema
        # an older release migrated made when first needed (queries_for keeps them)
        self._queries = (queries_for(schema), queries_for(schema, citus=True))
        if not isinstance(single_writer, bool):
            raise TypeError(f"single_writer must be a bool, not {type(single_writer).__name__}")
        self.single_writer = single_writer

    @property
    def conn(self) -> Any:
        """The pool or connection the saver was given, or the pool ``from_conn_string`` made (as
        the official saver's ``conn``): a store or cache shares it, ``PostgresCache(saver.conn)``."""
        driver = self._driver
        return driver.pool if driver.pool is not None else driver.conn

    @property
    def _q(self) -> Queries:
        """The statements for this database: Citus's forms once the driver found citus there;
        those that read no parts on a schema without migration 0015, and those that record no
        deletes on one without 0018 (before this release's setup())."""
        state = self._driver.state
        citus = state.citus is True
        if state.lists is not False and state.deleted is not False:
            return self._queries[citus]
        return queries_for(
            self._queries[0].schema,
            citus=citus,
            lists=state.lists is not False,
            deleted=state.deleted is not False,
        )

    @property
    def _stores_elements(self) -> bool:
        """Whether a put stores list values as their elements: the option, on a schema that has
        migration 0015's table."""
        return self._list_storage == "elements" and self._driver.state.lists is not False

    @property
    def _visible_metadata(self) -> frozenset[str] | None:
        """The metadata keys stored in clear (a KeyringSerializer's plaintext_metadata), or None:
        all of them."""
        crypt = _values.sealer(self.serde)
        return None if crypt is None else crypt.plaintext_metadata

    def with_allowlist(
        self, extra_allowlist: Collection[tuple[str, ...]]
    ) -> BaseCheckpointSaver[str]:
        """A shallow clone whose serializer accepts more msgpack types (LangGraph's strict
        msgpack mode asks this of a checkpointer); a KeyringSerializer passes it to its inner
        serializer and stays a KeyringSerializer."""
        crypt = _values.sealer(self.serde)
        if crypt is None:
            return super().with_allowlist(extra_allowlist)
        serde = crypt.with_msgpack_allowlist(extra_allowlist)
        if serde is crypt:
            return self
        clone = copy.copy(self)
        clone.serde = serde
        return clone

    @property
    def compression(self) -> _compress.Compression:
        """How values are stored: "zstd" (compressed where it pays) or None (as serialized)."""
        return self._compression

    @property
    def list_storage(self) -> _elements.ListStorage:
        """How list values are stored: "whole" (each version as serialized) or "elements" (each
        element once per thread; codec/elements.py)."""
        return self._list_storage

    @property
    def schema(self) -> str:
        """The Postgres schema holding this saver's tables."""
        return self._q.schema

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Next channel version, compatible with the official Postgres saver's version strings."""
        return _keys.next_version(current)

    # ------------------------------------------------------------------ what each operation runs
    # One place decides the whole of what a call runs; the driver only picks, per connection,
    # between the forms the Call carries (db/call.py).

    def _put_call(self, put: _writing.Batch, metadata: object) -> Call:
        """What a put runs: its plain INSERT, returning whether the parent is stored (checked by
        migration 0011's function, whose plan stays on the primary key under any statistics);
        the upsert after a unique violation; where nothing is prepared, the call of migration
        0006's function, which does the same work (not for a claiming put, which the function
        lacks); the same two statements with the check inline, for a schema or role that cannot
        call the functions."""
        if self._claims(metadata):
            put = put._replace(claim=True)
        insert, upsert = self._put_sql(put)
        call = self._q["put_call_parts"] if put.parts else self._q["put_call"]
        unprepared = None if put.claim else (call, _writing.blob_arrays)
        q, rows, claim, parts = self._q, put.rows, put.claim, put.parts
        plain = (
            q.render("put_new_plain", blob_rows=rows, claim=claim, parts=parts),
            q.render("put_plain", blob_rows=rows, claim=claim, parts=parts),
        )
        return Call(insert, put.params, ONE, upsert, unprepared, plain=plain)

    def _put_orphan_call(self, put: _writing.Batch, metadata: object) -> Call:
        """put's second try, when its first statement found the parent not stored: stores the
        checkpoint if its state is whole without any ancestor; no row when it is not."""
        claim = self._claims(metadata)
        status = put.params.get("status")
        q, rows, parts = self._q, put.rows, put.parts
        query = q.render("put_orphan", blob_rows=rows, claim=claim, status=status, parts=parts)
        return Call(query, put.params, ONE)

    def _put_writes_call(self, writes: _writing.Batch) -> Call:
        """What put_writes runs (see :meth:`_put_writes_sql`); its result is not read."""
        query, upsert = self._put_writes_sql(writes)
        # where nothing is prepared (a pooler; Citus, which runs the call on the thread's
        # worker), migration 0013's function (0018's form)
        unprepared = (self._q["put_writes_call"], _writing.write_arrays)
        # where the functions cannot be called: the statements that call none (migration 0018's
        # check of the record of deletes read in the statement)
        plain = self._put_writes_sql(writes, plain=True)
        return Call(query, writes.params, NOTHING, upsert, unprepared, plain)

    def _status_mark_call(self, params: Mapping[str, Any], status: str) -> Call:
        """After put_writes to __interrupt__ or __error__ at a root checkpoint: migration 0014's
        upkeep of the thread's status row. Where the function cannot be called (a schema an older
        release migrated), nothing."""
        mark = {k: params[k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        mark["status"] = status
        return Call(self._q["put_status_mark"], mark, NOTHING, plain=(b"SELECT 1", None))

    def _delete_thread_call(self, thread_id: str) -> Call:
        """delete_thread: migration 0014's function (the thread's rows and its status row, one
        call); the statement where the function cannot be called."""
        params = {"thread_id": thread_id}
        return Call(
            self._q["delete_thread_call"], params, NOTHING, plain=(self._q["delete_thread"], None)
        )

    def _get_tuple_call(self, sel: _reading.Select) -> Call:
        """What get_tuple runs: one checkpoint's rows (small, so on the kept cursor): the
        statement (a StatsPlan), prepared on a connection that found the tables large; elsewhere
        (tables small, nothing prepared) migration 0007's function, whose plans stay on the
        primary key under any statistics (migration 0011); the statement, unprepared, where the
        function cannot be called or the connection is in a transaction."""
        return Call(
            self._q.get_tuple(sel.predicates),
            sel.params,
            ALL,
            unprepared=(self._q["get_tuple_call"], _writing.with_checkpoint_id),
            size_column=_reading.GET_TUPLE_BYTES,
        )

    def _put_sql(self, put: _writing.Batch) -> tuple[bytes, bytes]:
        """put's plain INSERT, and the upsert the driver falls back to on a unique violation."""
        q = self._q
        rows, claim, status, parts = put.rows, put.claim, put.params.get("status"), put.parts
        insert = q.render("put_new", blob_rows=rows, claim=claim, status=status, parts=parts)
        return insert, q.render("put", blob_rows=rows, claim=claim, status=status, parts=parts)

    def _claims(self, metadata: object) -> bool:
        """Whether a put must extend its namespace's newest checkpoint: with single_writer, a
        run's own checkpoints (source "input" and "loop"); a "fork" (a replay from an earlier
        checkpoint) or an "update" (update_state) may branch anywhere."""
        if not self.single_writer or not isinstance(metadata, dict):
            return False
        return metadata.get("source") in ("input", "loop")

    def _put_writes_sql(
        self, writes: _writing.Batch, *, plain: bool = False
    ) -> tuple[bytes, bytes | None]:
        """put_writes' statement, and the upsert to fall back to.

        Writes to special channels replace earlier ones: an expected conflict, handled by the upsert
        directly. Ordinary writes first try a plain INSERT.
        """
        q, rows = self._q, writes.rows
        if plain:  # calling none of our functions
            upsert = q.render("put_writes_plain", write_rows=rows)
            insert = q.render("put_writes_new_plain", write_rows=rows)
        else:
            upsert = q.render("put_writes", write_rows=rows)
            insert = q.render("put_writes_new", write_rows=rows)
        return (upsert, None) if writes.special else (insert, upsert)
