"""Behaviour beyond the conformance suite: lifecycle, pools, connection settings, bad input, NULs,
strict msgpack, the async saver's sync methods, and sync/async parity."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    InvalidInputError,
    PostgresSaver,
    SaverClosedError,
)
from langgraph_pg_saver.checkpoint import writing as _writing


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # test-only, fixed names
        assert row is not None
        return int(row[0])


# ---------------------------------------------------------------- lifecycle


def test_from_conn_string_context_manager_and_closed_errors(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(SaverClosedError, match="closed"):
        saver.get_tuple(config("t"))
    with pytest.raises(SaverClosedError):
        list(saver.list(None))


def test_open_and_close_without_a_with_block(db_dsn: str) -> None:
    saver = PostgresSaver.from_conn_string(db_dsn, min_size=1, max_size=2)
    with pytest.raises(SaverClosedError):
        saver.get_tuple(config("t"))  # not opened yet
    saver.open()
    try:
        assert saver.get_tuple(config("t")) is None
    finally:
        saver.close()
    with pytest.raises(SaverClosedError):
        saver.put(config("t"), checkpoint(), {}, {})


async def test_async_open_close(db_dsn: str) -> None:
    saver = AsyncPostgresSaver.from_conn_string(db_dsn)
    await saver.open()
    assert await saver.aget_tuple(config("t")) is None
    await saver.close()
    with pytest.raises(SaverClosedError):
        await saver.aget_tuple(config("t"))
    async with AsyncPostgresSaver.from_conn_string(db_dsn) as again:
        assert await again.aget_tuple(config("t")) is None


def test_close_leaves_a_callers_pool_open(db_dsn: str) -> None:
    with ConnectionPool(db_dsn, min_size=1, max_size=2, open=True) as pool:
        saver = PostgresSaver(pool)
        saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        saver.close()
        assert not pool.closed
        assert PostgresSaver(pool).get_tuple(config("t")) is not None


def test_constructor_rejects_what_is_not_a_connection() -> None:
    with pytest.raises(TypeError, match="psycopg Connection or psycopg_pool ConnectionPool"):
        PostgresSaver("postgresql://localhost/db")  # type: ignore[arg-type]


# ---------------------------------------------------------------- concurrency on a pool


def test_a_blocked_call_does_not_block_other_calls_on_the_pool(db_dsn: str) -> None:
    """No instance-wide lock: while one put waits on a row lock, another thread's put completes."""
    with PostgresSaver.from_conn_string(db_dsn, min_size=2, max_size=4) as saver:
        cp = checkpoint({"a": 1})
        blocker = psycopg.connect(db_dsn)
        try:
            # an uncommitted row with the same key makes the first put wait on the unique index
            blocker.execute(
                "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
                " channel_versions, metadata) VALUES ('slow', '', %s, 'x', '', '{}', '{}')",
                (cp["id"],),
            )
            with ThreadPoolExecutor(2) as pool:
                slow = pool.submit(saver.put, config("slow"), cp, {}, {"a": 1})
                waiting = threading.Event()

                def put_other() -> None:
                    waiting.wait(1)  # give the slow put a head start
                    saver.put(config("fast"), checkpoint({"b": 2}), {}, {"b": 2})

                pool.submit(put_other).result(timeout=60)
                assert not slow.done(), "the blocked put should still be waiting"
                assert saver.get_tuple(config("fast")) is not None
                blocker.rollback()
                slow.result(timeout=60)
        finally:
            blocker.close()
        tup = saver.get_tuple(config("slow"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 1}


async def test_async_calls_run_concurrently_on_the_pool(db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(db_dsn, min_size=2, max_size=4) as saver:
        cp = checkpoint({"a": 1})
        async with await psycopg.AsyncConnection.connect(db_dsn) as blocker:
            await blocker.execute(
                "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
                " channel_versions, metadata) VALUES ('slow', '', %s, 'x', '', '{}', '{}')",
                (cp["id"],),
            )
            slow = asyncio.create_task(saver.aput(config("slow"), cp, {}, {"a": 1}))
            await asyncio.sleep(0.2)
            await asyncio.wait_for(
                saver.aput(config("fast"), checkpoint({"b": 2}), {}, {"b": 2}), 60
            )
            assert not slow.done()
            await blocker.rollback()
            await asyncio.wait_for(slow, 60)
        assert (await saver.aget_tuple(config("slow"))) is not None


# ---------------------------------------------------------------- connection settings


def test_single_connection_configured_any_way(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=False, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        stored = saver.put(config("t"), checkpoint({"a": 1}), {"k": "v"}, {"a": 1})
        saver.put_writes(stored, [("a", 2)], "task")
        tup = saver.get_tuple(config("t"))
        assert tup is not None
        assert tup.pending_writes == [("task", "a", 2)]
        assert [t.metadata["k"] for t in saver.list(config("t"))] == ["v"]  # type: ignore[typeddict-item]
        assert conn.autocommit is False
        assert conn.row_factory is dict_row
        # committed already, while this connection is still open: another connection sees it
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert count(db_dsn, "pgsaver_checkpoints") == 1
        assert count(db_dsn, "pgsaver_writes") == 1


def test_a_call_inside_the_callers_transaction_joins_it(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        saver = PostgresSaver(conn)
        conn.execute("SELECT 1")  # opens a transaction
        saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(config("t")) is not None
        conn.rollback()
        assert saver.get_tuple(config("t")) is None


# ---------------------------------------------------------------- values and metadata


def test_nul_characters_round_trip_in_values_metadata_and_writes(saver: PostgresSaver) -> None:
    values = {"text": "a\x00b", "nested": {"k\x00": ["\x00"]}, "none": None}
    cp = checkpoint(values)
    metadata = {"source": "loop", "step": 1, "note": "x\x00y", "deep": {"list": ["\x00z"]}}
    stored = saver.put(config("t"), cp, metadata, cp["channel_versions"])  # type: ignore[arg-type]
    saver.put_writes(stored, [("text", "w\x00")], "task\x01")
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == values
    assert tup.metadata == metadata
    assert tup.pending_writes == [("task\x01", "text", "w\x00")]
    # filters compare the metadata as stored, NULs included (InMemorySaver's rule)
    assert len(list(saver.list(None, filter={"note": "xy"}))) == 0
    assert len(list(saver.list(None, filter={"note": "x\x00y"}))) == 1
    assert len(list(saver.list(None, filter={"deep": {"list": ["\x00z"]}}))) == 1


def test_metadata_is_stored_whole(saver: PostgresSaver) -> None:
    metadata = {
        "source": "update",
        "step": 3,
        "parents": {"": "p"},
        "custom": {"a": [1, 2.5, True, None]},
        "run_id": "run-1",
        "writes": {"node": {"x": 1}},
    }
    stored = saver.put(config("t"), checkpoint(), metadata, {})  # type: ignore[arg-type]
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.metadata == metadata
    # config values LangGraph records in metadata are added, reserved keys are not
    cfg = config("t2")
    cfg["configurable"]["user_id"] = "u1"
    cfg["configurable"]["__secret"] = "no"
    cfg["metadata"] = {"tenant": "acme"}
    stored = saver.put(cfg, checkpoint(), {"step": 0}, {})
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.metadata == {"step": 0, "user_id": "u1", "tenant": "acme"}


def test_list_filters_across_threads_and_pushes_limit_into_sql(saver: PostgresSaver) -> None:
    for i in range(6):
        saver.put(
            config(f"thread-{i}"),
            checkpoint(),
            {"source": "loop", "step": i, "team": "red" if i % 2 else "blue"},
            {},
        )  # type: ignore[arg-type]
    red = list(saver.list(None, filter={"team": "red"}))
    assert sorted(t.config["configurable"]["thread_id"] for t in red) == [
        "thread-1",
        "thread-3",
        "thread-5",
    ]
    assert len(list(saver.list(None, filter={"team": "red"}, limit=2))) == 2
    assert len(list(saver.list(None, limit=0))) == 0
    assert len(list(saver.list(None))) == 6


def test_put_same_checkpoint_twice_keeps_one_row_with_the_latest_metadata(
    saver: PostgresSaver,
) -> None:
    cp = checkpoint({"a": 1})
    saver.put(config("t"), cp, {"step": 1}, {"a": 1})
    saver.put(config("t"), cp, {"step": 2}, {"a": 1})
    rows = list(saver.list(config("t")))
    assert len(rows) == 1
    assert rows[0].metadata == {"step": 2}


def test_a_put_that_repeats_a_stored_blob_keeps_it_and_stores_the_checkpoint(
    saver: PostgresSaver, db_dsn: str
) -> None:
    # a put first tries plain INSERTs; a blob (channel, version) that exists makes it fall back to
    # the upsert, which keeps the stored blob and writes the checkpoint
    first = saver.put(config("t"), checkpoint({"a": "x"}, {"a": "v1"}), {}, {"a": "v1"})
    second = saver.put(first, checkpoint({"a": "y"}, {"a": "v1"}), {"step": 2}, {"a": "v1"})
    tup = saver.get_tuple(second)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": "x"}
    assert tup.metadata == {"step": 2}
    assert count(db_dsn, "pgsaver_blobs") == 1
    assert count(db_dsn, "pgsaver_checkpoints") == 2


async def test_a_repeated_put_falls_back_to_the_upsert_async(asaver: AsyncPostgresSaver) -> None:
    cp = checkpoint({"a": "x"}, {"a": "v1"})
    await asaver.aput(config("t"), cp, {"step": 1}, {"a": "v1"})
    stored = await asaver.aput(config("t"), cp, {"step": 2}, {"a": "v1"})
    got = [t async for t in asaver.alist(config("t"))]
    assert [t.metadata for t in got] == [{"step": 2}]
    tup = await asaver.aget_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": "x"}


def test_a_repeated_put_inside_the_callers_transaction_leaves_it_usable(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        saver = PostgresSaver(conn)
        cp = checkpoint({"a": "x"}, {"a": "v1"})
        with conn.transaction():
            saver.put(config("t"), cp, {"step": 1}, {"a": "v1"})
            stored = saver.put(config("t"), cp, {"step": 2}, {"a": "v1"})
            assert conn.execute("SELECT count(*) FROM pgsaver_checkpoints").fetchone() == (1,)
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.metadata == {"step": 2}


_SAMPLES: list[Any] = [None, b"\x00raw", "text", {"k": [1, 2.5]}, 7, "", [None], b""]


@pytest.mark.parametrize("n", [1, 2, _writing.VALUES_MAX_ROWS, _writing.VALUES_MAX_ROWS + 1])
def test_any_number_of_values_and_writes_round_trips(saver: PostgresSaver, n: int) -> None:
    # up to VALUES_MAX_ROWS values or writes travel as scalars of a VALUES list, more as arrays:
    # both forms store the same rows, and fall back to the upsert the same way
    names = [f"ch{i}" for i in range(n)]
    values = {ch: _SAMPLES[i % len(_SAMPLES)] for i, ch in enumerate(names)}
    stored_values = {ch: v for ch, v in values.items() if ch != names[-1]}  # the last: no value
    versions = {ch: f"v{i}" for i, ch in enumerate(names)}
    cp = checkpoint(stored_values, versions)
    stored = saver.put(config("t"), cp, {"step": 1}, versions)
    again = saver.put(config("t"), cp, {"step": 2}, versions)  # every row exists: the upsert
    assert again == stored
    writes = [(ch, values[ch]) for ch in names]
    saver.put_writes(stored, writes, "task", "path")
    saver.put_writes(stored, [(ch, "later") for ch in names], "task", "path")  # kept: the first
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == stored_values
    assert tup.checkpoint["channel_versions"] == versions
    assert tup.metadata == {"step": 2}
    assert tup.pending_writes == [("task", ch, v) for ch, v in writes]


def _puts_with_and_without_values(saver: PostgresSaver) -> Any:
    stored = saver.put(config("t"), checkpoint({"a": 1, "b": 2}), {}, {"a": 1, "b": 1})
    for step, values in enumerate(({"a": 3}, {"b": 4}, {}), start=2):
        versions = {"a": step, "b": step}
        stored = saver.put(stored, checkpoint(values, versions), {"bad\x00": step}, versions)
    return stored


_PREPARED_PUTS = (
    "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%pgsaver_blobs%'"
)


@pytest.mark.parametrize("through", ["connection", "pool"])
def test_values_and_missing_values_share_one_prepared_statement(db_dsn: str, through: str) -> None:
    # a channel version without a value goes as a NULL typed bytea, and so does metadata_exact when
    # the metadata needs none: psycopg sends None untyped, so every mix of values and missing values
    # would otherwise be prepared as a statement of its own (a connection runs the upsert, a pool
    # the plain insert first)
    if through == "pool":
        with PostgresSaver.from_conn_string(db_dsn, max_size=1, prepare_threshold=0) as saver:
            stored = _puts_with_and_without_values(saver)
            assert saver._pool is not None
            with saver._pool.connection() as conn:  # the pool's one connection: its session
                prepared = conn.execute(_PREPARED_PUTS, prepare=False).fetchone()
            tup = saver.get_tuple(stored)
    else:
        with psycopg.connect(db_dsn, autocommit=True, prepare_threshold=0) as conn:
            saver = PostgresSaver(conn)
            stored = _puts_with_and_without_values(saver)
            prepared = conn.execute(_PREPARED_PUTS, prepare=False).fetchone()
            tup = saver.get_tuple(stored)
    assert prepared == (1,)
    with psycopg.connect(db_dsn) as check:
        empty = check.execute(
            "SELECT count(*), count(blob) FROM pgsaver_blobs WHERE type = 'empty'"
        ).fetchone()
        exact = check.execute("SELECT count(metadata_exact) FROM pgsaver_checkpoints").fetchone()
    assert empty == (4, 0)  # stored as NULL, as the array form stores them
    assert exact == (3,)  # the NUL-carrying metadata is kept exactly; the first needs nothing
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {}
    assert tup.metadata["bad\x00"] == 4


def test_special_writes_are_upserted_and_ordinary_writes_keep_the_first_value(
    saver: PostgresSaver,
) -> None:
    stored = saver.put(config("t"), checkpoint(), {}, {})
    saver.put_writes(stored, [("ch", "first"), ("__interrupt__", "i1")], "task", "p")
    saver.put_writes(stored, [("ch", "second"), ("__interrupt__", "i2")], "task", "p")
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.pending_writes == [("task", "__interrupt__", "i2"), ("task", "ch", "first")]


def test_a_repeated_ordinary_write_keeps_the_first_value_and_adds_the_new_ones(
    saver: PostgresSaver, db_dsn: str
) -> None:
    # ordinary writes go in with a plain INSERT; a row that exists makes it fall back to the upsert
    stored = saver.put(config("t"), checkpoint(), {}, {})
    saver.put_writes(stored, [("a", "first")], "task")
    saver.put_writes(stored, [("a", "second"), ("b", "new")], "task")
    saver.put_writes(stored, [("a", "third")], "task")
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.pending_writes == [("task", "a", "first"), ("task", "b", "new")]
    assert count(db_dsn, "pgsaver_writes") == 2


async def test_a_repeated_ordinary_write_keeps_the_first_value_async(
    asaver: AsyncPostgresSaver,
) -> None:
    stored = await asaver.aput(config("t"), checkpoint(), {}, {})
    await asaver.aput_writes(stored, [("a", "first")], "task")
    await asaver.aput_writes(stored, [("a", "second"), ("b", "new")], "task")
    tup = await asaver.aget_tuple(stored)
    assert tup is not None
    assert tup.pending_writes == [("task", "a", "first"), ("task", "b", "new")]


def test_a_repeated_write_inside_the_callers_transaction_leaves_it_usable(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        saver = PostgresSaver(conn)
        with conn.transaction():
            stored = saver.put(config("t"), checkpoint(), {}, {})
            saver.put_writes(stored, [("a", "first")], "task")
            saver.put_writes(stored, [("a", "second")], "task")
            assert conn.execute("SELECT count(*) FROM pgsaver_writes").fetchone() == (1,)
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.pending_writes == [("task", "a", "first")]


def test_pending_writes_come_in_writes_sort_key_order(saver: PostgresSaver) -> None:
    stored = saver.put(config("t"), checkpoint(), {}, {})
    saver.put_writes(stored, [("c", 1), ("c", 2)], "task-b", "~1")
    saver.put_writes(stored, [("c", 3)], "task-a", "~2")
    saver.put_writes(stored, [("c", 4)], "task-z", "")
    saver.put_writes(stored, [("c", 5)], "task-c", "~1")
    saver.put_writes(stored, [("c", 6)], "task-\u00e9", "~1")  # code point order: after "task-c"
    saver.put_writes(stored, [("c", 7)], "task-\U0001f600", "~1")  # astral: after the BMP
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert [w[2] for w in tup.pending_writes or []] == [4, 1, 2, 5, 6, 7, 3]
    # get_tuple (one checkpoint, ordered by the client) and list (ordered by Postgres) agree
    (listed,) = saver.list(stored)
    assert listed.pending_writes == tup.pending_writes


# ---------------------------------------------------------------- bad input


def test_bad_input_fails_before_anything_is_written(saver: PostgresSaver, db_dsn: str) -> None:
    with pytest.raises(InvalidInputError, match="thread_id"):
        saver.put({"configurable": {}}, checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(InvalidInputError, match="NUL"):
        saver.put(config("bad\x00thread"), checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(InvalidInputError, match="channel name"):
        saver.put(config("t"), checkpoint({"a\x00": 1}), {}, {"a\x00": 1})
    with pytest.raises(InvalidInputError, match="checkpoint_id"):
        saver.put_writes(config("t"), [("a", 1)], "task")
    with pytest.raises(InvalidInputError, match="limit"):
        list(saver.list(None, limit=-1))
    with pytest.raises(InvalidInputError, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    assert count(db_dsn, "pgsaver_checkpoints") == 0
    assert count(db_dsn, "pgsaver_blobs") == 0
    assert count(db_dsn, "pgsaver_writes") == 0


# ---------------------------------------------------------------- strict msgpack


@dataclass
class Custom:
    name: str


def test_with_allowlist_strict_msgpack(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(
        db_dsn, serde=JsonPlusSerializer(allowed_msgpack_modules=None)
    ) as strict:
        cp = checkpoint({"obj": Custom("x")})
        stored = strict.put(config("t"), cp, {}, cp["channel_versions"])
        blocked = strict.get_tuple(stored)
        assert blocked is not None
        assert not isinstance(blocked.checkpoint["channel_values"]["obj"], Custom)

        allowed = strict.with_allowlist([(Custom.__module__, "Custom")])
        assert isinstance(allowed, PostgresSaver)
        assert allowed is not strict
        tup = allowed.get_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["obj"] == Custom("x")


# ---------------------------------------------------------------- async saver's sync methods


async def test_async_saver_sync_methods_from_another_thread(asaver: AsyncPostgresSaver) -> None:
    cp = checkpoint({"a": 1})
    stored = await asyncio.to_thread(asaver.put, config("t"), cp, {"step": 1}, {"a": 1})
    await asyncio.to_thread(asaver.put_writes, stored, [("a", 2)], "task")
    tup = await asyncio.to_thread(asaver.get_tuple, config("t"))
    assert tup is not None
    assert tup.pending_writes == [("task", "a", 2)]
    listed = await asyncio.to_thread(lambda: list(asaver.list(config("t"))))
    assert [t.checkpoint["id"] for t in listed] == [cp["id"]]
    await asyncio.to_thread(asaver.delete_thread, "t")
    assert await asaver.aget_tuple(config("t")) is None
    # from the loop's own thread it would deadlock: a clear error instead
    with pytest.raises(asyncio.InvalidStateError, match="thread other than"):
        asaver.get_tuple(config("t"))


# ---------------------------------------------------------------- parity


def test_sync_and_async_savers_expose_the_same_api() -> None:
    # the sync methods the async saver bridges to its coroutines, and the rest of the lifecycle
    pairs = {name: f"a{name}" for name in AsyncPostgresSaver._BRIDGED}
    pairs.update(
        {
            name: name
            for name in (
                "setup",
                "verify_schema",
                "open",
                "close",
                "from_conn_string",
                "get_next_version",
                "__init__",
                "stats",
            )
        }
    )
    for sync_name, async_name in pairs.items():
        s = inspect.signature(getattr(PostgresSaver, sync_name))
        a = inspect.signature(getattr(AsyncPostgresSaver, async_name))
        assert list(s.parameters) == list(a.parameters), sync_name
        for name, p in s.parameters.items():
            assert p.kind == a.parameters[name].kind, (sync_name, name)
            assert p.default == a.parameters[name].default, (sync_name, name)
    for name in AsyncPostgresSaver._BRIDGED:
        assert inspect.signature(getattr(PostgresSaver, name)) == inspect.signature(
            getattr(AsyncPostgresSaver, name)
        )
        assert getattr(AsyncPostgresSaver, name).__doc__ == getattr(PostgresSaver, name).__doc__
    public_sync = {n for n in dir(PostgresSaver) if not n.startswith("_")}
    public_async = {n for n in dir(AsyncPostgresSaver) if not n.startswith("_")}
    # every sync method whose coroutine twin the async saver defines is bridged (none is left
    # to BaseCheckpointSaver's, which raises NotImplementedError)
    own = vars(AsyncPostgresSaver)
    assert {n for n in public_sync if f"a{n}" in own} == set(AsyncPostgresSaver._BRIDGED)
    # the bridges typed for type checkers (saver_async.py, under TYPE_CHECKING) are all made
    source = Path(inspect.getfile(AsyncPostgresSaver)).read_text(encoding="utf-8")
    block = source.split("if TYPE_CHECKING:", 1)[1].split("# [/async-only]", 1)[0]
    typed = set(re.findall(r"^ +(\w+): Callable", block, re.MULTILINE))
    assert typed, "no typed bridges found"
    assert typed <= set(AsyncPostgresSaver._BRIDGED)
    assert public_sync - public_async == set()
    # the async saver adds its loop and the async twins of our own extensions
    assert public_async - public_sync <= {
        "loop",
        "aretention",
        "areencrypt",
        "aimport_official",
        "ahealthcheck",
        "asearch_threads",
    }


def test_versions_are_compatible_with_the_official_format(saver: PostgresSaver) -> None:
    v1 = saver.get_next_version(None, None)
    v2 = saver.get_next_version(v1, None)
    assert v1.startswith("0" * 31 + "1.")
    assert v2.startswith("0" * 31 + "2.")
    assert v1 < v2
    assert saver.get_next_version(7, None).startswith("0" * 31 + "8.")  # type: ignore[arg-type]


# ---------------------------------------------------------------- review regressions


def test_float_and_int_versions_find_their_values(saver: PostgresSaver) -> None:
    versions = {
        "tiny": 1e-7,
        "huge": 1e20,
        "half": 2.5,
        "int": 3,
        "str": "00000000000000000000000000000001.5",
    }
    cp = checkpoint({k: f"value-{k}" for k in versions}, versions)
    stored = saver.put(config("t"), cp, {}, versions)
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {k: f"value-{k}" for k in versions}
    (listed,) = saver.list(config("t"))
    assert listed.checkpoint["channel_values"] == {k: f"value-{k}" for k in versions}
    assert listed.checkpoint["channel_versions"] == versions


def test_a_clone_shares_the_open_state(db_dsn: str) -> None:
    """LangGraph clones savers (with_allowlist in strict msgpack mode), possibly before open()."""
    saver = PostgresSaver.from_conn_string(
        db_dsn, serde=JsonPlusSerializer(allowed_msgpack_modules=None)
    )
    clone = saver.with_allowlist([("some.module", "Thing")])
    assert clone is not saver
    saver.open()
    try:
        clone.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(config("t")) is not None
    finally:
        saver.close()
    with pytest.raises(SaverClosedError):
        clone.get_tuple(config("t"))


def test_reopening_a_closed_saver_is_a_clear_error(db_dsn: str) -> None:
    saver = PostgresSaver.from_conn_string(db_dsn)
    with saver:
        pass
    with pytest.raises(SaverClosedError, match="create a new saver"), saver:
        pass


def test_surrogates_and_non_string_keys(saver: PostgresSaver, db_dsn: str) -> None:
    with pytest.raises(InvalidInputError, match="surrogate"):
        saver.put(config("bad\ud800"), checkpoint(), {}, {})
    assert count(db_dsn, "pgsaver_checkpoints") == 0
    # a lone surrogate would come back changed (as "?"): refused, naming where (issue 14)
    with pytest.raises(InvalidInputError, match=r"metadata\['odd'\] contains a lone surrogate"):
        saver.put(config("t"), checkpoint(), {"odd": "x\ud800y"}, {})  # type: ignore[arg-type]
    assert count(db_dsn, "pgsaver_checkpoints") == 0
    metadata = {"keys": {1: "one", (2, 3): "pair"}}
    stored = saver.put(config("t"), checkpoint(), metadata, {})  # type: ignore[arg-type]
    tup = saver.get_tuple(stored)
    assert tup is not None
    # non-string keys come back exactly
    assert tup.metadata["keys"] == {1: "one", (2, 3): "pair"}  # type: ignore[typeddict-item]


async def test_a_cancelled_call_raises_cancelled_error(db_dsn: str) -> None:
    async with (
        await psycopg.AsyncConnection.connect(db_dsn) as conn,
        await psycopg.AsyncConnection.connect(db_dsn) as blocker,
    ):
        saver = AsyncPostgresSaver(conn)
        cp = checkpoint({"a": 1})
        await blocker.execute(
            "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
            " channel_versions, metadata) VALUES ('t', '', %s, 'x', '', '{}', '{}')",
            (cp["id"],),
        )
        task = asyncio.create_task(saver.aput(config("t"), cp, {}, {"a": 1}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await blocker.rollback()
        # the connection is usable again (or closed), never left in autocommit by us
        if not conn.closed:
            assert conn.autocommit is False
            await saver.aput(config("t"), cp, {}, {"a": 1})
            assert await saver.aget_tuple(config("t")) is not None


def test_a_terminated_backend_surfaces_the_driver_error(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn, psycopg.connect(db_dsn, autocommit=True) as admin:
        saver = PostgresSaver(conn)
        saver.put(config("t"), checkpoint(), {}, {})
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError) as info:
            saver.get_tuple(config("t"))
        assert not isinstance(info.value, psycopg.InterfaceError)
        assert conn.closed or conn.broken


def test_writes_order_does_not_depend_on_the_database_collation(pg_server: Any) -> None:
    """On an ICU-collated database, ids and task paths still sort by code point (writes_sort_key)."""
    from conftest import _drop_db

    name = "lgps_icu_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        try:
            admin.execute(
                f"CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
            )
        except psycopg.Error as exc:  # pragma: no cover - servers built without ICU
            pytest.skip(f"no ICU collation on this server: {exc}")
    try:
        with PostgresSaver.from_conn_string(pg_server.dsn_for(name)) as saver:
            saver.setup()
            stored = saver.put(config("t"), checkpoint(), {}, {})
            for path, task in [("~b", "B"), ("~B", "a"), ("~_", "x"), ("~a", "b")]:
                saver.put_writes(stored, [("c", f"{path}/{task}")], task, path)
            tup = saver.get_tuple(stored)
            assert tup is not None
            got = [w[2] for w in tup.pending_writes or []]
            expected = sorted(got, key=lambda v: tuple(v.split("/")))
            assert got == expected == ["~B/a", "~_/x", "~a/b", "~b/B"]
    finally:
        _drop_db(pg_server, name)


@pytest.mark.parametrize("batched", [False, True])
def test_delete_thread_waits_for_a_put_in_flight_and_removes_what_it_wrote(
    db_dsn: str, batched: bool
) -> None:
    """delete_thread takes the thread's lock exclusively (migration 0016's function, and the
    batched form it falls back to when the server's statement_timeout cuts the call short): a put
    still running (it holds the lock shared, and has inserted its checkpoint) commits first, and
    the delete removes that checkpoint too, instead of leaving it without its parent's values."""
    from helpers import parts_of

    from langgraph_pg_saver.checkpoint import lifecycle as _lifecycle
    from langgraph_pg_saver.db.sql import raw_queries

    lock_class = raw_queries()["_lock_class"].strip().splitlines()[-1]
    with PostgresSaver.from_conn_string(db_dsn, list_storage="elements") as saver:
        saver.setup()
        cfg = config("d")
        for i in range(3):
            cp = checkpoint({"messages": [f"m{j}" for j in range(i + 1)]}, {"messages": i + 1})
            cfg = saver.put(cfg, cp, {}, {"messages": i + 1})
        with psycopg.connect(db_dsn) as put:  # a put in flight
            put.execute(f"SELECT pg_advisory_xact_lock_shared({lock_class}, hashtext('d'))")
            put.execute(
                "INSERT INTO pgsaver_checkpoints SELECT (jsonb_populate_record(c, "
                "jsonb_build_object('checkpoint_id', 'zzz-in-flight'))).* "
                "FROM pgsaver_checkpoints AS c WHERE c.thread_id = 'd' LIMIT 1"
            )
            errors: list[BaseException] = []

            def delete() -> None:
                try:
                    if batched:
                        saver._driver.drive(_lifecycle.delete_thread(saver._q, "d"))
                    else:
                        saver.delete_thread("d")
                except BaseException as exc:
                    errors.append(exc)

            deleter = threading.Thread(target=delete)
            deleter.start()
            deleter.join(1.0)
            assert deleter.is_alive(), f"delete_thread did not wait for the put in flight {errors}"
            put.commit()
        deleter.join(30)
        assert not errors, errors
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pgsaver_checkpoints WHERE thread_id = 'd'"
            ).fetchone()
        assert left == (0,)
        assert parts_of(db_dsn, "d") == (0, 0, 0)
