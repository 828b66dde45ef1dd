"""Drop-in behaviours of the official saver (issue 14), sync and async on a real Postgres."""

from __future__ import annotations

import collections
import dataclasses
import re
import uuid
from typing import Any

import pytest
from helpers import checkpoint, config

from langgraph_pg_saver import AsyncPostgresSaver, InvalidInputError, PostgresSaver

# ---------------------------------------------------------------- ids


def test_an_int_thread_id_is_the_same_thread_as_its_string(saver: PostgresSaver) -> None:
    stored = saver.put(
        {"configurable": {"thread_id": 1, "checkpoint_ns": ""}}, checkpoint({"a": 1}), {}, {"a": 1}
    )
    assert stored["configurable"]["thread_id"] == "1"
    by_str = saver.get_tuple(config("1"))
    by_int = saver.get_tuple({"configurable": {"thread_id": 1}})
    assert by_str is not None
    assert by_int is not None
    assert by_str.config == by_int.config
    assert [t.config for t in saver.list({"configurable": {"thread_id": 1}})] == [by_str.config]
    saver.put_writes(
        {"configurable": {"thread_id": 1, "checkpoint_ns": "", **_cid(stored)}}, [("a", 2)], "task"
    )
    again = saver.get_tuple(config("1"))
    assert again is not None
    assert again.pending_writes == [("task", "a", 2)]
    saver.delete_thread(1)  # type: ignore[arg-type]
    assert saver.get_tuple(config("1")) is None


def test_a_uuid_thread_id_is_its_string(saver: PostgresSaver) -> None:
    tid = uuid.uuid4()
    saver.put({"configurable": {"thread_id": tid}}, checkpoint({"a": 1}), {}, {"a": 1})
    assert saver.get_tuple(config(str(tid))) is not None


def _cid(stored: Any) -> dict[str, Any]:
    return {"checkpoint_id": stored["configurable"]["checkpoint_id"]}


BAD_IDS = [["a"], ("a",), {"a": 1}, object(), 1.5, True, b"raw", bytearray(b"x")]


@pytest.mark.parametrize("bad", BAD_IDS, ids=lambda b: type(b).__name__)
def test_other_ids_are_refused_before_anything_is_written(
    saver: PostgresSaver, bad: object, db_dsn: str
) -> None:
    with pytest.raises(InvalidInputError, match="thread_id must be a str"):
        saver.put({"configurable": {"thread_id": bad}}, checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(InvalidInputError, match="thread_id must be a str"):
        saver.get_tuple({"configurable": {"thread_id": bad}})
    with pytest.raises(InvalidInputError, match="thread_id must be a str"):
        list(saver.list({"configurable": {"thread_id": bad}}))
    with pytest.raises(InvalidInputError, match="thread_id must be a str"):
        saver.delete_thread(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="must be a str"):
        saver.prune([bad])  # type: ignore[list-item]
    stored = saver.put(config("ok"), checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(InvalidInputError, match="task_id must be a str"):
        saver.put_writes(stored, [("a", 1)], bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="checkpoint_id must be a str"):
        saver.get_tuple({"configurable": {"thread_id": "ok", "checkpoint_id": bad}})
    tup = saver.get_tuple(config("ok"))
    assert tup is not None
    assert tup.pending_writes == []
    assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == ["ok"]


@pytest.mark.parametrize("not_a_config", ["thread-1", 1, ["thread-1"]])
def test_a_config_that_is_not_a_dict_is_refused(saver: PostgresSaver, not_a_config: Any) -> None:
    with pytest.raises(InvalidInputError, match="config must be a RunnableConfig dict"):
        saver.get_tuple(not_a_config)
    with pytest.raises(InvalidInputError, match="config must be a RunnableConfig dict"):
        list(saver.list(not_a_config))
    with pytest.raises(InvalidInputError, match="config must be a RunnableConfig dict"):
        saver.put(not_a_config, checkpoint({"a": 1}), {}, {"a": 1})
    with pytest.raises(InvalidInputError, match="before must be a RunnableConfig dict"):
        list(saver.list(None, before=not_a_config))
    with pytest.raises(InvalidInputError, match=r"\['configurable'\] must be a dict"):
        saver.get_tuple({"configurable": not_a_config})


async def test_async_ids_and_configs(asaver: AsyncPostgresSaver) -> None:
    await asaver.aput({"configurable": {"thread_id": 7}}, checkpoint({"a": 1}), {}, {"a": 1})
    got = await asaver.aget_tuple(config("7"))
    assert got is not None
    assert got.config["configurable"]["thread_id"] == "7"
    with pytest.raises(InvalidInputError, match="thread_id must be a str"):
        await asaver.aget_tuple({"configurable": {"thread_id": ["7"]}})
    with pytest.raises(InvalidInputError, match="config must be a RunnableConfig dict"):
        await asaver.aget_tuple("7")  # type: ignore[arg-type]
    await asaver.adelete_thread(7)  # type: ignore[arg-type]
    assert await asaver.aget_tuple(config("7")) is None


# ---------------------------------------------------------------- writes before their checkpoint


def test_writes_for_a_checkpoint_not_stored_yet_are_kept(saver: PostgresSaver) -> None:
    """As the official saver does: put_writes does not check that its checkpoint exists (LangGraph
    always writes after put; tools and imports may write first). They become the checkpoint's
    pending writes once it is stored."""
    cp = checkpoint({"a": 1})
    target = {"configurable": {"thread_id": "w", "checkpoint_ns": "", "checkpoint_id": cp["id"]}}
    saver.put_writes(target, [("a", 5), ("__interrupt__", "stop")], "task")
    assert saver.get_tuple(config("w")) is None
    saver.put(config("w"), cp, {}, {"a": 1})
    tup = saver.get_tuple(config("w"))
    assert tup is not None
    assert sorted(tup.pending_writes or []) == [("task", "__interrupt__", "stop"), ("task", "a", 5)]


# ---------------------------------------------------------------- a parent that was never stored


def _rows(dsn: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def _missing_parent(thread: str) -> Any:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": "nope"}}


def test_put_with_a_parent_never_stored_is_stored(saver: PostgresSaver, db_dsn: str) -> None:
    stored = saver.put(_missing_parent("p"), checkpoint({"a": 1}), {"step": 1}, {"a": 1})
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": 1}
    assert tup.parent_config is not None
    assert tup.parent_config["configurable"]["checkpoint_id"] == "nope"
    # unchanged channels whose values are stored (here by another checkpoint of the thread): stored
    # too, and those values were locked while the put ran (a deleter waits for it)
    cp = checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 1})
    child = saver.put(
        {"configurable": {"thread_id": "p", "checkpoint_ns": "", "checkpoint_id": "gone"}},
        cp,
        {},
        {"b": 1},
    )
    got = saver.get_tuple(child)
    assert got is not None
    assert got.checkpoint["channel_values"] == {"a": 1, "b": 2}
    assert _rows(
        db_dsn,
        "SELECT xmax::text <> '0' FROM pgsaver_blobs WHERE thread_id = 'p' AND channel = 'a'",
    ) == [(True,)]


def test_put_with_a_parent_never_stored_and_unchanged_values_missing_is_refused(
    saver: PostgresSaver, db_dsn: str
) -> None:
    from langgraph_pg_saver import ParentCheckpointMissingError

    cp = checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 1})
    with pytest.raises(ParentCheckpointMissingError, match="nothing was written") as caught:
        saver.put(_missing_parent("q"), cp, {}, {"b": 1})
    err = caught.value
    parent = _missing_parent("q")["configurable"]
    assert (err.thread_id, err.checkpoint_ns, err.parent_id) == (
        "q",
        parent["checkpoint_ns"],
        parent["checkpoint_id"],
    )
    # what may have happened, in both orders of likelihood, and what to do
    text = str(err)
    assert "not stored on this server" in text
    assert "failover to a standby that had not replayed it" in text
    assert "asynchronous replication" in text
    assert "deleted or pruned meanwhile" in text
    assert "rerun the input" in text
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(0,)]
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_blobs") == [(0,)]


def test_the_usual_put_locks_no_value(saver: PostgresSaver, db_dsn: str) -> None:
    """The check of unchanged values runs only without a parent row: the hot path reads no blob."""
    first = saver.put(config("h"), checkpoint({"a": 1, "b": 1}), {}, {"a": 1, "b": 1})
    saver.put(first, checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 2}), {}, {"b": 2})
    assert _rows(db_dsn, "SELECT DISTINCT xmax::text FROM pgsaver_blobs") == [("0",)]


async def test_async_put_with_a_parent_never_stored(asaver: AsyncPostgresSaver) -> None:
    from langgraph_pg_saver import ParentCheckpointMissingError

    stored = await asaver.aput(_missing_parent("ap"), checkpoint({"a": 1}), {}, {"a": 1})
    tup = await asaver.aget_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": 1}
    with pytest.raises(ParentCheckpointMissingError):
        await asaver.aput(
            _missing_parent("aq"), checkpoint({"a": 1, "b": 2}, {"a": 1, "b": 1}), {}, {"b": 1}
        )


# ---------------------------------------------------------------- checkpoints before format 4

TASKS = "__pregel_tasks"


def _old_format_thread(saver: Any, thread: str, v: int) -> tuple[Any, Any]:
    """A parent with Send packets in its __pregel_tasks writes, and a child of format ``v``."""
    from langgraph.checkpoint.base import empty_checkpoint

    parent = empty_checkpoint()
    parent["channel_values"] = {"a": "x"}
    parent["channel_versions"] = {"a": "00000000000000000000000000000001.0.1"}
    p = saver.put(
        {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
        parent,
        {"step": 0},
        parent["channel_versions"],
    )
    saver.put_writes(p, [(TASKS, {"send": 2}), ("a", "y"), (TASKS, {"send": 3})], "task-b", "~b")
    saver.put_writes(p, [(TASKS, {"send": 1})], "task-a", "~a")
    child = empty_checkpoint()
    child["v"] = v
    child["channel_values"] = {"a": "y"}
    child["channel_versions"] = {"a": "00000000000000000000000000000002.0.5"}
    c = saver.put(p, child, {"step": 1}, child["channel_versions"])
    return p, c


def test_old_format_checkpoints_read_their_sends_as_the_official_saver_does(db_dsn: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
    from psycopg.rows import dict_row

    with (
        psycopg.connect(db_dsn, autocommit=True, row_factory=dict_row) as conn,
        PostgresSaver.from_conn_string(db_dsn) as ours,
    ):
        official = OfficialSaver(conn)
        official.setup()
        for v in (1, 2, 3, 4):
            got = {}
            for name, saver in (("ours", ours), ("official", official)):
                _, child = _old_format_thread(saver, f"old-{v}", v)
                tup = saver.get_tuple(child)
                listed = list(saver.list(config(f"old-{v}")))
                assert tup is not None
                got[name] = (
                    tup.checkpoint["channel_values"],
                    tup.checkpoint["channel_versions"],
                    [
                        (t.checkpoint["channel_values"], t.checkpoint["channel_versions"])
                        for t in listed
                    ],
                )
            assert got["ours"] == got["official"], v
            values, versions, _ = got["ours"]
            if v < 4:
                # the parent's Send packets, in task path order, with the newest version
                assert values[TASKS] == [{"send": 1}, {"send": 2}, {"send": 3}]
                assert versions[TASKS] == "00000000000000000000000000000002.0.5"
            else:
                assert TASKS not in values


async def test_async_old_format_checkpoint(asaver: AsyncPostgresSaver) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    parent = empty_checkpoint()
    p = await asaver.aput(config("ao"), parent, {}, {})
    await asaver.aput_writes(p, [(TASKS, "packet")], "t")
    child = empty_checkpoint()  # format 2, as empty_checkpoint() still writes
    c = await asaver.aput(p, child, {}, {})
    tup = await asaver.aget_tuple(c)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {TASKS: ["packet"]}
    assert TASKS in tup.checkpoint["channel_versions"]
    listed = [t async for t in asaver.alist(config("ao"))]
    assert listed[0].checkpoint["channel_values"] == {TASKS: ["packet"]}
    assert listed[1].checkpoint["channel_values"] == {}  # the parent has no parent


def test_a_checkpoint_without_channel_values_reads_as_empty(saver: PostgresSaver) -> None:
    cp: Any = checkpoint()
    del cp["channel_values"]
    stored = saver.put(config("nv"), cp, {}, {})
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {}


# ---------------------------------------------------------------- values the serializer refuses


def _unserializable() -> list[Any]:
    import threading

    return [lambda: 1, open(__file__), threading.Lock()]  # the file is closed by the test


def test_a_value_that_cannot_be_serialized_is_named_and_nothing_is_stored(
    saver: PostgresSaver, db_dsn: str
) -> None:
    for bad in _unserializable():
        try:
            cp = checkpoint({"fine": 1, "broken": bad})
            with pytest.raises(
                InvalidInputError, match="the value of channel 'broken' could not be serialized"
            ):
                saver.put(config("s"), cp, {}, {"fine": 1, "broken": 1})
            with pytest.raises(InvalidInputError, match="metadata could not be serialized"):
                saver.put(config("s"), checkpoint({"fine": 1}), {"obj": bad}, {"fine": 1})  # type: ignore[dict-item]
            assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(0,)]
            assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_blobs") == [(0,)]
            stored = saver.put(config("s"), checkpoint({"fine": 1}), {}, {"fine": 1})
            for writes in ([("ok", 1), ("bad", bad)], [("ok", 1), ("__interrupt__", bad)]):
                with pytest.raises(InvalidInputError, match=r"the write to channel '.+' could not"):
                    saver.put_writes(stored, writes, "task")
            assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_writes") == [(0,)]
            saver.delete_thread("s")
        finally:
            if hasattr(bad, "close"):
                bad.close()


def test_a_graph_whose_state_cannot_be_serialized_names_the_channel(saver: PostgresSaver) -> None:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        text: str
        handler: Any

    def node(state: State) -> State:
        return {"text": "x", "handler": lambda: 1}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    graph = builder.compile(checkpointer=saver)
    with pytest.raises(InvalidInputError, match="channel 'handler' could not be serialized"):
        graph.invoke({"text": "in"}, config("g"))


async def test_async_a_value_that_cannot_be_serialized(asaver: AsyncPostgresSaver) -> None:
    with pytest.raises(InvalidInputError, match="channel 'broken'"):
        await asaver.aput(config("as"), checkpoint({"broken": lambda: 1}), {}, {"broken": 1})
    assert await asaver.aget_tuple(config("as")) is None


# ---------------------------------------------------------------- connections in pipeline mode


def _pipeline_conn(dsn: str) -> Any:
    import psycopg
    from psycopg.rows import dict_row

    # as users of the official saver configure it
    return psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)


def _exercise(saver: Any) -> list[Any]:
    """Every operation, returning what it read."""
    from graphs import delta_chat

    out: list[Any] = []
    graph = delta_chat().compile(checkpointer=saver)
    cfg = config("chat")
    graph.invoke({"messages": ["hi"]}, cfg)
    graph.invoke({"messages": ["again"]}, cfg)
    out.append(graph.get_state(cfg).values)
    out.append(len(list(graph.get_state_history(cfg))))
    first = saver.put(config("t"), checkpoint({"a": 1}), {"source": "input", "k": "v"}, {"a": 1})
    saver.put_writes(first, [("a", 2), ("__interrupt__", "why")], "task")
    second = saver.put(first, checkpoint({"a": 3}, {"a": 2}), {"k": "w"}, {"a": 2})
    tup = saver.get_tuple(first)
    out.append((tup.checkpoint["channel_values"], sorted(tup.pending_writes)))
    out.append(saver.get_tuple(config("t")).config == second)
    out.append([t.metadata.get("k") for t in saver.list(config("t"))])
    out.append([t.metadata.get("k") for t in saver.list(None, filter={"k": "v"}, limit=5)])
    latest = saver.get_tuple(cfg)
    history = saver.get_delta_channel_history(config=latest.config, channels=["messages"])
    # task ids are random: compare what was written
    out.append({c: ([w[1:] for w in h["writes"]], h.get("seed")) for c, h in history.items()})
    saver.copy_thread("t", "t-copy")
    with pytest.raises(Exception, match="already has checkpoints"):
        saver.copy_thread("t", "t-copy")
    out.append(len(list(saver.list(config("t-copy")))))
    saver.prune(["t-copy"])
    out.append(len(list(saver.list(config("t-copy")))))
    out.append(saver.retention(keep_last=1, dry_run=True).as_dict()["checkpoints"])
    saver.delete_thread("t")
    out.append(saver.get_tuple(config("t")))
    saver.setup()  # current: the fast path reads, and changes nothing
    return out


def test_a_pipeline_connection_returns_what_a_plain_one_does(
    db_dsn: str, empty_db_dsn: str
) -> None:
    with _pipeline_conn(db_dsn) as conn:
        plain = _exercise(PostgresSaver(conn))
        conn.execute("TRUNCATE pgsaver_checkpoints, pgsaver_blobs, pgsaver_writes")
        with conn.pipeline() as pipe:
            piped = _exercise(PostgresSaver(conn, pipe=pipe))
    assert piped == plain
    assert plain[0]["messages"] == ["hi", "reply 1", "again", "reply 2"]
    # migrations cannot run in pipeline mode: a clear error at that call, nothing half-done
    with (
        _pipeline_conn(empty_db_dsn) as conn,
        conn.pipeline() as pipe,
        pytest.raises(Exception, match="pipeline mode"),
    ):
        PostgresSaver(conn, pipe=pipe).setup()
    with _pipeline_conn(empty_db_dsn) as conn:
        PostgresSaver(conn).setup()


async def test_async_a_pipeline_connection(db_dsn: str) -> None:
    import psycopg
    from graphs import delta_chat
    from psycopg.rows import dict_row

    async with (
        await psycopg.AsyncConnection.connect(
            db_dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn,
        conn.pipeline() as pipe,
    ):
        saver = AsyncPostgresSaver(conn, pipe=pipe)
        graph = delta_chat().compile(checkpointer=saver)
        cfg = config("achat")
        await graph.ainvoke({"messages": ["hi"]}, cfg)
        await graph.ainvoke({"messages": ["again"]}, cfg)
        state = await graph.aget_state(cfg)
        assert state.values["messages"] == ["hi", "reply 1", "again", "reply 2"]
        latest = await saver.aget_tuple(cfg)
        assert latest is not None
        history = await saver.aget_delta_channel_history(
            config=latest.config, channels=["messages"]
        )
        assert [w[2] for w in history["messages"]["writes"]]
        await saver.acopy_thread("achat", "achat-2")
        assert len([t async for t in saver.alist(config("achat-2"))]) == len(
            [t async for t in saver.alist(cfg)]
        )
        await saver.adelete_thread("achat-2")
        assert await saver.aget_tuple(config("achat-2")) is None


# ---------------------------------------------------------------- lone surrogates


def test_lone_surrogates_in_metadata_or_in_a_state_key_are_refused_naming_where(
    saver: PostgresSaver, db_dsn: str
) -> None:
    for metadata, where in (
        ({"note": "bad \ud800"}, r"metadata\['note'\]"),
        ({"nested": {"list": ["ok", "x\udfff"]}}, r"metadata\['nested'\]\['list'\]\[1\]"),
        ({"k\ud800": 1}, r"metadata: the key 'k\\ud800'"),
    ):
        with pytest.raises(InvalidInputError, match=where + " contains a lone surrogate"):
            saver.put(config("u"), checkpoint({"a": 1}), metadata, {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="the value of channel 'state' could not be"):
        saver.put(config("u"), checkpoint({"state": {"k\ud800": 1}}), {}, {"state": 1})
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        saver.put(config("u\ud800"), checkpoint({"a": 1}), {}, {"a": 1})
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(0,)]
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_blobs") == [(0,)]
    # other non-ASCII text is kept exactly
    stored = saver.put(config("u"), checkpoint({"a": "é 🙂"}), {"note": "ü 𝄞"}, {"a": 1})
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.checkpoint["channel_values"] == {"a": "é 🙂"}
    assert tup.metadata["note"] == "ü 𝄞"


def _surrogate_values() -> list[tuple[Any, str]]:
    from langchain_core.messages import AIMessage, HumanMessage

    @dataclasses.dataclass
    class Note:
        text: str

    return [
        ("bad \ud800", r"the value of channel 'a'"),
        ({"k": ["ok?", "x\udfff"]}, r"the value of channel 'a'\['k'\]\[1\]"),
        (
            [HumanMessage("fine?"), AIMessage("oops \ud83d")],
            r"the value of channel 'a'\[1\]\.content",
        ),
        (Note("n\udc00"), r"the value of channel 'a'\.text"),
        ({"s": frozenset({"\ud800"})}, r"the value of channel 'a'\['s'\]"),
        (collections.deque(["ok", "a\ud800b"]), r"the value of channel 'a'\[1\]"),
        ({("a\ud800b",): 1}, r"the value of channel 'a': the key"),
        (re.compile("a\ud800b"), r"the value of channel 'a'\.pattern"),
    ]


@pytest.mark.parametrize("encrypted", [False, True])
def test_lone_surrogates_in_values_and_writes_are_refused_naming_where(
    db_dsn: str, encrypted: bool
) -> None:
    serde: Any = None
    if encrypted:
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16)
    with PostgresSaver.from_conn_string(db_dsn, serde=serde) as saver:
        for value, where in _surrogate_values():
            with pytest.raises(InvalidInputError, match=where + ".* lone surrogate"):
                saver.put(config("s"), checkpoint({"a": value}), {}, {"a": 1})
        stored = saver.put(config("s"), checkpoint({"a": "ok"}), {}, {"a": 1})
        with pytest.raises(InvalidInputError, match=r"the write to channel 'w'\[0\] .*surrogate"):
            saver.put_writes(stored, [("w", ["\ud800"])], "task")
        # a question mark, or a message holding one, is no surrogate
        fine = [*range(3), "why?", {"q": "?"}]
        from langchain_core.messages import HumanMessage

        saver.put_writes(stored, [("w", fine), ("m", [HumanMessage("what?")])], "task")
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.pending_writes[0] == ("task", "w", fine)
        assert tup.pending_writes[1][2][0].content == "what?"
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(1,)]
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_writes") == [(2,)]


async def test_async_lone_surrogates_in_values_are_refused(asaver: AsyncPostgresSaver) -> None:
    value, _ = _surrogate_values()[2]
    with pytest.raises(InvalidInputError, match=r"the value of channel 'a'\[1\]\.content"):
        await asaver.aput(config("s"), checkpoint({"a": value}), {}, {"a": 1})
    assert await asaver.aget_tuple(config("s")) is None


def test_a_parent_never_stored_cannot_stand_in_for_deltachannel_ancestry(
    saver: PostgresSaver, db_dsn: str
) -> None:
    """A channel version without a stored value (a DeltaChannel between snapshots) is rebuilt from
    the ancestors' writes: without the parent, the state would silently come back incomplete."""
    from langgraph_pg_saver import ParentCheckpointMissingError

    # a new version without a value
    cp = checkpoint({}, {"messages": 1})
    with pytest.raises(ParentCheckpointMissingError):
        saver.put(_missing_parent("d"), cp, {}, {"messages": 1})
    # an unchanged version whose stored row is the no-value marker
    saver.put(config("d"), checkpoint({}, {"messages": 1}), {}, {"messages": 1})
    with pytest.raises(ParentCheckpointMissingError):
        saver.put(_missing_parent("d"), checkpoint({"x": 1}, {"messages": 1, "x": 1}), {}, {"x": 1})
    assert _rows(db_dsn, "SELECT count(*) FROM pgsaver_checkpoints") == [(1,)]
