"""Savers and stores pointed at a real hot standby (tests/clusters.py: a primary and a streaming
standby with synchronous replication): every read gives what the primary's saver gives, every
write raises ReadOnlyError and leaves the data as it was; with ``read_only=True`` the write is
refused before anything is sent, and the store's reads skip their TTL refresh."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import psycopg
import pytest
from clusters import Pair, own_pair
from graphs import approval, delta_chat, two_nodes, with_subgraph
from helpers import checkpoint, config, traced
from langgraph.store.base import GetOp, ListNamespacesOp, SearchOp, TTLConfig
from langgraph.types import Command

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    AsyncPostgresStore,
    ParentCheckpointMissingError,
    PostgresSaver,
    PostgresStore,
    ReadOnlyError,
    SchemaOutdatedError,
)

THREADS = ("chat", "ask", "two", "sub")
#: the run ids of the chat thread's five turns
RUNS = [str(uuid.UUID(int=i + 1)) for i in range(5)]
TTL = TTLConfig(default_ttl=60, refresh_on_read=True)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    """A synchronous pair holding a database ``t`` with threads of real graphs and store items,
    written through the primary and replayed by the standby."""
    with own_pair(synchronous=True) as pair:
        pair.primary.execute("CREATE DATABASE t")
        dsn = pair.primary.dsn_for("t")
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
            chat = delta_chat().compile(checkpointer=saver)
            for turn in range(5):
                chat.invoke({"messages": [f"hi {turn}"]}, {**_cfg("chat"), "run_id": RUNS[turn]})
            ask = approval().compile(checkpointer=saver)
            ask.invoke({"request": "leave"}, _cfg("ask"))  # stops at the interrupt
            two_nodes().compile(checkpointer=saver).invoke({"foo": "", "bar": []}, _cfg("two"))
            sub = with_subgraph().compile(checkpointer=saver)
            sub.invoke({"foo": "x", "inner_log": []}, _cfg("sub"))
        with PostgresStore.from_conn_string(dsn, ttl=TTL) as store:
            for i in range(5):
                store.put(("users", f"u{i}"), "prefs", {"theme": "dark", "i": i})
            store.put(("docs",), "readme", {"text": "hello"}, ttl=None)
        pair.wait_caught_up()
        yield pair


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def fingerprint(dsn: str) -> tuple[Any, ...]:
    """What the tables hold, row by row (hashed), and the store's expiry times."""
    with psycopg.connect(dsn) as conn:
        out = []
        for table, key in (
            ("pgsaver_checkpoints", "thread_id, checkpoint_ns, checkpoint_id"),
            ("pgsaver_blobs", "thread_id, checkpoint_ns, channel, version"),
            ("pgsaver_writes", "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"),
            ("pgsaver_store", "prefix, key"),
        ):
            row = conn.execute(
                f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY {key}), ''))"
                f" FROM {table} AS t"
            ).fetchone()
            out.append((table, row))
        return tuple(out)


def _reads(saver: PostgresSaver) -> dict[str, Any]:
    """Every read of the saver over the pair's threads, as comparable values."""
    got: dict[str, Any] = {}
    for thread in THREADS:
        tuples = list(saver.list(_cfg(thread)))
        got[f"list {thread}"] = tuples
        got[f"latest {thread}"] = saver.get_tuple(_cfg(thread))
        for tup in tuples:
            got[f"get {tup.config}"] = saver.get_tuple(tup.config)
        got[f"limit {thread}"] = list(saver.list(_cfg(thread), limit=2))
        if len(tuples) > 2:
            got[f"before {thread}"] = list(saver.list(_cfg(thread), before=tuples[1].config))
    got["all"] = list(saver.list(None))
    got["filter"] = list(saver.list(None, filter={"source": "loop"}, limit=3))
    for tup in saver.list(_cfg("chat")):
        got[f"delta {tup.config}"] = saver.get_delta_channel_history(
            config=tup.config, channels=["messages"]
        )
    graphs = {"chat": delta_chat(), "ask": approval(), "two": two_nodes(), "sub": with_subgraph()}
    for thread, builder in graphs.items():
        graph = builder.compile(checkpointer=saver)
        got[f"state {thread}"] = graph.get_state(_cfg(thread), subgraphs=True)
        got[f"history {thread}"] = list(graph.get_state_history(_cfg(thread)))
    return got


def _writes(saver: PostgresSaver) -> dict[str, Any]:
    """Every write of the saver, each a thunk (run them one by one)."""
    tup = saver.get_tuple(_cfg("chat"))
    assert tup is not None
    cp = checkpoint({"a": 1})
    ask = approval().compile(checkpointer=saver)
    return {
        "put": lambda: saver.put(tup.config, cp, {"step": 9}, {"a": 1}),
        "put (new thread)": lambda: saver.put(config("new"), cp, {}, {"a": 1}),
        "put_writes": lambda: saver.put_writes(tup.config, [("messages", ["x"])], "task"),
        "delete_thread": lambda: saver.delete_thread("chat"),
        "prune": lambda: saver.prune(["chat"]),
        "prune delete": lambda: saver.prune(["two"], strategy="delete"),
        "copy_thread": lambda: saver.copy_thread("chat", "copy"),
        "retention": lambda: saver.retention(keep_last=1),
        "delete_for_runs": lambda: saver.delete_for_runs([RUNS[-1]]),
        "invoke": lambda: (
            delta_chat().compile(checkpointer=saver).invoke({"messages": ["more"]}, _cfg("chat"))
        ),
        "resume": lambda: ask.invoke(Command(resume="yes"), _cfg("ask")),
    }


@pytest.mark.parametrize("read_only", [False, True], ids=["detected", "flagged"])
def test_a_saver_on_the_standby_reads_everything_and_refuses_every_write(
    pair: Pair, read_only: bool
) -> None:
    primary_dsn, standby_dsn = pair.primary.dsn_for("t"), pair.standby_dsn_for("t")
    before = fingerprint(standby_dsn)
    assert before == fingerprint(primary_dsn)
    with (
        PostgresSaver.from_conn_string(primary_dsn) as primary,
        PostgresSaver.from_conn_string(standby_dsn, read_only=read_only) as standby,
    ):
        standby.setup()  # the schema is current: the fast path, one SELECT
        standby.setup(check=True)
        expected = _reads(primary)
        got = _reads(standby)
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            assert got[key] == value, key
        # dry runs read: they work on a standby
        assert standby.prune(["chat"], dry_run=True) == primary.prune(["chat"], dry_run=True)
        assert standby.retention(keep_last=1, dry_run=True) == primary.retention(
            keep_last=1, dry_run=True
        )
        refused = {}
        for name, write in _writes(standby).items():
            with pytest.raises(ReadOnlyError) as caught:
                write()
            refused[name] = caught.value
        for name, err in refused.items():
            assert err.flagged is read_only, name
            assert err.server == f"127.0.0.1:{pair.standby.port}/t", (name, err.server)
            assert "read_only=True" in str(err), name
            assert "target_session_attrs=read-write" in str(err), name
            if read_only:
                assert err.operation, name
            else:
                assert err.standby is True, name
                assert "hot standby" in str(err), name
        if read_only:
            assert refused["prune"].operation == "prune"
            assert refused["put_writes"].operation == "put_writes"
    assert fingerprint(standby_dsn) == before
    assert fingerprint(primary_dsn) == before


def _async_writes(saver: AsyncPostgresSaver, at: Any) -> list[Callable[[], Awaitable[Any]]]:
    cp = checkpoint({"a": 1})
    chat = delta_chat().compile(checkpointer=saver)
    return [
        lambda: saver.aput(at, cp, {}, {"a": 1}),
        lambda: saver.aput_writes(at, [("a", 1)], "task"),
        lambda: saver.adelete_thread("chat"),
        lambda: saver.aprune(["chat"]),
        lambda: saver.acopy_thread("chat", "copy"),
        lambda: saver.aretention(keep_last=1),
        lambda: saver.adelete_for_runs([RUNS[-1]]),
        lambda: chat.ainvoke({"messages": ["x"]}, _cfg("chat")),
    ]


async def test_an_async_saver_on_the_standby(pair: Pair) -> None:
    primary_dsn, standby_dsn = pair.primary.dsn_for("t"), pair.standby_dsn_for("t")
    before = fingerprint(standby_dsn)
    for read_only in (False, True):
        async with (
            AsyncPostgresSaver.from_conn_string(primary_dsn) as primary,
            AsyncPostgresSaver.from_conn_string(standby_dsn, read_only=read_only) as standby,
        ):
            await standby.setup()
            await standby.setup(check=True)
            for thread in THREADS:
                expected = [t async for t in primary.alist(_cfg(thread))]
                assert [t async for t in standby.alist(_cfg(thread))] == expected
                assert await standby.aget_tuple(_cfg(thread)) == expected[0]
                graph = delta_chat().compile(checkpointer=standby)
                if thread == "chat":
                    assert await graph.aget_state(_cfg(thread)) == await delta_chat().compile(
                        checkpointer=primary
                    ).aget_state(_cfg(thread))
                    for tup in expected:
                        assert await standby.aget_delta_channel_history(
                            config=tup.config, channels=["messages"]
                        ) == await primary.aget_delta_channel_history(
                            config=tup.config, channels=["messages"]
                        )
            for write in _async_writes(standby, expected[0].config):
                with pytest.raises(ReadOnlyError) as caught:
                    await write()
                assert caught.value.flagged is read_only
    assert fingerprint(standby_dsn) == before


def _store_reads(store: PostgresStore) -> dict[str, Any]:
    return {
        "get": [store.get(("users", f"u{i}"), "prefs") for i in range(5)],
        "get docs": store.get(("docs",), "readme"),
        "search": store.search(("users",), limit=10),
        "search filter": store.search(("users",), filter={"i": 3}),
        "search all": store.search((), limit=20),
        "namespaces": store.list_namespaces(),
        "namespaces prefix": store.list_namespaces(prefix=("users",)),
        "batch": store.batch(
            [
                GetOp(("users", "u2"), "prefs"),
                SearchOp(("users",), filter={"theme": "dark"}, limit=3),
                ListNamespacesOp(max_depth=1),
            ]
        ),
    }


@pytest.mark.parametrize("read_only", [False, True], ids=["detected", "flagged"])
def test_a_store_on_the_standby_reads_with_refresh_and_refuses_writes(
    pair: Pair, read_only: bool
) -> None:
    primary_dsn, standby_dsn = pair.primary.dsn_for("t"), pair.standby_dsn_for("t")
    before = fingerprint(standby_dsn)
    with PostgresStore.from_conn_string(standby_dsn, ttl=TTL, read_only=read_only) as standby:
        standby.setup()
        standby.setup(check=True)
        got = _store_reads(standby)
        # and twice: a detected read-only server is not asked to refresh again for a while
        again = _store_reads(standby)
    with PostgresStore.from_conn_string(primary_dsn, ttl=TTL) as primary:
        # the primary's own reads, without refreshing (that would move its expiry times)
        expected = {
            "get": [primary.get(("users", f"u{i}"), "prefs", refresh_ttl=False) for i in range(5)],
            "get docs": primary.get(("docs",), "readme", refresh_ttl=False),
            "search": primary.search(("users",), limit=10, refresh_ttl=False),
            "search filter": primary.search(("users",), filter={"i": 3}, refresh_ttl=False),
            "search all": primary.search((), limit=20, refresh_ttl=False),
            "namespaces": primary.list_namespaces(),
            "namespaces prefix": primary.list_namespaces(prefix=("users",)),
            "batch": primary.batch(
                [
                    GetOp(("users", "u2"), "prefs", refresh_ttl=False),
                    SearchOp(("users",), filter={"theme": "dark"}, limit=3, refresh_ttl=False),
                    ListNamespacesOp(max_depth=1),
                ]
            ),
        }
    assert got == expected
    assert again == expected
    assert all(item is not None for item in got["get"])
    assert len(got["search"]) == 5
    with PostgresStore.from_conn_string(standby_dsn, ttl=TTL, read_only=read_only) as standby:
        for name, write in {
            "put": lambda: standby.put(("users", "u0"), "prefs", {"theme": "light"}),
            "delete": lambda: standby.delete(("users", "u0"), "prefs"),
            "sweep_ttl": standby.sweep_ttl,
        }.items():
            with pytest.raises(ReadOnlyError) as caught:
                write()
            assert caught.value.flagged is read_only, name
            assert caught.value.server == f"127.0.0.1:{pair.standby.port}/t"
        if read_only:
            with pytest.raises(ReadOnlyError):
                standby.start_ttl_sweeper()
    assert fingerprint(standby_dsn) == before


async def test_an_async_store_on_the_standby(pair: Pair) -> None:
    standby_dsn = pair.standby_dsn_for("t")
    before = fingerprint(standby_dsn)
    for read_only in (False, True):
        async with AsyncPostgresStore.from_conn_string(
            standby_dsn, ttl=TTL, read_only=read_only
        ) as standby:
            await standby.setup()
            item = await standby.aget(("users", "u1"), "prefs")
            assert item is not None
            assert item.value == {"theme": "dark", "i": 1}
            assert len(await standby.asearch(("users",))) == 5
            assert ("docs",) in await standby.alist_namespaces()
            with pytest.raises(ReadOnlyError) as caught:
                await standby.aput(("users", "u1"), "prefs", {})
            assert caught.value.flagged is read_only
            with pytest.raises(ReadOnlyError):
                await standby.adelete(("users", "u1"), "prefs")
            with pytest.raises(ReadOnlyError):
                await standby.sweep_ttl()
            if read_only:
                with pytest.raises(ReadOnlyError):
                    await standby.start_ttl_sweeper()
    assert fingerprint(standby_dsn) == before


def test_round_trips_on_a_primary_and_a_standby(pair: Pair) -> None:
    """The primary's read with refresh keeps its two round trips (the read, the refresh); on a
    standby a flagged store sends the read only; a store that finds out sends the refusal once
    (and asks whether the server is a standby), then only its reads; a flagged saver's write
    sends nothing."""
    with psycopg.connect(pair.primary.dsn_for("t"), autocommit=True) as conn:
        store = PostgresStore(conn, ttl=TTL)
        store.get(("docs",), "readme")  # the connection's first use asks whether it is pooled
        with traced(conn.pgconn) as primary_get:
            assert store.get(("users", "u0"), "prefs") is not None
    pair.wait_caught_up()
    with psycopg.connect(pair.standby_dsn_for("t"), autocommit=True) as conn:
        flagged = PostgresStore(conn, ttl=TTL, read_only=True)
        flagged.get(("docs",), "readme")
        with traced(conn.pgconn) as flagged_get:
            assert flagged.get(("users", "u0"), "prefs") is not None
        detected = PostgresStore(conn, ttl=TTL)
        with traced(conn.pgconn) as first_get:
            assert detected.get(("users", "u0"), "prefs") is not None
        with traced(conn.pgconn) as next_get:
            assert detected.get(("users", "u1"), "prefs") is not None
        saver = PostgresSaver(conn, read_only=True)
        with traced(conn.pgconn) as refused_put:
            with pytest.raises(ReadOnlyError):
                saver.put(config("x"), checkpoint({"a": 1}), {}, {"a": 1})
            with pytest.raises(ReadOnlyError):
                flagged.put(("users", "u0"), "prefs", {})
    counts = {
        "primary get": primary_get.round_trips,
        "flagged get": flagged_get.round_trips,
        "detected first get": first_get.round_trips,
        "detected next get": next_get.round_trips,
        "flagged writes": refused_put.round_trips,
    }
    assert counts == {
        "primary get": 2,
        "flagged get": 1,
        "detected first get": 3,
        "detected next get": 1,
        "flagged writes": 0,
    }


def _lag(pair: Pair, puts: int = 200) -> str:
    """Puts through the primary, each read back at once through a read-only saver on the standby
    (until it is there): how many were there at the first read, and how long the others took.
    Every put is visible on the standby in the end, and read the same as on the primary."""
    primary_dsn, standby_dsn = pair.primary.dsn_for("t"), pair.standby_dsn_for("t")
    at_once = 0
    waits: list[float] = []
    with (
        PostgresSaver.from_conn_string(primary_dsn) as primary,
        PostgresSaver.from_conn_string(standby_dsn, read_only=True) as standby,
    ):
        standby.get_tuple(config("warm-up"))
        for i in range(puts):
            stored = primary.put(config(f"lag-{i}"), checkpoint({"a": i}), {}, {"a": 1})
            started = time.monotonic()
            if standby.get_tuple(stored) is not None:
                at_once += 1
                continue
            while standby.get_tuple(stored) is None:
                time.sleep(0.0002)
            waits.append(time.monotonic() - started)
        pair.wait_caught_up()
        for i in range(puts):
            assert standby.get_tuple(config(f"lag-{i}")) == primary.get_tuple(config(f"lag-{i}"))
        primary.prune([f"lag-{i}" for i in range(puts)], strategy="delete")
    pair.wait_caught_up()
    waits.sort()
    late = (
        f"; the other {len(waits)} after a median {waits[len(waits) // 2] * 1000:.2f} ms "
        f"(max {waits[-1] * 1000:.2f} ms)"
        if waits
        else ""
    )
    return f"{at_once} of {puts} puts visible on the standby at the first read{late}"


def test_replication_lag_seen_by_a_standby_reader(pair: Pair) -> None:
    """Read-your-writes: synchronous_commit=on waits for the standby to flush the WAL, not to
    replay it, so a put acknowledged by the primary may not be visible on the standby yet (the
    figure printed); after wait_caught_up (replay reached the primary's WAL position) it is."""
    print(f"synchronous replication: {_lag(pair)}")


def test_replication_lag_with_asynchronous_replication() -> None:
    with own_pair(synchronous=False) as pair:
        pair.primary.execute("CREATE DATABASE t")
        with PostgresSaver.from_conn_string(pair.primary.dsn_for("t")) as saver:
            saver.setup()
        pair.wait_caught_up()
        print(f"asynchronous replication: {_lag(pair)}")


def test_a_read_only_database_on_a_primary(db_dsn: str) -> None:
    """default_transaction_read_only on a primary: the same error, saying it is no standby."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('default_transaction_read_only', 'on', false)")
        saver = PostgresSaver(conn)
        with pytest.raises(ReadOnlyError) as caught:
            saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert caught.value.standby is False
        assert "default_transaction_read_only" in str(caught.value)
        assert caught.value.server == f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}"
        assert saver.get_tuple(config("t")) is None


def test_a_refresh_refused_inside_the_callers_transaction_is_raised(db_dsn: str) -> None:
    """A store on the caller's connection, inside the caller's read-only transaction: the TTL
    refresh the server refuses aborts that transaction, so the read raises rather than return
    as if nothing happened (and the store does not take the server for a standby)."""
    with PostgresStore.from_conn_string(db_dsn, ttl=TTL) as store:
        store.put(("a",), "k", {"v": 1})
    with psycopg.connect(db_dsn) as conn:
        store = PostgresStore(conn, ttl=TTL)
        conn.execute("SET TRANSACTION READ ONLY")
        with pytest.raises(ReadOnlyError):
            store.get(("a",), "k")
        conn.rollback()
        # outside that transaction the refresh runs again at once
        item = store.get(("a",), "k")
        assert item is not None
        assert item.value == {"v": 1}
        conn.commit()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # a write there: the error names the caller's read-only transaction among the causes
        saver = PostgresSaver(conn)
        conn.execute("SET TRANSACTION READ ONLY")
        with pytest.raises(ReadOnlyError) as caught:
            saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert caught.value.standby is None  # the aborted transaction cannot ask
        assert "read-only transaction of the caller's" in str(caught.value)
        conn.rollback()


def test_a_failover_that_lost_the_parent_says_so() -> None:
    """Asynchronous replication: the standby is down while the primary acknowledges a checkpoint,
    then the primary dies and the standby is promoted without it. The run's next put names that
    parent: refused, with an error that says a failover may have lost it."""
    with own_pair(synchronous=False) as pair:
        pair.primary.execute("CREATE DATABASE t")
        with PostgresSaver.from_conn_string(pair.primary.dsn_for("t")) as saver:
            saver.setup()
            first = saver.put(config("run"), checkpoint({"a": 1, "b": 1}), {}, {"a": 1, "b": 1})
            pair.wait_caught_up()
            pair.standby.stop()
            second = saver.put(first, checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 2}), {}, {"b": 2})
        pair.primary.kill()
        pair.standby.start()
        pair.standby.promote()
        with PostgresSaver.from_conn_string(pair.standby.dsn_for("t")) as promoted:
            assert promoted.get_tuple(second) is None  # lost with the old primary
            assert promoted.get_tuple(first) is not None
            third = checkpoint({"a": 1, "b": 2}, {"a": 2, "b": 2})  # b kept from the lost one
            with pytest.raises(ParentCheckpointMissingError) as caught:
                promoted.put(second, third, {}, {"a": 2})
            err = caught.value
            assert (err.thread_id, err.checkpoint_ns) == ("run", "")
            assert err.parent_id == second["configurable"]["checkpoint_id"]
            assert "failover to a standby that had not replayed it" in str(err)
            assert promoted.get_tuple(config("run")) == promoted.get_tuple(first)


@pytest.mark.parametrize("cls", [PostgresSaver, PostgresStore], ids=lambda c: c.__name__)
def test_setup_on_a_standby_whose_schema_is_behind(pair: Pair, cls: Any) -> None:
    """Migrations to apply on a standby: the one error (flagged: before the lock is even asked
    for); a check-only setup reports the missing migrations as anywhere else."""
    pair.primary.execute(f"CREATE DATABASE behind_{cls.__name__.lower()}")
    pair.wait_caught_up()
    dsn = pair.standby_dsn_for(f"behind_{cls.__name__.lower()}")
    for read_only in (False, True):
        with cls.from_conn_string(dsn, read_only=read_only) as owner:
            with pytest.raises(ReadOnlyError) as caught:
                owner.setup()
            assert caught.value.operation == "setup"
            assert caught.value.flagged is read_only
            assert caught.value.standby is (None if read_only else True)
            with pytest.raises(SchemaOutdatedError):
                owner.setup(check=True)


def test_the_command_line_on_a_standby(pair: Pair) -> None:
    """The reading commands work on a standby; a writing one fails with the error in the command
    line's words, naming the server."""
    dsn = pair.standby_dsn_for("t")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_PG_DSN"}
        return subprocess.run(
            [sys.executable, "-m", "langgraph_pg_saver", "--dsn", dsn, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    for args in (("status",), ("threads",), ("history", "chat"), ("setup", "--check")):
        done = cli(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    done = cli("prune", "--keep-last", "1", "--yes")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"127.0.0.1:{pair.standby.port}/t is read-only: a hot standby" in done.stderr
    assert "Pass the primary's --dsn to write" in done.stderr
    assert "read_only=True" not in done.stderr
