"""A list stored as its elements, each once per thread (issue 34's encoding). No I/O happens here.

**Not used by the savers yet**: this is the encoding's first step, its rules proven on their own
(``tests/unit/test_elements.py``); the tables, statements and lifecycle that store and read it come
next (docs/design.md, section 15).

LangGraph stores, at every checkpoint, the whole value of each channel that changed, so an
appended list (``messages`` with ``add_messages``) is written again in full at every step and a
thread's storage grows with the square of its length. Here a list value becomes:

- its **elements**, each serialized by the serde on its own and named by its **key**: a 16-byte
  BLAKE2b digest of its type and bytes (keyed with a secret under encryption, so that a key tells
  nothing about content one could guess). A thread stores an element once, whichever versions and
  checkpoints hold it;
- **frames**: runs of consecutive elements stored together (one row to read instead of one per
  element; compressed together). A frame ends after an element whose key's last byte is a
  multiple of :data:`FRAME_SPLIT` (or at :data:`FRAME_MAX` elements), so its bounds depend on its
  elements, not on their positions: a list that grows at its end, or loses elements at its start,
  keeps its earlier frames. A frame's key is the digest of its elements' keys;
- the **version's value** (:func:`split`'s ``blob``): the keys of its frames, then those of the
  elements after the last frame (the *tail*, fewer than FRAME_MAX, stored as elements).

A version that extends its predecessor by k elements therefore costs its new tail elements and at
most one new frame per element, plus 16 bytes per frame and tail element in its value: about its
new elements, not the list (``test_extending_costs_the_new_elements``). Reading a version reads its
value, its frames and its tail elements (:func:`join`), checks every element's and frame's key
against its bytes (a row changed or swapped outside the saver raises CorruptValueError rather than
returning another value), and loads each element with the serde: the list that comes back is the
list the plain encoding returns (types, order, duplicates, nesting: ``test_round_trip``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.codec.values import dump
from langgraph_pg_saver.errors import CorruptValueError

#: bytes of a key (element or frame)
KEY_BYTES = 16
#: a frame ends after an element whose key's last byte is a multiple of this: 16 elements a frame
#: on average
FRAME_SPLIT = 16
#: ... or once it holds this many elements
FRAME_MAX = 256
#: the type of a stored list value (no serde names a type so) and of a frame
LIST_TYPE = "pgsaver.list"
FRAME_TYPE = "pgsaver.frame"
#: the value's first bytes: the encoding's version
_MAGIC = b"L1"
_HEAD = len(_MAGIC) + 4  # magic, then the number of frame keys (4 bytes, big-endian)


@dataclass(frozen=True)
class Part:
    """A row a list value needs: an element (``type`` and ``data`` as the serde made them) or a
    frame (``type`` FRAME_TYPE, ``data`` its elements' types and bytes, msgpack)."""

    key: bytes
    type: str
    data: bytes

    @property
    def is_frame(self) -> bool:
        return self.type == FRAME_TYPE


def storable(value: Any) -> bool:
    """Whether a channel value is stored as its elements: a plain ``list`` (not a subclass, whose
    type the serde keeps) that is not empty."""
    return type(value) is list and len(value) > 0


def element_key(type_: str, data: bytes, secret: bytes = b"") -> bytes:
    """An element's key: the digest of its serialized type and bytes (keyed by ``secret``)."""
    h = hashlib.blake2b(digest_size=KEY_BYTES, key=secret)
    h.update(type_.encode("utf-8"))
    h.update(b"\x00")
    h.update(data)
    return h.digest()


def frame_key(keys: Sequence[bytes], secret: bytes = b"") -> bytes:
    """A frame's key: the digest of its elements' keys, in order."""
    h = hashlib.blake2b(digest_size=KEY_BYTES, key=secret, person=b"pgsaver-frame")
    for key in keys:
        h.update(key)
    return h.digest()


def split(
    serde: SerializerProtocol,
    value: Sequence[Any],
    *,
    secret: bytes = b"",
    what: str = "the value of channel",
    name: object = None,
) -> tuple[bytes, list[Part]]:
    """A list value as the version's ``blob`` (its frames' and tail elements' keys) and the parts
    it refers to (each once). Raises InvalidInputError naming ``what`` / ``name`` and the
    element's index if an element cannot be serialized."""
    keys: list[bytes] = []
    dumped: list[tuple[str, bytes]] = []
    for i, item in enumerate(value):
        type_, data = dump(serde, item, f"{what} {name!r}, element" if name else what, i)
        keys.append(element_key(type_, data, secret))
        dumped.append((type_, data))
    parts: dict[bytes, Part] = {}
    frames: list[bytes] = []
    start = 0
    for i, key in enumerate(keys):
        if key[-1] % FRAME_SPLIT == 0 or i + 1 - start == FRAME_MAX:
            fkey = frame_key(keys[start : i + 1], secret)
            if fkey not in parts:
                data = ormsgpack.packb([[t, d] for t, d in dumped[start : i + 1]])
                parts[fkey] = Part(fkey, FRAME_TYPE, data)
            frames.append(fkey)
            start = i + 1
    for i in range(start, len(keys)):
        if keys[i] not in parts:
            parts[keys[i]] = Part(keys[i], *dumped[i])
    blob = _MAGIC + len(frames).to_bytes(4, "big") + b"".join(frames) + b"".join(keys[start:])
    return blob, list(parts.values())


def refs(blob: bytes) -> tuple[list[bytes], list[bytes]]:
    """The keys a stored list value refers to: (frame keys, tail element keys), in order."""
    if len(blob) < _HEAD or blob[: len(_MAGIC)] != _MAGIC or (len(blob) - _HEAD) % KEY_BYTES:
        raise CorruptValueError(
            f"a stored list value ({len(blob)} bytes) is not in the element encoding "
            f"{_MAGIC.decode()}: its bytes were changed outside the saver"
        )
    count = int.from_bytes(blob[len(_MAGIC) : _HEAD], "big")
    keys = [bytes(blob[i : i + KEY_BYTES]) for i in range(_HEAD, len(blob), KEY_BYTES)]
    if count > len(keys):
        raise CorruptValueError(
            f"a stored list value names {count} frames but holds {len(keys)} keys: its bytes "
            "were changed outside the saver"
        )
    return keys[:count], keys[count:]


def join(
    blob: bytes,
    parts: Mapping[bytes, tuple[str, bytes]],
    load: Callable[[str, bytes], Any],
    *,
    secret: bytes = b"",
    name: object = None,
) -> list[Any]:
    """The list a stored value holds: its frames' and tail elements' parts (``parts``: key ->
    (type, data), as stored) checked against their keys and loaded with ``load`` (the serde's
    ``loads_typed`` as a two-argument call). A missing or changed part raises
    CorruptValueError naming the channel ``name``."""
    frames, tail = refs(blob)
    out: list[Any] = []
    where = "a stored list value" if name is None else f"the value of channel {name!r}"
    for fkey in frames:
        type_, data = _part(parts, fkey, where, "frame")
        members = ormsgpack.unpackb(data) if type_ == FRAME_TYPE else None
        if not isinstance(members, list):
            raise CorruptValueError(f"{where}: frame {fkey.hex()} is not a frame")
        keys = []
        for member in members:
            t, d = member
            keys.append(element_key(t, d, secret))
            out.append(load(t, d))
        if frame_key(keys, secret) != fkey:
            raise CorruptValueError(
                f"{where}: frame {fkey.hex()} does not hold the elements its key names: it was "
                "changed outside the saver"
            )
    for key in tail:
        type_, data = _part(parts, key, where, "element")
        if element_key(type_, data, secret) != key:
            raise CorruptValueError(
                f"{where}: element {key.hex()} does not hold the bytes its key names: it was "
                "changed outside the saver"
            )
        out.append(load(type_, data))
    return out


def _part(
    parts: Mapping[bytes, tuple[str, bytes]], key: bytes, where: str, kind: str
) -> tuple[str, bytes]:
    found = parts.get(key)
    if found is None:
        raise CorruptValueError(f"{where}: its {kind} {key.hex()} is not stored")
    return found
