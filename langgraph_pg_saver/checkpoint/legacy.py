"""Checkpoints of format 4 and older (LangGraph then kept Send packets as writes of the parent
checkpoint): what a read adds to them, as the official saver reads them. No I/O happens here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import Checkpoint, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint.keys import Params, next_version
from langgraph_pg_saver.checkpoint.reading import keys_params
from langgraph_pg_saver.checkpoint.rows import SendRow
from langgraph_pg_saver.codec.values import load_at

#: the channel LangGraph keeps Send packets in (``langgraph.checkpoint.serde.types.TASKS``)
TASKS = "__pregel_tasks"


def pending_sends_params(tuples: Sequence[CheckpointTuple]) -> Params | None:
    """The ``pending_sends`` parameters for the checkpoints of format < 4 among ``tuples`` that have
    a parent (their Send packets are the parent's __pregel_tasks writes), or None if there are none."""
    parents = {
        (c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"])
        for t in tuples
        if t.parent_config is not None and checkpoint_format(t.checkpoint) < 4
        for c in (t.parent_config["configurable"],)
    }
    if not parents:
        return None
    return keys_params(sorted(parents))


def checkpoint_format(checkpoint: Checkpoint) -> int:
    """The checkpoint's format version ``v`` (4, the current one, when it has none usable)."""
    v = checkpoint.get("v")
    return v if isinstance(v, int) and not isinstance(v, bool) else 4


def migrate_pending_sends(
    serde: SerializerProtocol, tuples: Sequence[CheckpointTuple], rows: Sequence[Sequence[Any]]
) -> None:
    """Give each checkpoint of format < 4 its parent's __pregel_tasks writes (rows of
    ``pending_sends``) as the value of that channel, with the newest of its versions, as the official
    saver reads such checkpoints. Changes the tuples' checkpoints in place."""
    sends: dict[tuple[str, str, str], list[Any]] = {}
    for row in rows:
        here = (row[SendRow.THREAD_ID], row[SendRow.CHECKPOINT_NS], row[SendRow.CHECKPOINT_ID])
        parts = (
            "write",
            *here,
            row[SendRow.TASK_ID],
            row[SendRow.IDX],
            TASKS,
            row[SendRow.TASK_PATH],
        )
        sends.setdefault(here, []).append(
            load_at(serde, row[SendRow.TYPE], row[SendRow.BLOB] or b"", parts)
        )
    for t in tuples:
        if t.parent_config is None or checkpoint_format(t.checkpoint) >= 4:
            continue
        c = t.parent_config["configurable"]
        found = sends.get((c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"]))
        if found is None:
            continue
        versions = t.checkpoint["channel_versions"]
        t.checkpoint["channel_values"][TASKS] = list(found)
        versions[TASKS] = max(versions.values()) if versions else next_version(None)
