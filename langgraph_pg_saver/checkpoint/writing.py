"""What a put and a put_writes store: their statements' parameters, built from LangGraph's
objects, with every input checked before anything is written. No I/O happens here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint.keys import (
    Params,
    _text,
    body_place,
    config_keys,
    merge_metadata,
    run_id_of,
    version_key,
)
from langgraph_pg_saver.codec import elements as _elements
from langgraph_pg_saver.codec import jsonb as _jsonb
from langgraph_pg_saver.codec.crypto import KeyringSerializer, Place
from langgraph_pg_saver.codec.jsonb import encode_json
from langgraph_pg_saver.codec.values import dump_at, find_surrogate, pack_typed, sealer
from langgraph_pg_saver.db.adapt import NULL_BYTEA
from langgraph_pg_saver.errors import InvalidInputError

# Blob type marking "this channel version has no stored value" (a DeltaChannel between snapshots).
# A stored None is serialized by the serde as type "null", so the two never mix.
EMPTY = "empty"
_BODY_EXCLUDED = ("channel_values", "channel_versions")


def metadata_columns(serde: SerializerProtocol, merged: dict[str, Any]) -> tuple[str, bool, bool]:
    """The metadata jsonb column's text, whether it lost anything (_jsonb.encode), and whether
    the exact copy is sealed: under a KeyringSerializer only its ``plaintext_metadata`` keys are
    stored in clear (for filters), and the whole metadata is always sealed in metadata_exact,
    which reads return (so a changed jsonb column cannot change what is read)."""
    crypt = sealer(serde)
    if crypt is None:
        text, lossy = _jsonb.encode(merged)
        return text, lossy, False
    visible = {k: v for k, v in merged.items() if k in crypt.plaintext_metadata}
    text, lossy = _jsonb.encode(visible)
    return text, lossy, True


# --------------------------------------------------------------------------- put


#: put and put_writes send up to this many rows as scalar parameters of a VALUES list (one prepared
#: statement per count: the {blob_rows} and {write_rows} slots of queries.sql), more as arrays
VALUES_MAX_ROWS = 8


class Batch(NamedTuple):
    """The parameters of a put or put_writes, and how its rows travel."""

    params: Params
    #: the rows go as this many scalar rows of a VALUES list; 0: as arrays
    rows: int
    #: put_writes to a special channel (negative idx): always the upsert, whose latest value wins
    special: bool = False
    #: a put that must extend its namespace's newest checkpoint (single_writer=True)
    claim: bool = False
    #: a put with list values stored as their elements: its parts travel as the arrays part_keys
    #: and part_blobs
    parts: bool = False


_BLOB_KEYS = tuple((f"bc{i}", f"bv{i}", f"bt{i}", f"bb{i}") for i in range(VALUES_MAX_ROWS))
_WRITE_KEYS = tuple((f"wc{i}", f"wt{i}", f"wb{i}") for i in range(VALUES_MAX_ROWS))


def blob_arrays(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """``params`` of a put whose blobs travel as scalar rows, with the same blobs as arrays added
    (what put_call takes); those of a put that sent arrays already, as they are."""
    if "blob_channels" in params:
        return params
    out = dict(params)
    channels: list[Any] = []
    versions: list[Any] = []
    types: list[Any] = []
    blobs: list[Any] = []
    for c, v, t, b in _BLOB_KEYS:
        if c not in params:
            break
        channels.append(params[c])
        versions.append(params[v])
        types.append(params[t])
        blob = params[b]
        blobs.append(None if blob is NULL_BYTEA else blob)
    out["blob_channels"] = channels
    out["blob_versions"] = versions
    out["blob_types"] = types
    out["blob_values"] = blobs
    return out


def write_arrays(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """``params`` of a put_writes whose writes travel as scalar rows (idx = position), with the
    same writes as arrays added (what put_writes_call takes); those that sent arrays, as they
    are."""
    if "idxs" in params:
        return params
    out = dict(params)
    idxs: list[int] = []
    channels: list[Any] = []
    types: list[Any] = []
    blobs: list[Any] = []
    for i, (c, t, b) in enumerate(_WRITE_KEYS):
        if c not in params:
            break
        idxs.append(i)
        channels.append(params[c])
        types.append(params[t])
        blob = params[b]
        blobs.append(None if blob is NULL_BYTEA else blob)
    out["idxs"] = idxs
    out["channels"] = channels
    out["types"] = types
    out["values"] = blobs
    return out


def with_checkpoint_id(params: Mapping[str, Any]) -> Mapping[str, Any]:
    """get_tuple's ``params`` for get_tuple_call, which always takes a checkpoint id (None: the
    latest)."""
    return params if "checkpoint_id" in params else {**params, "checkpoint_id": None}


def put_params(
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    *,
    values_max: int = VALUES_MAX_ROWS,
    compress: bool = False,
    elements: bool = False,
) -> Batch:
    """Parameters of the ``put`` query. Raises before anything is written if the input is unusable.

    The values of ``new_versions`` go as scalars when there are at most ``values_max`` (and at
    least one) of them, otherwise as arrays (``values_max=0``: always arrays). ``compress``: the
    values and the body are stored compressed where that pays (_compress). ``elements``: a list
    value is stored as its elements where it can be (codec/elements.py); its parts go as the
    arrays part_keys and part_blobs.
    """
    keys = config_keys(config)
    checkpoint_id = _text(checkpoint["id"], "checkpoint id")
    # a checkpoint without channel values (or versions) stores none, and reads back with {}
    values = checkpoint.get("channel_values") or {}
    params: Params = {}
    rows = len(new_versions)
    # the parts of list values stored as their elements, by key (None: every value whole)
    parts: dict[bytes, bytes] | None = {} if elements else None
    if 0 < rows <= min(values_max, VALUES_MAX_ROWS):
        for (c, v, t, b), (channel, version) in zip(_BLOB_KEYS, new_versions.items(), strict=False):
            params[c] = _text(channel, "channel name")
            params[v] = version_key(version)
            if channel in values:
                params[t], params[b] = _value(
                    serde,
                    values[channel],
                    channel,
                    ("blob", keys.thread_id, keys.checkpoint_ns, channel, params[v]),
                    compress,
                    parts,
                )
            else:
                params[t] = EMPTY
                params[b] = NULL_BYTEA  # typed: see NullBytea
    else:
        rows = 0
        channels: list[str] = []
        versions: list[str] = []
        types: list[str] = []
        blobs: list[bytes | None] = []
        for channel, version in new_versions.items():
            channels.append(_text(channel, "channel name"))
            versions.append(version_key(version))
            if channel in values:
                type_, data = _value(
                    serde,
                    values[channel],
                    channel,
                    ("blob", keys.thread_id, keys.checkpoint_ns, channel, versions[-1]),
                    compress,
                    parts,
                )
                types.append(type_)
                blobs.append(data)
            else:
                types.append(EMPTY)
                blobs.append(None)
        params["blob_channels"] = channels
        params["blob_versions"] = versions
        params["blob_types"] = types
        params["blob_values"] = blobs
    body = {k: v for k, v in checkpoint.items() if k not in _BODY_EXCLUDED}
    here = (keys.thread_id, keys.checkpoint_ns, checkpoint_id)
    all_versions = checkpoint.get("channel_versions") or {}
    body_type, body_bytes = dump_at(
        serde,
        body,
        "the checkpoint (apart from its channel values)",
        None,
        body_place(*here, keys.checkpoint_id, all_versions)
        if isinstance(serde, KeyringSerializer)
        else (),
        compress,
    )
    # channel names become jsonb keys: a lossless ASCII encoding proves every name is storable;
    # anything else is checked name by name, for a clear error
    versions_json, lossy = encode_json(all_versions)
    if lossy or not versions_json.isascii():
        for channel in all_versions:
            _text(channel, "channel name")
    merged = merge_metadata(config, metadata)
    metadata_json, lossy, hidden = metadata_columns(serde, merged)
    if lossy:
        where = find_surrogate(merged, "metadata")
        if where is not None:
            # neither jsonb nor the serializer keeps it (it would come back as "?"): refuse
            raise InvalidInputError(
                f"{where} contains a lone surrogate character (such as '\\ud800'), which cannot be "
                "stored as given; nothing was written"
            )
    params["thread_id"] = keys.thread_id
    params["checkpoint_ns"] = keys.checkpoint_ns
    params["checkpoint_id"] = checkpoint_id
    params["parent_checkpoint_id"] = keys.checkpoint_id
    # the column delete_for_runs selects by; the metadata keeps the value as given, whatever it is
    params["run_id"] = run_id_of(config, metadata)
    params["type"] = body_type
    params["checkpoint"] = bytes(body_bytes)
    params["channel_versions"] = versions_json
    params["metadata"] = metadata_json
    # typed NULL as for a missing value (see NullBytea); read back with "not", as an empty bytea
    # would be stored without the marker's dumper, and packed metadata is never empty
    params["metadata_exact"] = (
        pack_typed(serde, merged, "metadata", ("metadata", *here))
        if lossy or hidden
        else NULL_BYTEA
    )
    params["status"] = put_status(keys.checkpoint_ns, values)
    if parts:
        ordered = sorted(parts)
        params["part_keys"] = ordered
        params["part_blobs"] = [parts[k] for k in ordered]
        return Batch(params, rows, parts=True)
    return Batch(params, rows)


def _value(
    serde: SerializerProtocol,
    value: Any,
    channel: str,
    place: Place,
    compress: bool,
    parts: dict[bytes, bytes] | None,
) -> tuple[str, bytes]:
    """A channel value's stored (type, bytes): a list as its elements when ``parts`` collects
    them (and the serde writes it as plain msgpack), anything else as dump_at stores it."""
    if parts is not None and _elements.storable(value):
        stored = _elements.split(serde, value, name=channel, compress=compress, place=place)
        if stored is not None:
            blob, new = stored
            for part in new:
                parts[part.key] = part.data
            return _elements.LIST_TYPE, blob
    return dump_at(serde, value, "the value of channel", channel, place, compress)


#: the channels whose value schedules a node: the input, and a StateGraph's edges to a node
START_CHANNEL = "__start__"
TRIGGER_PREFIX = "branch:to:"
#: the special channels of a write that change a thread's status (migration 0014)
STATUS_WRITES = {"__error__": "error", "__interrupt__": "interrupted"}


def put_status(checkpoint_ns: str, values: Mapping[str, Any]) -> str | None:
    """The thread's status as a root checkpoint makes it (migration 0014): 'pending' when a
    trigger channel holds a value (nodes are scheduled), else 'idle'; None for a subgraph's
    checkpoint, which leaves the thread's status as it is."""
    if checkpoint_ns:
        return None
    for channel in values:
        if channel == START_CHANNEL or (
            isinstance(channel, str) and channel.startswith(TRIGGER_PREFIX)
        ):
            return "pending"
    return "idle"


def writes_status(checkpoint_ns: str, writes: Sequence[tuple[str, Any]]) -> str | None:
    """The status a task's writes give the thread of a root checkpoint: 'error' for a write to
    __error__, 'interrupted' for one to __interrupt__, else None (nothing changes)."""
    if checkpoint_ns:
        return None
    found = {STATUS_WRITES[c] for c, _ in writes if c in STATUS_WRITES}
    if "error" in found:
        return "error"
    return found.pop() if found else None


def put_result(params: Params) -> RunnableConfig:
    """The config ``put`` returns: the stored checkpoint's thread, namespace and id."""
    return {
        "configurable": {
            "thread_id": params["thread_id"],
            "checkpoint_ns": params["checkpoint_ns"],
            "checkpoint_id": params["checkpoint_id"],
        }
    }


# --------------------------------------------------------------------------- put_writes


def put_writes_params(
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    *,
    values_max: int = VALUES_MAX_ROWS,
    compress: bool = False,
) -> Batch | None:
    """Parameters of ``put_writes``, or None when there is nothing to write.

    Ordinary writes get their position as idx; special channels get their fixed negative idx, and
    if one call repeats a special channel the last value wins (as a later call would). Up to
    ``values_max`` ordinary writes go as scalars, others as arrays; ``compress`` as in put_params.
    """
    keys = config_keys(config)
    if keys.checkpoint_id is None:
        raise InvalidInputError("put_writes needs a config with configurable.checkpoint_id")
    rows: dict[int, tuple[str, Any]] = {}
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        rows[idx] = (_text(channel, "write channel"), value)
    if not rows:
        return None
    params: Params = {
        "thread_id": keys.thread_id,
        "checkpoint_ns": keys.checkpoint_ns,
        "checkpoint_id": keys.checkpoint_id,
        "task_id": _text(task_id, "task_id"),
        "task_path": _text(task_path or "", "task_path"),
        "run_id": run_id_of(config),
    }
    here = ("write", keys.thread_id, keys.checkpoint_ns, keys.checkpoint_id, params["task_id"])
    path = params["task_path"]
    # ordinary writes only (idx = position, 0..n-1): scalars of a VALUES list whose idx is written
    # into the statement (see _write_rows in queries.sql)
    if (
        len(rows) <= min(values_max, VALUES_MAX_ROWS)
        and len(rows) == len(writes)
        and min(rows) >= 0
    ):
        for (c, t, b), (idx, (channel, value)) in zip(_WRITE_KEYS, rows.items(), strict=False):
            params[c] = channel
            params[t], params[b] = dump_at(
                serde, value, "the write to channel", channel, (*here, idx, channel, path), compress
            )
        return Batch(params, len(rows))
    idxs: list[int] = []
    channels: list[str] = []
    types: list[str] = []
    blobs: list[bytes | None] = []
    for idx, (channel, value) in rows.items():
        type_, data = dump_at(
            serde, value, "the write to channel", channel, (*here, idx, channel, path), compress
        )
        idxs.append(idx)
        channels.append(channel)
        types.append(type_)
        blobs.append(bytes(data))
    params["idxs"] = idxs
    params["channels"] = channels
    params["types"] = types
    params["values"] = blobs
    return Batch(params, 0, special=min(rows) < 0)
