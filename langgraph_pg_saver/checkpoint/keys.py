"""A call's config and input as keys: thread, namespace and checkpoint ids as Postgres text,
channel versions as the text blobs are keyed by, the run a call belongs to, the metadata a put
stores, and the place a checkpoint body is sealed for. No I/O happens here."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import EXCLUDED_METADATA_KEYS, CheckpointMetadata

from langgraph_pg_saver.codec.crypto import Place
from langgraph_pg_saver.errors import InvalidInputError

Params = dict[str, Any]


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


def stored_version(version: object) -> str | None:
    """The blob key of a version read back from ``channel_versions`` (what ``put`` keyed it by), or
    None for a version no blob can have (JSON null, or what put would have refused)."""
    if version is None:
        return None
    try:
        return version_key(version)
    except InvalidInputError:
        return None


def body_place(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, parent: str | None, versions: Any
) -> Place:
    """The place of a checkpoint body: its keys, its parent and its channel versions (stored
    outside the body, in columns of their own), so neither can be changed or rolled back apart
    from the body. Versions as version_key gives them: what put stored is what a read sees."""
    pairs = sorted(
        (str(channel), stored_version(version)) for channel, version in (versions or {}).items()
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
