"""What a get_tuple and a list read: their statements' predicates and parameters, and their rows
back as CheckpointTuples. No I/O happens here.

Plain and sealed reads are one path: every stored value is opened at its place by the serde's
``opener`` (a KeyringSerializer checks the place; any other serde ignores it), and a checkpoint
body's place, which costs a sort of its versions, is built only under a KeyringSerializer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, PendingWrite
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import metadata as _metadata
from langgraph_pg_saver.checkpoint.keys import (
    Params,
    _configurable,
    _text,
    body_place,
    config_keys,
    stored_version,
)
from langgraph_pg_saver.checkpoint.rows import (
    KeyRow,
    ReadHead,
    ReadValue,
    ReadWrite,
    TupleHead,
    TupleValue,
    TupleWrite,
)
from langgraph_pg_saver.codec import compress as _compress
from langgraph_pg_saver.codec.crypto import Place
from langgraph_pg_saver.codec.values import Opener, open_exact, opener, sealer
from langgraph_pg_saver.db.sql import LIST_PAGE
from langgraph_pg_saver.errors import InvalidInputError

# --------------------------------------------------------------------------- statements


class Select(NamedTuple):
    predicates: tuple[str, ...]
    params: Params
    #: list() with a metadata filter: the plan by which the saver checks candidates (_metadata)
    filter: _metadata.FilterPlan | None = None


def get_tuple_select(config: RunnableConfig) -> Select:
    keys = config_keys(config)
    params: Params = {
        "thread_id": keys.thread_id,
        "checkpoint_ns": keys.checkpoint_ns,
    }
    if keys.checkpoint_id is None:
        return Select(("thread", "ns"), params)
    params["checkpoint_id"] = keys.checkpoint_id
    return Select(("thread", "ns", "id"), params)


def list_select(
    config: RunnableConfig | None,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    visible: Collection[str] | None = None,
) -> Select:
    """WHERE fragments and parameters for ``list``: everything is pushed into SQL (the filter's
    keys among ``visible``, the metadata keys stored in clear; all when None)."""
    predicates: list[str] = []
    params: Params = {"limit": None}
    configurable = _configurable(config, "config")
    if configurable.get("thread_id") is not None:
        keys = config_keys(config)
        predicates.append("thread")
        params["thread_id"] = keys.thread_id
        if configurable.get("checkpoint_ns") is not None:
            predicates.append("ns")
            params["checkpoint_ns"] = keys.checkpoint_ns
        if keys.checkpoint_id is not None:
            predicates.append("id")
            params["checkpoint_id"] = keys.checkpoint_id
    if before is not None:
        before_id = _configurable(before, "before").get("checkpoint_id")
        if before_id is not None:
            predicates.append("before")
            params["before"] = _text(before_id, "before checkpoint_id")
    plan: _metadata.FilterPlan | None = None
    if filter:
        if not isinstance(filter, Mapping):
            raise InvalidInputError(
                f"filter must be a dict of metadata keys to values, not {type(filter).__name__}"
            )
        plan = _metadata.plan_filter(filter, visible)
        if plan.prefilter is not None:
            predicates.append("filter")
            params["filter"] = plan.prefilter
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInputError(f"limit must be a non-negative int or None, not {limit!r}")
        params["limit"] = limit
    return Select(tuple(predicates), params, plan)


# --------------------------------------------------------------------------- pages of a long list
#
# A list() without a limit (LangGraph's get_state_history), or with one above LIST_PAGE, reads
# pages of LIST_PAGE checkpoints, one statement each, newest first, each after the last key of the
# page before (the _w_after predicate, in read_tuples' total order: id descending, then thread and
# namespace), so that no statement reads a whole long thread (a role's statement_timeout applies
# per statement) and a caller that stops early reads no further. A shorter limit stays one
# statement.
#
# In autocommit each page sees a snapshot of its own, and the result is still exact: no row comes
# twice or out of order (each page starts strictly after a key already returned, in a total
# order), every checkpoint stored throughout the read is returned, and each one returned was
# stored when its page ran. A checkpoint id is a time (uuid6: LangGraph's ids grow with time), so
# what is put while the pages are read is newer than the first page and appears in none (the
# keyset only goes down), as it would not in one statement that started first; a checkpoint
# deleted between pages (a prune, a delete_thread) is simply not returned by a page not yet read.
# (Ids older than the boundary written meanwhile, by a copy_thread or an import into a thread a
# list across threads reads, may show or not: either is a state that existed.)


def pages(limit: int | None) -> bool:
    """Whether list() with this limit reads pages (none or one above LIST_PAGE)."""
    return limit is None or limit > LIST_PAGE


def page_select(sel: Select, after: tuple[str, str, str] | None) -> Select:
    """The statement's predicates and parameters for the page after ``after`` (thread,
    namespace, id of the last checkpoint of the page before; None for the first)."""
    params: Params = {**sel.params, "limit": LIST_PAGE}
    if after is None:
        return Select(sel.predicates, params, sel.filter)
    params["after_thread"], params["after_ns"], params["after_id"] = after
    return Select((*sel.predicates, "after"), params, sel.filter)


def last_key(name: str, rows: Sequence[Sequence[Any]]) -> tuple[str, str, str] | None:
    """The key (thread, namespace, id) of the last checkpoint in rows of ``read_tuples``
    (its kind-2 rows come last, in list order) or ``list_keys``; None without one."""
    if not rows:
        return None
    row = rows[-1]
    if name == "list_keys":
        return (row[KeyRow.THREAD_ID], row[KeyRow.CHECKPOINT_NS], row[KeyRow.CHECKPOINT_ID])
    if row[ReadHead.KIND] != 2:
        return None
    return (row[ReadHead.THREAD_ID], row[ReadHead.CHECKPOINT_NS], row[ReadHead.CHECKPOINT_ID])


def checkpoints_in(name: str, rows: Sequence[Sequence[Any]]) -> int:
    """How many checkpoints rows of ``read_tuples`` (kind 2 rows) or ``list_keys`` (one each)
    hold."""
    if name == "list_keys":
        return len(rows)
    kind = ReadHead.KIND
    return sum(1 for row in rows if row[kind] == 2)


def first_fetch(plan: _metadata.FilterPlan, limit: int | None) -> int | None:
    """How many candidates a filtered list() reads first: its limit when the prefilter is exact,
    more when candidates are checked by their metadata (narrow rows) before any is read whole."""
    if limit is None or plan.exact:
        return limit
    return max(4 * limit, 256)


def matching_keys(
    serde: SerializerProtocol,
    plan: _metadata.FilterPlan,
    rows: Sequence[Sequence[Any]],
    limit: int | None,
) -> list[tuple[str, str, str]]:
    """The keys of the ``list_keys`` rows (KeyRow) whose metadata matches, in order, at most
    ``limit``."""
    keys: list[tuple[str, str, str]] = []
    for row in rows:
        key = (row[KeyRow.THREAD_ID], row[KeyRow.CHECKPOINT_NS], row[KeyRow.CHECKPOINT_ID])
        metadata = open_exact(
            serde, row[KeyRow.METADATA_EXACT], row[KeyRow.METADATA], ("metadata", *key)
        )
        if _metadata.matches(plan.filter, metadata):
            keys.append(key)
            if limit is not None and len(keys) >= limit:
                break
    return keys


def keys_params(keys: Sequence[tuple[str, str, str]]) -> Params:
    """Checkpoint keys (thread, namespace, id) as the three arrays of an unnest()."""
    return {
        "thread_ids": [k[0] for k in keys],
        "checkpoint_nss": [k[1] for k in keys],
        "checkpoint_ids": [k[2] for k in keys],
    }


def keys_by_thread(keys: Sequence[tuple[str, str, str]]) -> list[Params]:
    """Checkpoint keys grouped by thread (in order of first appearance), each group as the
    parameters of read_tuples_keys' Citus form (one statement per thread)."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for key in keys:
        groups.setdefault(key[0], []).append(key)
    return [
        {
            "thread_id": thread,
            "checkpoint_nss": [k[1] for k in group],
            "checkpoint_ids": [k[2] for k in group],
        }
        for thread, group in groups.items()
    ]


def merged_rows(parts: Sequence[Sequence[Sequence[Any]]]) -> list[Sequence[Any]]:
    """The rows of several read_tuples statements (one per thread) as one statement's rows:
    values and writes first (each part's in its order), then the checkpoints in list order (id
    descending, then thread and namespace)."""
    heads = [r for part in parts for r in part if r[ReadHead.KIND] == 2]
    heads.sort(key=lambda r: (r[ReadHead.THREAD_ID], r[ReadHead.CHECKPOINT_NS]))
    heads.sort(key=lambda r: r[ReadHead.CHECKPOINT_ID], reverse=True)
    return [r for part in parts for r in part if r[ReadHead.KIND] != 2] + heads


def key_of(row: Sequence[Any]) -> tuple[str, str, str]:
    """The key (thread, namespace, id) of a list_keys row."""
    return (row[KeyRow.THREAD_ID], row[KeyRow.CHECKPOINT_NS], row[KeyRow.CHECKPOINT_ID])


# --------------------------------------------------------------------------- rows → tuples

#: a pending write as read_rows_to_tuples keeps it: task, channel, type, value, idx, task path
_Write = tuple[str, str, str, "bytes | None", int, str]


def read_rows_to_tuples(
    serde: SerializerProtocol, rows: Sequence[Sequence[Any]]
) -> Iterator[CheckpointTuple]:
    """The rows of ``read_tuples`` (values, then writes, then checkpoints) as CheckpointTuples.

    A value that several checkpoints share is decoded once when it decodes to an immutable object
    (str, int, float, bool, bytes, None: most state of a long thread); any other value is decoded
    for each checkpoint, so no two tuples share a mutable object (a compressed one is decompressed
    only once).
    """
    values: dict[tuple[str, str, str, str], list[Any]] = {}
    writes: dict[tuple[str, str, str], list[_Write]] = {}
    opened = opener(serde)
    sealed = sealer(serde) is not None
    kind_, thread_, ns_ = ReadHead.KIND, ReadHead.THREAD_ID, ReadHead.CHECKPOINT_NS
    channel_, version_, vtype_, vblob_ = (
        ReadValue.CHANNEL,
        ReadValue.VERSION,
        ReadValue.TYPE,
        ReadValue.BLOB,
    )
    id_, task_, wtype_, wblob_, wchannel_, path_, idx_ = (
        ReadWrite.CHECKPOINT_ID,
        ReadWrite.TASK_ID,
        ReadWrite.TYPE,
        ReadWrite.BLOB,
        ReadWrite.CHANNEL,
        ReadWrite.TASK_PATH,
        ReadWrite.IDX,
    )
    for row in rows:
        kind = row[kind_]
        if kind == 0:
            # type, data, and the decoded value once known to be shareable
            values[(row[thread_], row[ns_], row[channel_], row[version_])] = [
                row[vtype_],
                row[vblob_],
                _UNSET,
            ]
        elif kind == 1:
            writes.setdefault((row[thread_], row[ns_], row[id_]), []).append(
                (row[task_], row[wchannel_], row[wtype_], row[wblob_], row[idx_], row[path_])
            )
        else:
            yield _checkpoint_tuple(serde, opened, sealed, row, values, writes)


_UNSET = object()
_SHAREABLE = frozenset({str, int, float, bool, bytes, type(None)})


def _checkpoint_tuple(
    serde: SerializerProtocol,
    opened: Opener,
    sealed: bool,
    row: Sequence[Any],
    values: dict[tuple[str, str, str, str], list[Any]],
    writes: dict[tuple[str, str, str], list[_Write]],
) -> CheckpointTuple:
    """One kind-2 row of read_tuples as a CheckpointTuple, its values and writes found in those
    read before it; every value opened at its own place."""
    thread_id, checkpoint_ns = row[ReadHead.THREAD_ID], row[ReadHead.CHECKPOINT_NS]
    checkpoint_id, parent_id = row[ReadHead.CHECKPOINT_ID], row[ReadHead.PARENT_CHECKPOINT_ID]
    versions = row[ReadHead.CHANNEL_VERSIONS]
    here = (thread_id, checkpoint_ns, checkpoint_id)
    checkpoint: dict[str, Any] = opened(
        row[ReadHead.TYPE],
        row[ReadHead.CHECKPOINT],
        body_place(*here, parent_id, versions) if sealed else (),
    )
    checkpoint["channel_versions"] = versions
    channel_values: dict[str, Any] = {}
    for channel, version in (versions or {}).items():
        key = version if type(version) is str else stored_version(version)
        found = None if key is None else values.get((thread_id, checkpoint_ns, channel, key))
        if found is not None:
            value = found[2]
            if value is _UNSET:
                if not sealed and found[0].endswith(_compress.SUFFIX):
                    # decompressed once: the next checkpoints that hold it only decode it (a
                    # sealed value is compressed inside its seal)
                    found[0], found[1] = _compress.unpack(found[0], found[1] or b"")
                value = opened(
                    found[0], found[1] or b"", ("blob", thread_id, checkpoint_ns, channel, key)
                )
                if type(value) in _SHAREABLE:
                    found[2] = value
            channel_values[channel] = value
    checkpoint["channel_values"] = channel_values
    metadata = open_exact(
        serde, row[ReadHead.METADATA_EXACT], row[ReadHead.METADATA], ("metadata", *here)
    )
    pending: list[PendingWrite] = [
        (task, channel, opened(type_, data or b"", ("write", *here, task, idx, channel, path)))
        for task, channel, type_, data, idx, path in writes.get(here, ())
    ]
    return _tuple(thread_id, checkpoint_ns, checkpoint_id, parent_id, checkpoint, metadata, pending)


#: the column of get_tuple's rows that holds values and the body: what measures its result
GET_TUPLE_BYTES = TupleHead.BODY


def get_tuple_rows_to_tuple(
    serde: SerializerProtocol, rows: Sequence[Sequence[Any]]
) -> CheckpointTuple | None:
    """The rows of ``get_tuple`` (one checkpoint: values, writes in order, then the checkpoint,
    which names the place of each) as a CheckpointTuple, or None when no checkpoint matched."""
    if not rows or rows[-1][TupleHead.KIND] != 2:
        return None
    head = rows[-1]
    thread_id, checkpoint_ns = head[TupleHead.THREAD_ID], head[TupleHead.CHECKPOINT_NS]
    checkpoint_id = head[TupleHead.CHECKPOINT_ID]
    here = (thread_id, checkpoint_ns, checkpoint_id)
    opened = opener(serde)
    channel_values: dict[str, Any] = {}
    pending: list[PendingWrite] = []
    kind_ = TupleHead.KIND
    channel_, version_, vtype_, vblob_ = (
        TupleValue.CHANNEL,
        TupleValue.VERSION,
        TupleValue.TYPE,
        TupleValue.BLOB,
    )
    task_, wchannel_, wtype_, wblob_, path_, idx_ = (
        TupleWrite.TASK_ID,
        TupleWrite.CHANNEL,
        TupleWrite.TYPE,
        TupleWrite.BLOB,
        TupleWrite.TASK_PATH,
        TupleWrite.IDX,
    )
    # opened in place (a NULL value, never stored for a real value, reads as b""): a helper call
    # per row was a fifth of this function
    for row in rows:
        kind = row[kind_]
        if kind == 0:
            channel = row[channel_]
            blob: Place = ("blob", thread_id, checkpoint_ns, channel, row[version_])
            channel_values[channel] = opened(row[vtype_], row[vblob_] or b"", blob)
        elif kind == 1:
            task, channel = row[task_], row[wchannel_]
            write: Place = ("write", *here, task, row[idx_], channel, row[path_])
            pending.append((task, channel, opened(row[wtype_], row[wblob_] or b"", write)))
    parent_id = head[TupleHead.PARENT_CHECKPOINT_ID]
    versions = head[TupleHead.CHANNEL_VERSIONS]
    checkpoint: dict[str, Any] = opened(
        head[TupleHead.TYPE],
        head[TupleHead.BODY],
        () if sealer(serde) is None else body_place(*here, parent_id, versions),
    )
    checkpoint["channel_versions"] = versions
    # in the order of channel_versions, as list() gives them
    checkpoint["channel_values"] = {
        channel: channel_values[channel] for channel in versions or () if channel in channel_values
    }
    metadata = open_exact(
        serde, head[TupleHead.METADATA_EXACT], head[TupleHead.METADATA], ("metadata", *here)
    )
    return _tuple(thread_id, checkpoint_ns, checkpoint_id, parent_id, checkpoint, metadata, pending)


def _tuple(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_id: str | None,
    checkpoint: dict[str, Any],
    metadata: Any,
    pending: list[PendingWrite],
) -> CheckpointTuple:
    config: RunnableConfig = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }
    parent: RunnableConfig | None = None
    if parent_id is not None:
        parent = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": parent_id,
            }
        }
    return CheckpointTuple(config, checkpoint, metadata, parent, pending)  # type: ignore[arg-type]
