"""DeltaChannel history: ``get_delta_channel_history`` as a one-statement step generator, and its
rows assembled into LangGraph's ``DeltaChannelHistory`` (the rules: docs/design.md, DeltaChannels)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint import reading as _reading
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.codec import values as _values
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.db.steps import Rows, Step, Steps, Stmt
from langgraph_pg_saver.errors import InvalidInputError


def delta_history(
    q: Queries,
    serde: SerializerProtocol,
    config: RunnableConfig,
    channels: Sequence[str],
    function: bool = True,
) -> Steps:
    """get_delta_channel_history in one statement; the rules are in docs/design.md (DeltaChannels).
    With ``function``, the call of migration 0011's pgsaver_delta_history (its plans stay on the
    primary keys under any statistics); without, the statement itself."""
    if isinstance(channels, str):
        raise InvalidInputError(
            f"channels must be a list of channel names, not the string {channels!r}"
        )
    wanted = list(dict.fromkeys(_channel_name(c) for c in channels))
    if not wanted:
        return {}
    sel = _reading.get_tuple_select(config)
    params = dict(sel.params, channels=wanted)
    if function:
        stmt = Stmt(q["delta_history_call"], _writing.with_checkpoint_id(params), prepare=None)
    else:
        stmt = Stmt(q.render("delta_history", where=sel.predicates), params, prepare=None)
    rows = yield Step((stmt,))
    return assemble_history(serde, wanted, rows)


def _channel_name(channel: object) -> str:
    if channel is None:
        raise InvalidInputError("channels contains None instead of a channel name")
    return _keys.name_param(channel, "channel name")


def assemble_history(
    serde: SerializerProtocol, channels: Sequence[str], rows: Rows
) -> dict[str, DeltaChannelHistory]:
    """Rows of ``delta_history`` (already oldest → newest, writes in writes_sort_key order)."""
    writes: dict[str, list[PendingWrite]] = {c: [] for c in channels}
    seeds: dict[str, Any] = {}
    opened = _values.opener(serde)
    for kind, _depth, path, task_id, idx, channel, type_, blob, thread, ns, cid, version in rows:
        data = blob if blob is not None else b""
        if kind == 0:
            place = ("write", thread, ns, cid, task_id, idx, channel, path)
            writes[channel].append((task_id, channel, opened(type_, data, place)))
        else:
            seeds[channel] = opened(type_, data, ("blob", thread, ns, channel, version), channel)
    result: dict[str, DeltaChannelHistory] = {}
    for c in channels:
        entry: DeltaChannelHistory = {"writes": writes[c]}
        if c in seeds:
            entry["seed"] = seeds[c]
        result[c] = entry
    return result
