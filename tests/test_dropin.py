"""Drop-in behaviours of the official saver (issue 14), sync and async on a real Postgres."""

from __future__ import annotations

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
