"""On a connection that prepares nothing (behind a pooler, or prepare_threshold=None), put goes
through migration 0006's function, pgsaver_put; prepared, it stays one statement. get_tuple goes
through 0007's (as 0012 replaced it), pgsaver_get_tuple, on every pooled connection. Both ways store and read the same, and the rare paths (a
missing parent, a put stored again, many channels, a guarded put) behave the same."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
import pytest
from graphs import delta_chat, two_nodes
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_pg_saver import ConcurrentUpdateError, ParentCheckpointMissingError, PostgresSaver


def function_calls(dsn: str, name: str = "pgsaver_put") -> int:
    """Calls of our function ``name`` that the database's ended sessions have counted. A session
    flushes its counts as it exits, before it leaves pg_stat_activity; a client that closed its
    connection does not wait for that, so wait here until no other session is left."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            others = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            if others is not None and others[0] == 0:
                break
            time.sleep(0.02)
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = %s",
            (name,),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def counted(db_dsn: str) -> str:
    """The database, with its sessions counting calls of PL/pgSQL functions."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        name = conn.info.dbname
        conn.execute(f"ALTER DATABASE \"{name}\" SET track_functions = 'pl'")
    return db_dsn


def rows(dsn: str, thread: str) -> Any:
    with psycopg.connect(dsn) as conn:
        return (
            conn.execute(
                "SELECT checkpoint_id, parent_checkpoint_id, type, channel_versions, metadata"
                " FROM pgsaver_checkpoints WHERE thread_id = %s ORDER BY checkpoint_id",
                (thread,),
            ).fetchall(),
            conn.execute(
                "SELECT channel, type, length(blob) FROM pgsaver_blobs WHERE thread_id = %s"
                " ORDER BY channel, type, length(blob)",
                (thread,),
            ).fetchall(),
        )


@pytest.mark.parametrize("prepare", [None, 5])
def test_unprepared_puts_call_the_function_and_store_the_same(counted: str, prepare: Any) -> None:
    with PostgresSaver.from_conn_string(counted, prepare_threshold=prepare) as saver:
        for builder, thread in ((two_nodes, "plain"), (delta_chat, "delta")):
            graph = builder().compile(checkpointer=saver)
            for i in range(6):
                key = "bar" if builder is two_nodes else "messages"
                graph.invoke({key: [f"m{i}"]}, {"configurable": {"thread_id": thread}})
        with psycopg.connect(counted) as conn:
            puts = conn.execute("SELECT count(*) FROM pgsaver_checkpoints").fetchone()
        states = {
            t: b().compile(checkpointer=saver).get_state({"configurable": {"thread_id": t}}).values
            for b, t in ((two_nodes, "plain"), (delta_chat, "delta"))
        }
    # the saver's sessions have ended: their counts are flushed
    calls = function_calls(counted)
    reads = function_calls(counted, "pgsaver_get_tuple")
    assert puts is not None
    if prepare is None:
        assert calls == puts[0]  # every put went through the function
        assert reads >= 2  # the get_state calls above, and the graphs' own reads
    else:
        assert calls == 0  # prepared, put stays its statement
        # get_tuple calls the function on every pooled connection (its plans stay on the primary
        # key whatever the statistics were when the session made them: tests/test_stale_plans.py)
        assert reads >= 2
    assert states["plain"]["bar"][-3:] == ["m5", "a", "b"]
    assert states["delta"]["messages"][-1] == "reply 6"


def test_the_rare_paths_through_the_function(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=None) as saver:
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        first = empty_checkpoint()
        first["channel_values"] = {f"c{i}": f"v{i}" for i in range(12)}  # arrays: over 8 rows
        first["channel_versions"] = {f"c{i}": saver.get_next_version(None, None) for i in range(12)}
        stored = saver.put(
            config, first, {"source": "input", "step": -1}, first["channel_versions"]
        )
        assert saver.get_tuple(stored).checkpoint["channel_values"]["c11"] == "v11"  # type: ignore[union-attr]
        # stored again (a retry): the function's plain INSERT meets the row, the upsert takes over
        again = saver.put(
            config, first, {"source": "input", "step": -1, "again": True}, first["channel_versions"]
        )
        assert saver.get_tuple(again).metadata["again"] is True  # type: ignore[union-attr]
        # a parent that is not stored: the function stores nothing, put_orphan decides
        lost: Any = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "nope"}
        }
        child = empty_checkpoint()
        child["channel_values"] = {"c0": "x"}
        child["channel_versions"] = {"c0": saver.get_next_version(None, None)}
        whole = saver.put(lost, child, {"source": "loop", "step": 0}, child["channel_versions"])
        assert saver.get_tuple(whole).parent_config["configurable"]["checkpoint_id"] == "nope"  # type: ignore[union-attr,index]
        # ... and one whose state needs the missing parent is refused, nothing stored
        partial = empty_checkpoint()
        partial["channel_values"] = {"c0": "y"}
        partial["channel_versions"] = {"c0": "9", "kept": "3"}
        with pytest.raises(ParentCheckpointMissingError):
            saver.put(lost, partial, {"source": "loop", "step": 1}, {"c0": "9"})
        assert (
            saver.get_tuple(
                {
                    "configurable": {
                        "thread_id": "t",
                        "checkpoint_ns": "",
                        "checkpoint_id": partial["id"],
                    }
                }
            )
            is None
        )


def test_a_guarded_put_keeps_its_claim_unprepared(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(
        db_dsn, prepare_threshold=None, single_writer=True
    ) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "g"}}
        graph.invoke({"bar": ["a"]}, cfg)
        first = list(graph.get_state_history(cfg))[-1]
        graph.invoke({"bar": ["b"]}, cfg)
        with pytest.raises(ConcurrentUpdateError):
            graph.invoke({"bar": ["stale"]}, first.config)


def test_get_tuple_reads_the_same_through_the_function(db_dsn: str) -> None:
    """Every checkpoint of threads with pending writes, an interrupt, subgraph namespaces and a
    DeltaChannel, read by id and as the latest, through the function (prepared and not) and
    through the statements."""
    from graphs import approval_in_subgraph, with_subgraph

    with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=0) as saver:
        for builder, thread, given, turns in (
            (two_nodes, "plain", {"bar": ["x"]}, 3),
            (delta_chat, "delta", {"messages": ["hi"]}, 5),
            (approval_in_subgraph, "waiting", {"request": "r"}, 1),  # its interrupt in the child
            (with_subgraph, "sub", {"foo": "x"}, 2),
        ):
            graph = builder().compile(checkpointer=saver)
            for _ in range(turns):
                graph.invoke(given, {"configurable": {"thread_id": thread}})
        configs = [t.config for t in saver.list(None)]
    assert len(configs) > 10
    latest = [
        {
            "configurable": {
                "thread_id": c["configurable"]["thread_id"],
                "checkpoint_ns": c["configurable"]["checkpoint_ns"],
            }
        }
        for c in configs
    ]
    missing = [{"configurable": {"thread_id": "plain", "checkpoint_ns": "", "checkpoint_id": "x"}}]
    reads: dict[Any, list[Any]] = {}
    for prepare in (0, None):
        with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=prepare) as saver:
            reads[prepare] = [saver.get_tuple(c) for c in (*configs, *latest, *missing)]
    # the statements (get_tuple, get_tuple_id): what a connection of the caller's own runs
    with psycopg.connect(db_dsn, autocommit=True, prepare_threshold=0) as conn:
        own = PostgresSaver(conn)
        reads["statement"] = [own.get_tuple(c) for c in (*configs, *latest, *missing)]
    assert reads[0] == reads[None] == reads["statement"]
    assert reads[None][-1] is None
    assert any(t is not None and t.pending_writes for t in reads[None])
    assert {c["configurable"]["checkpoint_ns"] for c in configs} != {""}  # subgraph namespaces


@pytest.mark.parametrize("prepare", [0, None])
def test_a_schema_without_the_parent_check_falls_back_to_the_inline_check(
    db_dsn: str, prepare: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A schema migrated before 0011 (code deployed before its setup()): put's statements call
    pgsaver_parent_stored, which is not there; the saver says so once and sends the twins that
    check the parent inline, which store and refuse the same."""
    from helpers import checkpoint, config

    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute("DROP FUNCTION pgsaver_parent_stored")
    with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=prepare) as saver:
        with caplog.at_level("WARNING", logger="langgraph_pg_saver"):
            stored = saver.put(config("old"), checkpoint({"a": 1}), {}, {"a": 1})
            child = saver.put(stored, checkpoint({"a": 2}, {"a": 2}), {}, {"a": 2})
        said = [r for r in caplog.records if "server-side functions" in r.getMessage()]
        # unprepared, put calls pgsaver_put (0006), which checks the parent itself
        assert len(said) == (1 if prepare == 0 else 0), said
        assert saver.get_tuple(child).parent_config == stored  # type: ignore[union-attr]
        lost = config("old", "nope")
        with pytest.raises(ParentCheckpointMissingError):
            saver.put(lost, checkpoint({"a": 3}, {"a": 3, "b": 1}), {}, {"a": 3})


def test_delta_history_without_the_function_or_its_execute_sends_the_statement(
    db_dsn: str,
) -> None:
    """get_delta_channel_history calls migration 0011's pgsaver_delta_history; a role that may not
    execute it reads the same through the statement (as put and get_tuple fall back), and a
    schema without it, inside the caller's transaction, raises the missing function (not the
    aborted transaction's error) and reads through the statement in the next one."""
    cfg = {"configurable": {"thread_id": "d", "checkpoint_ns": ""}}
    role = f"lgps_delta_{uuid.uuid4().hex[:10]}"
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        graph = delta_chat().compile(checkpointer=saver)
        for i in range(4):
            graph.invoke({"messages": [f"hi{i}"]}, {"configurable": {"thread_id": "d"}})
        want = saver.get_delta_channel_history(config=cfg, channels=["messages"])
    assert want
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"'
        )
        admin.execute(
            "REVOKE EXECUTE ON FUNCTION pgsaver_delta_history(text, text, text, text[]) FROM PUBLIC"
        )
    try:
        with PostgresSaver.from_conn_string(f"{db_dsn} user={role}") as saver:
            assert saver.get_delta_channel_history(config=cfg, channels=["messages"]) == want
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute("DROP FUNCTION pgsaver_delta_history(text, text, text, text[])")
        with psycopg.connect(db_dsn) as conn:
            saver = PostgresSaver(conn)
            conn.execute("SELECT 1")  # the caller's transaction
            with pytest.raises(psycopg.errors.UndefinedFunction):
                saver.get_delta_channel_history(config=cfg, channels=["messages"])
            conn.rollback()
            assert saver.get_delta_channel_history(config=cfg, channels=["messages"]) == want
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
