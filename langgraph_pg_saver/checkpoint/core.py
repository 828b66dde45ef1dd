"""Pure functions between LangGraph's objects and the rows we store. No I/O happens here.

The savers are thin shells around these: they turn a call into query parameters with one function,
send one statement, and turn the rows back with another. Everything here is unit-tested without a
database.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    EXCLUDED_METADATA_KEYS,
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import metadata as _metadata
from langgraph_pg_saver.checkpoint.metadata import encodable
from langgraph_pg_saver.codec import compress as _compress
from langgraph_pg_saver.codec.crypto import KeyringSerializer, Place, describe
from langgraph_pg_saver.db.adapt import NULL_BYTEA
from langgraph_pg_saver.errors import DecryptionError, InvalidInputError

# Blob type marking "this channel version has no stored value" (a DeltaChannel between snapshots).
# A stored None is serialized by the serde as type "null", so the two never mix.
EMPTY = "empty"
_BODY_EXCLUDED = ("channel_values", "channel_versions")
Params = dict[str, Any]


# --------------------------------------------------------------------------- config → keys


class Keys(NamedTuple):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str | None


def _text(value: object, what: str) -> str:
    """A key as Postgres text: valid UTF-8 without NUL characters (text cannot hold them).

    A str as it is; an int (``thread_id=1``, common in LangGraph code) or a UUID as its str(), so
    ``1`` and ``"1"`` name the same thread, as in the official saver. Anything else (a bool, a float,
    bytes, a list, an object) would be stored as its repr and is refused instead.
    """
    if type(value) is str and value.isascii() and "\x00" not in value:
        return value  # the common case, on every hot call: two C-level scans
    if isinstance(value, str):
        text = value
    elif isinstance(value, (int, uuid.UUID)) and not isinstance(value, bool):
        text = str(value)
    else:
        raise InvalidInputError(
            f"{what} must be a str (or an int or UUID), not {type(value).__name__}: {value!r}"
        )
    if "\x00" in text:
        raise InvalidInputError(
            f"{what} contains a NUL character (\\x00), which Postgres text cannot store: {text!r}"
        )
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(
                f"{what} is not valid Unicode (a lone surrogate?): {text!r}"
            ) from None
    return text


def version_key(version: object) -> str:
    """A channel version as the text the blobs table keys it by.

    It must equal what Postgres prints for the version inside the checkpoint's ``channel_versions``
    jsonb (the join in ``read_tuples``): strings and ints print as Python does, but a float prints
    as a plain decimal (``1e-07`` → ``0.0000001``).
    """
    if isinstance(version, float) and not isinstance(version, bool):
        if not math.isfinite(version):
            raise InvalidInputError(f"channel version must be finite, not {version!r}")
        return format(Decimal(json.dumps(version)), "f")
    return _text(version, "channel version")


def _configurable(config: object, what: str) -> Mapping[str, Any]:
    """``config["configurable"]``, or {}; a clear error for something that is not a config."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidInputError(
            f"{what} must be a RunnableConfig dict such as {{'configurable': {{'thread_id': ...}}}}, "
            f"not {type(config).__name__}: {config!r}"
        )
    configurable = config.get("configurable") or {}
    if not isinstance(configurable, Mapping):
        raise InvalidInputError(
            f"{what}['configurable'] must be a dict, not {type(configurable).__name__}"
        )
    return configurable


def config_keys(config: RunnableConfig | None, *, what: str = "config") -> Keys:
    """thread_id, checkpoint_ns and checkpoint_id of ``config``; a clear error if thread_id is missing."""
    configurable = _configurable(config, what)
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise InvalidInputError(
            f"{what} has no configurable.thread_id; pass "
            "{'configurable': {'thread_id': ...}} to identify the thread"
        )
    ns = configurable.get("checkpoint_ns") or ""
    cid = configurable.get("checkpoint_id")
    return Keys(
        _text(thread_id, "thread_id"),
        _text(ns, "checkpoint_ns"),
        None if cid is None else _text(cid, "checkpoint_id"),
    )


def name_param(value: object, what: str) -> str:
    """An id or a name (thread, run, channel) as text."""
    return _text(value, what)


def thread_id_param(thread_id: object) -> str:
    if thread_id is None:
        raise InvalidInputError("thread_id must not be None")
    return _text(thread_id, "thread_id")


# --------------------------------------------------------------------------- metadata


def merge_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata to store: the caller's, plus the config's plain values LangGraph adds.

    Follows the rule of LangGraph's ``get_checkpoint_metadata`` (config ``metadata`` and
    ``configurable`` keys that are not reserved and hold str/int/float/bool values), but keeps every
    string exactly as given: NUL characters included.
    """
    merged: dict[str, Any] = dict(metadata)
    for source in (config.get("metadata"), config.get("configurable")):
        if not source:
            continue
        for key, value in source.items():
            if key in merged or key in EXCLUDED_METADATA_KEYS or key.startswith("__"):
                continue
            if isinstance(value, (str, int, float, bool)):
                merged[key] = value
    return merged


def run_id_of(config: RunnableConfig, metadata: Mapping[str, Any] | None = None) -> str | None:
    """The run a put or put_writes belongs to (the ``run_id`` column delete_for_runs selects by):
    the first str, int or UUID among the checkpoint metadata's ``run_id`` (a put's), the config's
    ``metadata`` and ``configurable`` ``run_id`` (where LangGraph's server and callers put it), and
    the config's own ``run_id`` (``graph.invoke(x, {"run_id": ...})``: LangChain gives it to the
    outermost run only, not to subgraphs). The stored metadata is not changed by it."""
    if metadata:
        value = metadata.get("run_id")
        if value is not None and _is_run_id(value):
            return _text(value, "metadata run_id")
    for source in (config.get("metadata"), config.get("configurable")):
        if isinstance(source, Mapping):
            value = source.get("run_id")
            if value is not None and _is_run_id(value):
                return _text(value, "run_id")
    value = config.get("run_id")
    if value is not None and _is_run_id(value):
        if type(value) is uuid.UUID:
            return _uuid_text(value)
        return _text(value, "config run_id")
    return None


def _is_run_id(value: object) -> bool:
    return isinstance(value, (str, int, uuid.UUID)) and not isinstance(value, bool)


#: the last top-level run id seen and its text: LangGraph passes the same UUID object to every put
#: and put_writes of a run, and str(UUID) costs more than the rest of run_id_of
_LAST_UUID: tuple[uuid.UUID, str] | None = None


def _uuid_text(value: uuid.UUID) -> str:
    global _LAST_UUID
    last = _LAST_UUID
    if last is not None and last[0] is value:
        return last[1]
    text = str(value)
    _LAST_UUID = (value, text)
    return text


def _reject(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


# json.dumps builds a new encoder on every call that passes options: build them once (they keep no
# state between calls)
_STRICT_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_reject)
_SAFE_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def encode_json(obj: Any) -> tuple[str, bool]:
    """JSON text for a jsonb column (channel_versions), and whether it lost anything: NUL
    characters and lone surrogates (jsonb cannot hold them), non-JSON values. Metadata has its own
    rules (_metadata.encode)."""
    try:
        text = _STRICT_JSON.encode(obj)
        if not text.isascii():
            text.encode("utf-8")
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return _SAFE_JSON.encode(_metadata.approximate(obj)), True
    if "\\u0000" in text:  # may also be a literal backslash-u0000: re-encoding is then a no-op
        safe = _SAFE_JSON.encode(_metadata.approximate(obj))
        return safe, safe != text
    return text, False


def dump(serde: SerializerProtocol, obj: Any, what: str, name: object = None) -> tuple[str, bytes]:
    """``serde.dumps_typed(obj)``; a failure (a lambda, an open file, a lock in the state) becomes an
    InvalidInputError that names what could not be serialized: ``what`` and ``name`` (a channel).

    LangGraph's msgpack serializer replaces a lone surrogate (``"\\ud800"``) with ``"?"``: a value
    that would come back changed is refused instead, naming where the string is. Only output that
    holds a ``?`` byte can have lost one, so only such values (or encrypted ones, whose bytes
    cannot be looked at) are searched.
    """
    try:
        type_, data = serde.dumps_typed(obj)
    except Exception as exc:
        raise InvalidInputError(
            f"{_label(what, name)} could not be serialized ({type(exc).__name__}: {exc}); "
            "nothing was written"
        ) from exc
    data = bytes(data)
    if type_.startswith("msgpack") and (b"?" in data or "+" in type_) and _has_surrogate(obj):
        where = find_surrogate(obj, _label(what, name))
        if where is not None:
            raise InvalidInputError(
                f"{where} contains a lone surrogate character (such as '\\ud800'), which the "
                "serializer would store as '?'; nothing was written"
            )
    return type_, data


def _label(what: str, name: object) -> str:
    return what if name is None else f"{what} {name!r}"


def _parts(obj: Any) -> list[Any] | None:
    """What a value holds besides what ormsgpack walks itself (containers of other kinds: a deque,
    a set; a compiled pattern's text), or None."""
    if isinstance(obj, Mapping):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, Collection) and not isinstance(obj, (str, bytes, bytearray)):
        return list(obj)
    pattern = getattr(obj, "pattern", None)
    if isinstance(pattern, str):
        return [pattern]
    return None


def _fields(obj: Any) -> Any:
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict):
        return fields
    parts = _parts(obj)
    if parts is not None:
        return parts
    raise TypeError(type(obj).__name__)


# ormsgpack walks the value in native code and refuses a surrogate (LangGraph's serializer asks it
# to replace them); objects pass as their attributes, pydantic models natively
_CHECK_OPTION = ormsgpack.OPT_NON_STR_KEYS | ormsgpack.OPT_SERIALIZE_PYDANTIC


def _has_surrogate(obj: Any) -> bool:
    """Whether a string anywhere in ``obj`` (as find_surrogate looks) holds a lone surrogate: the
    quick search, which builds no paths (6 µs for twenty chat messages, a tenth of serializing
    them)."""
    try:
        ormsgpack.packb(obj, default=_fields, option=_CHECK_OPTION)
    except TypeError as exc:  # ormsgpack.MsgpackEncodeError
        if "surrogate" in str(exc):
            return True
        # what ormsgpack cannot pack (an int over 64 bits, a cycle): the walk that names the path
        return find_surrogate(obj, "") is not None
    return False


def find_surrogate(obj: Any, path: str) -> str | None:
    """Where in ``obj`` a string holds a lone surrogate, as ``path['key'][0].attr``, or None.

    Looks through dicts (keys included), lists, tuples, sets and the attributes of objects (a
    message's content, a dataclass's fields), each object once.
    """
    seen: set[int] = set()

    def walk(item: Any, at: str) -> str | None:
        if isinstance(item, str):
            return None if encodable(item) else at
        if item is None or isinstance(item, (bytes, bytearray, int, float)):
            return None
        if id(item) in seen:
            return None
        seen.add(id(item))
        if isinstance(item, Mapping):
            for key, value in item.items():
                shown = repr(key).encode("utf-8", "backslashreplace").decode()
                if isinstance(key, str) and not encodable(key):
                    return f"{at}: the key {shown}"
                if not isinstance(key, str) and walk(key, "") is not None:
                    return f"{at}: the key {shown}"
                found = walk(value, f"{at}[{shown}]")
                if found is not None:
                    return found
        elif isinstance(item, (list, tuple)) or (
            isinstance(item, Collection)
            and not isinstance(item, (set, frozenset, bytes, bytearray))
            and getattr(item, "__dict__", None) is None
        ):
            for i, value in enumerate(item):
                found = walk(value, f"{at}[{i}]")
                if found is not None:
                    return found
        elif isinstance(item, (set, frozenset)):
            for value in item:
                found = walk(value, f"{at}{{...}}")
                if found is not None:
                    return found
        elif isinstance(getattr(item, "pattern", None), str):
            return walk(item.pattern, f"{at}.pattern")
        else:
            fields = getattr(item, "__dict__", None)
            attrs = dict(fields) if isinstance(fields, dict) else {}
            for slot in getattr(type(item), "__slots__", ()):
                if isinstance(slot, str) and hasattr(item, slot):
                    attrs.setdefault(slot, getattr(item, slot))
            for attr, value in attrs.items():
                found = walk(value, f"{at}.{attr}")
                if found is not None:
                    return found
        return None

    return walk(obj, path)


def sealer(serde: SerializerProtocol) -> KeyringSerializer | None:
    """The serde when it seals values with their place (KeyringSerializer), else None."""
    return serde if isinstance(serde, KeyringSerializer) else None


def dump_at(
    serde: SerializerProtocol,
    obj: Any,
    what: str,
    name: object,
    parts: Place,
    compress: bool = False,
) -> tuple[str, bytes]:
    """:func:`dump`, compressed when ``compress`` and it pays (_compress.pack), then sealed with the
    value's place ``parts`` under a KeyringSerializer (the surrogate check sees the plaintext)."""
    if isinstance(serde, KeyringSerializer):
        type_, data = dump(serde.serde, obj, what, name)
        if compress:
            type_, data = _compress.pack(type_, data)
        return serde.seal(type_, data, parts)
    if compress:
        return _compress.pack(*dump(serde, obj, what, name))
    return dump(serde, obj, what, name)


def load_at(
    serde: SerializerProtocol, type_: str, data: bytes, parts: Place, channel: object = None
) -> Any:
    """A stored value read back: ``parts`` (its place) is checked under a KeyringSerializer; a
    compressed value is decompressed (whatever the saver's own ``compression``)."""
    if isinstance(serde, KeyringSerializer):
        return serde.open(type_, data, parts, channel)
    return _compress.load(serde.loads_typed, type_, data)


def pack_typed(
    serde: SerializerProtocol, obj: Any, what: str = "metadata", parts: Place = ()
) -> bytes:
    """One bytea holding a serde (type, bytes) pair: ``type`` + newline + bytes."""
    type_, data = dump_at(serde, obj, what, None, parts)
    return type_.encode() + b"\n" + data


def unpack_typed(serde: SerializerProtocol, packed: bytes, parts: Place = ()) -> Any:
    type_, _, data = bytes(packed).partition(b"\n")
    return load_at(serde, type_.decode(), data, parts)


def metadata_columns(serde: SerializerProtocol, merged: dict[str, Any]) -> tuple[str, bool, bool]:
    """The metadata jsonb column's text, whether it lost anything (_metadata.encode), and whether
    the exact copy is sealed: under a KeyringSerializer only its ``plaintext_metadata`` keys are
    stored in clear (for filters), and the whole metadata is always sealed in metadata_exact,
    which reads return (so a changed jsonb column cannot change what is read)."""
    crypt = sealer(serde)
    if crypt is None:
        text, lossy = _metadata.encode(merged)
        return text, lossy, False
    visible = {k: v for k, v in merged.items() if k in crypt.plaintext_metadata}
    text, lossy = _metadata.encode(visible)
    return text, lossy, True


def body_place(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, parent: str | None, versions: Any
) -> Place:
    """The place of a checkpoint body: its keys, its parent and its channel versions (stored
    outside the body, in columns of their own), so neither can be changed or rolled back apart
    from the body. Versions as version_key gives them: what put stored is what a read sees."""
    pairs = sorted(
        (str(channel), _stored_version(version)) for channel, version in (versions or {}).items()
    )
    canon = "".join(f"{len(c)}:{c}{'-' if v is None else f'{len(v)}:{v}'}" for c, v in pairs)
    return (
        "checkpoint",
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent is None,
        parent or "",
        canon,
    )


def sealed_metadata(crypt: KeyringSerializer, exact: bytes | None, clear: Any, parts: Place) -> Any:
    """The metadata of a checkpoint row under a KeyringSerializer: the sealed copy; a row without
    one (stored before the serializer) is refused in strict mode, read from jsonb otherwise."""
    if exact:
        return unpack_typed(crypt, exact, parts)
    if crypt.strict:
        where = describe(parts)
        raise DecryptionError(
            f"{where} is stored unsealed, and the KeyringSerializer is strict (pass strict=False "
            "to read such rows while reencrypt converts them)",
            where=where,
        )
    return clear


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
) -> Batch:
    """Parameters of the ``put`` query. Raises before anything is written if the input is unusable.

    The values of ``new_versions`` go as scalars when there are at most ``values_max`` (and at
    least one) of them, otherwise as arrays (``values_max=0``: always arrays). ``compress``: the
    values and the body are stored compressed where that pays (_compress).
    """
    keys = config_keys(config)
    checkpoint_id = _text(checkpoint["id"], "checkpoint id")
    # a checkpoint without channel values (or versions) stores none, and reads back with {}
    values = checkpoint.get("channel_values") or {}
    params: Params = {}
    rows = len(new_versions)
    if 0 < rows <= min(values_max, VALUES_MAX_ROWS):
        for (c, v, t, b), (channel, version) in zip(_BLOB_KEYS, new_versions.items(), strict=False):
            params[c] = _text(channel, "channel name")
            params[v] = version_key(version)
            if channel in values:
                params[t], params[b] = dump_at(
                    serde,
                    values[channel],
                    "the value of channel",
                    channel,
                    ("blob", keys.thread_id, keys.checkpoint_ns, channel, params[v]),
                    compress,
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
                type_, data = dump_at(
                    serde,
                    values[channel],
                    "the value of channel",
                    channel,
                    ("blob", keys.thread_id, keys.checkpoint_ns, channel, versions[-1]),
                    compress,
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
    return Batch(params, rows)


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


# --------------------------------------------------------------------------- reads


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


def checkpoints_in(name: str, rows: Sequence[Sequence[Any]]) -> int:
    """How many checkpoints rows of ``read_tuples`` (kind 2 rows) or ``list_keys`` (one each)
    hold."""
    if name == "list_keys":
        return len(rows)
    return sum(1 for row in rows if row[0] == 2)


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
    """The keys of the ``list_keys`` rows (thread, namespace, id, metadata, metadata_exact) whose
    metadata matches, in order, at most ``limit``."""
    keys: list[tuple[str, str, str]] = []
    crypt = sealer(serde)
    for row in rows:
        if crypt is not None:
            metadata = sealed_metadata(crypt, row[4], row[3], ("metadata", row[0], row[1], row[2]))
        else:
            metadata = unpack_typed(serde, row[4]) if row[4] else row[3]
        if _metadata.matches(plan.filter, metadata):
            keys.append((row[0], row[1], row[2]))
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
    writes: dict[tuple[str, str, str], list[tuple[str, str, str, bytes | None, int, str]]] = {}
    for row in rows:
        kind = row[0]
        if kind == 0:
            # type, data, and the decoded value once known to be shareable
            values[(row[1], row[2], row[3], row[4])] = [row[5], row[6], _UNSET]
        elif kind == 1:
            writes.setdefault((row[1], row[2], row[3]), []).append(
                (row[4], row[7], row[5], row[6], row[9], row[8])
            )
        else:
            yield _checkpoint_tuple(serde, row, values, writes)


def _stored_version(version: object) -> str | None:
    """The blob key of a version read back from ``channel_versions`` (what ``put`` keyed it by), or
    None for a version no blob can have (JSON null, or what put would have refused)."""
    if version is None:
        return None
    try:
        return version_key(version)
    except InvalidInputError:
        return None


_UNSET = object()
_SHAREABLE = frozenset({str, int, float, bool, bytes, type(None)})


def _checkpoint_tuple(
    serde: SerializerProtocol,
    row: Sequence[Any],
    values: dict[tuple[str, str, str, str], list[Any]],
    writes: dict[tuple[str, str, str], list[tuple[str, str, str, bytes | None, int, str]]],
) -> CheckpointTuple:
    thread_id, checkpoint_ns, checkpoint_id, parent_id = row[1], row[2], row[3], row[4]
    if isinstance(serde, KeyringSerializer):
        return _sealed_checkpoint_tuple(serde, row, values, writes)
    loads = _compress.decoder(serde.loads_typed)  # decoded in place, as in get_tuple_rows_to_tuple
    checkpoint: dict[str, Any] = loads((row[5], row[6]))
    checkpoint["channel_versions"] = row[10]
    channel_values: dict[str, Any] = {}
    for channel, version in (row[10] or {}).items():
        key = version if type(version) is str else _stored_version(version)
        found = None if key is None else values.get((thread_id, checkpoint_ns, channel, key))
        if found is not None:
            value = found[2]
            if value is _UNSET:
                if found[0].endswith(_compress.SUFFIX):
                    # decompressed once: the next checkpoints that hold it only decode it
                    found[0], found[1] = _compress.unpack(found[0], found[1] or b"")
                value = loads((found[0], found[1] or b""))
                if type(value) in _SHAREABLE:
                    found[2] = value
            channel_values[channel] = value
    checkpoint["channel_values"] = channel_values
    metadata = unpack_typed(serde, row[12]) if row[12] else row[11]
    pending: list[PendingWrite] = [
        (task, channel, loads((type_, data or b"")))
        for task, channel, type_, data, _, _ in writes.get(
            (thread_id, checkpoint_ns, checkpoint_id), ()
        )
    ]
    return _tuple(thread_id, checkpoint_ns, checkpoint_id, parent_id, checkpoint, metadata, pending)


def _sealed_checkpoint_tuple(
    crypt: KeyringSerializer,
    row: Sequence[Any],
    values: dict[tuple[str, str, str, str], list[Any]],
    writes: dict[tuple[str, str, str], list[tuple[str, str, str, bytes | None, int, str]]],
) -> CheckpointTuple:
    """_checkpoint_tuple under a KeyringSerializer: every value opened at its own place."""
    thread_id, checkpoint_ns, checkpoint_id, parent_id = row[1], row[2], row[3], row[4]
    here = (thread_id, checkpoint_ns, checkpoint_id)
    opened = crypt.open
    checkpoint: dict[str, Any] = opened(row[5], row[6], body_place(*here, parent_id, row[10]))
    checkpoint["channel_versions"] = row[10]
    channel_values: dict[str, Any] = {}
    for channel, version in (row[10] or {}).items():
        key = version if type(version) is str else _stored_version(version)
        found = None if key is None else values.get((thread_id, checkpoint_ns, channel, key))
        if found is not None:
            value = found[2]
            if value is _UNSET:
                value = opened(
                    found[0], found[1] or b"", ("blob", thread_id, checkpoint_ns, channel, key)
                )
                if type(value) in _SHAREABLE:
                    found[2] = value
            channel_values[channel] = value
    checkpoint["channel_values"] = channel_values
    metadata = sealed_metadata(crypt, row[12], row[11], ("metadata", *here))
    pending: list[PendingWrite] = [
        (task, channel, opened(type_, data or b"", ("write", *here, task, idx, channel, path)))
        for task, channel, type_, data, idx, path in writes.get(here, ())
    ]
    return _tuple(thread_id, checkpoint_ns, checkpoint_id, parent_id, checkpoint, metadata, pending)


#: the column of get_tuple's rows that holds values and the body: what measures its result
GET_TUPLE_BYTES = 4


def get_tuple_rows_to_tuple(
    serde: SerializerProtocol, rows: Sequence[Sequence[Any]]
) -> CheckpointTuple | None:
    """The rows of ``get_tuple`` (one checkpoint: values, writes in order, then the checkpoint) as
    a CheckpointTuple, or None when no checkpoint matched."""
    if isinstance(serde, KeyringSerializer):
        return _sealed_get_tuple(serde, rows)
    head: Sequence[Any] | None = None
    channel_values: dict[str, Any] = {}
    pending: list[PendingWrite] = []
    loads = _compress.decoder(serde.loads_typed)
    # decoded in place (a NULL value, never stored for a real value, reads as b""): a helper call
    # per value was a fifth of this function
    for row in rows:
        kind = row[0]
        if kind == 0:
            channel_values[row[1]] = loads((row[3], row[4] or b""))
        elif kind == 1:
            pending.append((row[1], row[2], loads((row[3], row[4] or b""))))
        else:
            head = row
    if head is None:
        return None
    checkpoint: dict[str, Any] = loads((head[3], head[4]))
    versions = head[7]
    checkpoint["channel_versions"] = versions
    # in the order of channel_versions, as list() gives them
    checkpoint["channel_values"] = {
        channel: channel_values[channel] for channel in versions or () if channel in channel_values
    }
    metadata = unpack_typed(serde, head[9]) if head[9] else head[8]
    return _tuple(
        head[10],
        head[11],
        head[1],
        head[2],
        checkpoint,
        metadata,
        pending,
    )


def _sealed_get_tuple(
    crypt: KeyringSerializer, rows: Sequence[Sequence[Any]]
) -> CheckpointTuple | None:
    """get_tuple_rows_to_tuple under a KeyringSerializer (the head row, last, names the place)."""
    if not rows or rows[-1][0] != 2:
        return None
    head = rows[-1]
    thread_id, checkpoint_ns, checkpoint_id = head[10], head[11], head[1]
    here = (thread_id, checkpoint_ns, checkpoint_id)
    opened = crypt.open
    channel_values: dict[str, Any] = {}
    pending: list[PendingWrite] = []
    for row in rows[:-1]:
        if row[0] == 0:
            blob: Place = ("blob", thread_id, checkpoint_ns, row[1], row[2])
            channel_values[row[1]] = opened(row[3], row[4] or b"", blob)
        else:
            write: Place = ("write", *here, row[1], row[6], row[2], row[5])
            pending.append((row[1], row[2], opened(row[3], row[4] or b"", write)))
    checkpoint: dict[str, Any] = opened(head[3], head[4], body_place(*here, head[2], head[7]))
    versions = head[7]
    checkpoint["channel_versions"] = versions
    checkpoint["channel_values"] = {
        channel: channel_values[channel] for channel in versions or () if channel in channel_values
    }
    metadata = sealed_metadata(crypt, head[9], head[8], ("metadata", *here))
    return _tuple(thread_id, checkpoint_ns, checkpoint_id, head[2], checkpoint, metadata, pending)


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


# --------------------------------------------------------------------------- checkpoints before format 4

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
    for thread_id, ns, checkpoint_id, type_, blob, task_id, idx, path in rows:
        parts = ("write", thread_id, ns, checkpoint_id, task_id, idx, TASKS, path)
        sends.setdefault((thread_id, ns, checkpoint_id), []).append(
            load_at(serde, type_, blob or b"", parts)
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


# --------------------------------------------------------------------------- versions


def next_version(current: str | int | float | None) -> str:
    """The next channel version, in the official Postgres saver's format.

    A zero-padded counter and a random fraction: ``"00000000000000000000000000000002.0.52..."``-like
    strings that sort as text in version order and stay comparable with versions that saver wrote.
    """
    if current is None:
        counter = 0
    elif isinstance(current, (int, float)):
        counter = int(current)
    else:
        counter = int(current.split(".")[0])
    return f"{counter + 1:032}.{random.random():016}"
