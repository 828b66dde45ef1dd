"""One round trip per operation, counted on the wire (libpq trace), for both savers."""

from __future__ import annotations

import psycopg
import pytest
from helpers import checkpoint, config, traced
from psycopg.rows import dict_row

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver
from langgraph_pg_saver.db import policy


@pytest.fixture(autouse=True)
def _no_statistics_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables here are tiny, so a connection asks again whether they grew every
    STATS_RECHECK seconds: not within these counts, however slow the machine."""
    monkeypatch.setattr(policy, "STATS_RECHECK", 3600.0)


@pytest.mark.parametrize("autocommit", [True, False])
def test_sync_operations_take_one_round_trip(db_dsn: str, autocommit: bool) -> None:
    with psycopg.connect(db_dsn, autocommit=autocommit, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        cp = checkpoint({"a": "x" * 100, "b": [1, 2, 3]})
        with traced(conn.pgconn) as first:
            assert saver.get_tuple(config("none")) is None
        # a connection's first use also asks for the server's process id (a pooler?), once
        assert first.round_trips == 2
        with traced(conn.pgconn) as put:
            stored = saver.put(
                config("t"), cp, {"source": "input", "step": -1}, cp["channel_versions"]
            )
        with traced(conn.pgconn) as put_writes:
            saver.put_writes(stored, [("a", 1), ("b", 2), ("__resume__", 3)], "task-1", "path")
        # a write to __interrupt__ (or __error__) at a root checkpoint also marks the thread's
        # status (migration 0014): one more statement, on those calls only
        with traced(conn.pgconn) as marked:
            saver.put_writes(stored, [("__interrupt__", 3)], "task-2", "path")
        assert marked.round_trips == 2
        assert [t.status for t in saver.search_threads()] == ["interrupted"]
        with traced(conn.pgconn) as get_latest:
            assert saver.get_tuple(config("t")) is not None
        with traced(conn.pgconn) as get_by_id:
            assert saver.get_tuple(stored) is not None
        with traced(conn.pgconn) as listing:
            assert len(list(saver.list(config("t"), filter={"source": "input"}, limit=5))) == 1
        with traced(conn.pgconn) as delete:
            saver.delete_thread("t")
        assert saver.get_tuple(config("t")) is None
        counts = {
            "put": put.round_trips,
            "put_writes": put_writes.round_trips,
            "get_tuple latest": get_latest.round_trips,
            "get_tuple by id": get_by_id.round_trips,
            "list": listing.round_trips,
            "delete_thread": delete.round_trips,
        }
        print(counts)
        assert counts == dict.fromkeys(counts, 1)
        # the caller's connection settings are as they were
        assert conn.autocommit is autocommit
        assert conn.row_factory is dict_row


async def test_async_operations_take_one_round_trip(db_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_dsn) as conn:
        saver = AsyncPostgresSaver(conn)
        cp = checkpoint({"a": "x"})
        with traced(conn.pgconn) as first:
            assert await saver.aget_tuple(config("none")) is None
        assert first.round_trips == 2
        with traced(conn.pgconn) as put:
            stored = await saver.aput(config("t"), cp, {"step": 0}, cp["channel_versions"])
        with traced(conn.pgconn) as put_writes:
            await saver.aput_writes(stored, [("a", 1)], "task-1")
        with traced(conn.pgconn) as get:
            assert await saver.aget_tuple(config("t")) is not None
        with traced(conn.pgconn) as listing:
            assert len([t async for t in saver.alist(config("t"))]) == 1
        with traced(conn.pgconn) as delete:
            await saver.adelete_thread("t")
        assert [
            put.round_trips,
            put_writes.round_trips,
            get.round_trips,
            listing.round_trips,
            delete.round_trips,
        ] == [1, 1, 1, 1, 1]
        assert conn.autocommit is False


def test_setup_fast_path_is_one_query_without_a_lock(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        saver = PostgresSaver(conn)
        saver.get_tuple(config("none"))  # the connection's first use (see above)
        with traced(conn.pgconn) as t:
            saver.setup()
        assert t.round_trips == 1
        assert not any("advisory" in m for m in t.messages)
