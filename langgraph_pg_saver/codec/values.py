"""Stored values: a serde's (type, bytes) pair checked, compressed where it pays, sealed with its
place under a KeyringSerializer, and opened again at that place. No I/O happens here.

Every value a saver stores goes through ``dump_at`` and comes back through ``load_at`` (or
``opener``, its per-read form, and ``open_exact`` for a value also kept as jsonb): under a KeyringSerializer the value is bound to its place (the
keys of its row), so a value moved to another row does not open; under any other serde the place
is not looked at.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Protocol

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.codec import compress as _compress
from langgraph_pg_saver.codec.crypto import KeyringSerializer, Place, describe
from langgraph_pg_saver.codec.jsonb import encodable
from langgraph_pg_saver.errors import DecryptionError, InvalidInputError


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


class Opener(Protocol):
    """How a read opens each stored value: (type, bytes, place) -> the value; ``channel`` only
    names the value in errors."""

    def __call__(self, type_: str, data: bytes, parts: Place, channel: object = None) -> Any: ...


def opener(serde: SerializerProtocol) -> Opener:
    """The one way reads open a stored value at its place: a KeyringSerializer's ``open`` (the
    place checked), or for any other serde its ``loads_typed``, decompressing first what was stored
    compressed (there is no place to check). ``load_at``, once per read rather than per value."""
    if isinstance(serde, KeyringSerializer):
        return serde.open
    loads = serde.loads_typed
    load = _compress.load

    def open_plain(type_: str, data: bytes, parts: Place, channel: object = None) -> Any:
        return load(loads, type_, data)

    return open_plain


def open_exact(serde: SerializerProtocol, exact: bytes | None, clear: Any, parts: Place) -> Any:
    """A value stored twice, as a jsonb column and, when jsonb would change it or it is sealed, as
    the serde's packed copy ``exact`` (pack_typed): that copy opened at ``parts`` when there is
    one, else ``clear``. Under a strict KeyringSerializer a row without the copy (stored before
    the serializer) is refused instead of read from jsonb."""
    if exact:
        return unpack_typed(serde, exact, parts)
    if isinstance(serde, KeyringSerializer) and serde.strict:
        raise DecryptionError.unsealed(describe(parts), "stored unsealed", "rows")
    return clear
