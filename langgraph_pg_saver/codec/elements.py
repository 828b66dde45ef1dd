"""A list stored as its elements, each once per thread (issue 34). No I/O happens here.

LangGraph stores, at every checkpoint, the whole value of each channel that changed, so an
appended list (``messages`` with ``add_messages``) is written again in full at every step and a
thread's storage grows with the square of its length. With ``list_storage="elements"`` a list value
is stored as:

- its **elements**: each element's msgpack bytes exactly as they sit inside the serialized list (a
  msgpack array is its header followed by its elements' encodings, one after the other), named by
  its **key**, a 16-byte BLAKE2b digest of those bytes. A thread stores a part once
  (``pgsaver_elements``, keyed by thread and key), whichever versions and checkpoints hold it;
- **frames**: runs of consecutive elements stored as one part (their bytes concatenated: one row
  to read instead of one per element, compressed together). A frame ends after an element whose
  key's last byte is a multiple of :data:`FRAME_SPLIT` (or at :data:`FRAME_MAX` elements), so its
  bounds depend on its elements, not on their positions: a list that grows at its end, or loses
  elements at its start, keeps its earlier frames. A frame's key is the digest of its elements'
  keys;
- the **version's value** (type :data:`LIST_TYPE`, :func:`split`'s ``blob``): ``b"L"``, the length
  of the msgpack array header, the header, then the keys of its parts in order (its frames, then
  the elements after the last frame, the *tail*).

Each part is stored as a byte saying how, then its bytes: a zstd frame where compression is on and
pays (``compress.pack_part``). Every statement that reads values returns, for such a value, the
header and each part it names after the part's length, found by primary key (queries.sql,
``_list_value``), or NULL when a part is not there; ``compress.assembled`` decompresses the parts
and joins them after the header: the very bytes the serde stores for the whole list
(``tests/unit/test_elements.py``), which it then decodes in one call. A NULL is a
CorruptValueError, never a shorter list.

Only lists that the serde writes as plain msgpack are stored so (LangGraph's default
JsonPlusSerializer, or the one inside a KeyringSerializer): any element that it would serialize
otherwise (pickle, another encrypting serde) keeps the whole value in the plain encoding.

Under a KeyringSerializer every part is sealed (AES-GCM) together with its key, keys are digests
keyed by a secret derived from the current key (so the stored keys do not let anyone confirm a
guess of an element), and the blob holds, before the header, the list's *seal*: an AES-GCM tag
over the value's place (thread, namespace, channel, version), the header and the keys in order.
A read opens each part and checks the seal against the keys the parts hold
(``KeyringSerializer.open_list``): a part swapped, reordered, changed or removed, or a value moved
to another place, fails authentication. Parts carry no place, so ``copy_thread`` copies them as
they are and seals the target's lists again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.codec.compress import LIST_TYPE, pack_part
from langgraph_pg_saver.codec.crypto import KeyringSerializer, Place
from langgraph_pg_saver.codec.values import dump
from langgraph_pg_saver.errors import CorruptValueError

__all__ = [
    "LIST_TYPE",
    "ListStorage",
    "Part",
    "assemble",
    "check_storage",
    "refs",
    "split",
    "storable",
]

#: bytes of a key (element or frame)
KEY_BYTES = 16
#: a frame ends after an element whose key's last byte is a multiple of this: 16 elements a frame
#: on average
FRAME_SPLIT = 16
#: ... or once it holds this many elements
FRAME_MAX = 256
#: the serde type of the list the parts assemble into
MSGPACK = "msgpack"
_MAGIC = b"L"
#: the savers' ``list_storage`` option: "whole" (each version's value as the serde writes it) or
#: "elements"
ListStorage = Literal["whole", "elements"]


def check_storage(list_storage: object) -> ListStorage:
    """``list_storage`` as given, or a ValueError that names it."""
    if list_storage not in ("whole", "elements"):
        raise ValueError(f"list_storage must be 'whole' or 'elements', not {list_storage!r}")
    return list_storage


@dataclass(frozen=True)
class Part:
    """A row a list value needs: one element's bytes, or a frame's (its elements' bytes
    concatenated)."""

    key: bytes
    data: bytes
    is_frame: bool = False


def storable(value: Any) -> bool:
    """Whether a channel value may be stored as its elements: a plain ``list`` (not a subclass,
    whose type the serde keeps) that is not empty."""
    return type(value) is list and len(value) > 0


def element_key(data: bytes, secret: bytes | None = None) -> bytes:
    """An element's key: the digest of its bytes (keyed by ``secret`` for a sealed list)."""
    if secret is None:
        return hashlib.blake2b(data, digest_size=KEY_BYTES).digest()
    return hashlib.blake2b(data, digest_size=KEY_BYTES, key=secret).digest()


def frame_key(keys: Sequence[bytes]) -> bytes:
    """A frame's key: the digest of its elements' keys, in order."""
    h = hashlib.blake2b(digest_size=KEY_BYTES, person=b"pgsaver-frame")
    for key in keys:
        h.update(key)
    return h.digest()


def array_header(n: int) -> bytes:
    """The msgpack header of an array of ``n`` elements."""
    if n < 16:
        return bytes((0x90 | n,))
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


#: parts already packed (compressed; sealed under a KeyringSerializer), by key, compression and
#: the current key id of the sealing keyring: a part's key names its bytes, so a thread's next put
#: finds its frames here instead of compressing (and sealing) them again (a bounded cache, emptied
#: when full)
_PACKED: dict[tuple[bytes, bool, str | None], bytes] = {}
_PACKED_MAX = 4096


def _packed(
    key: bytes, compress: bool, data: Callable[[], bytes], crypt: KeyringSerializer | None
) -> bytes:
    cached = (key, compress, None if crypt is None else crypt.keyring.current)
    found = _PACKED.get(cached)
    if found is None:
        found = pack_part(data(), compress)
        if crypt is not None:
            found = crypt.seal_part(key, found)
        if len(_PACKED) >= _PACKED_MAX:
            _PACKED.clear()
        _PACKED[cached] = found
    return found


def split(
    serde: SerializerProtocol,
    value: Sequence[Any],
    *,
    what: str = "the value of channel",
    name: object = None,
    compress: bool = True,
    place: Place = (),
) -> tuple[bytes, list[Part]] | None:
    """A list value as the version's ``blob`` and the parts it names (each once, as stored:
    :func:`compress.pack_part`, zstd where ``compress`` and it pays), or None when the serde does
    not write every element as plain msgpack (the value is then stored whole). Raises
    InvalidInputError naming ``what`` / ``name`` and the element's index if an element cannot be
    serialized.

    Under a KeyringSerializer (its inner serde writes the elements) each part is sealed with its
    key (``KeyringSerializer.seal_part``), keys are keyed digests (a secret derived from the
    current key: equal elements are found equal, their contents are not revealed), and the blob
    carries the list's seal for ``place`` before its header (``KeyringSerializer.seal_list``)."""
    crypt = serde if isinstance(serde, KeyringSerializer) else None
    inner = serde if crypt is None else crypt.serde
    secret = None if crypt is None else crypt.keyring.secret(b"elements")
    keys: list[bytes] = []
    datas: list[bytes] = []
    label = f"{what} {name!r}, element" if name is not None else what
    for i, item in enumerate(value):
        # the element as it sits in a list: a one-element array's encoding without its header
        type_, data = dump(inner, [item], label, i)
        if type_ != MSGPACK or data[:1] != b"\x91":
            return None
        data = data[1:]
        keys.append(element_key(data, secret))
        datas.append(data)
    parts: dict[bytes, Part] = {}
    refs: list[bytes] = []
    start = 0
    for i, key in enumerate(keys):
        if key[-1] % FRAME_SPLIT == 0 or i + 1 - start == FRAME_MAX:
            fkey = frame_key(keys[start : i + 1])
            if fkey not in parts:
                members = datas[start : i + 1]
                packed = _packed(fkey, compress, partial(b"".join, members), crypt)
                parts[fkey] = Part(fkey, packed, True)
            refs.append(fkey)
            start = i + 1
    for i in range(start, len(keys)):
        refs.append(keys[i])
        if keys[i] not in parts:
            packed = _packed(keys[i], compress, partial(bytes, datas[i]), crypt)
            parts[keys[i]] = Part(keys[i], packed)
    header = array_header(len(keys))
    region = header if crypt is None else crypt.seal_list(header, refs, place) + header
    if len(region) > 255:
        return None  # a key id too long for the seal to fit (over 217 bytes): stored whole
    blob = _MAGIC + bytes((len(region),)) + region + b"".join(refs)
    return blob, list(parts.values())


def refs(blob: bytes) -> list[bytes]:
    """The keys of the parts a stored list value names, in order."""
    head = 2 + (blob[1] if len(blob) > 1 else 0)
    if len(blob) < 3 or blob[:1] != _MAGIC or (len(blob) - head) % KEY_BYTES:
        raise CorruptValueError(
            f"a stored list value ({len(blob)} bytes) is not in the element encoding: its bytes "
            "were changed outside the saver"
        )
    return [bytes(blob[i : i + KEY_BYTES]) for i in range(head, len(blob), KEY_BYTES)]


def assemble(blob: bytes, parts: Mapping[bytes, bytes]) -> bytes | None:
    """What the statements' ``_list_value`` returns, built in Python (tests, tools): the header's
    length and the header, then each part as stored, after its 4-byte length (what
    :func:`compress.assembled` turns into the serialized list); None when a part is missing."""
    out = [bytes(blob[1 : 2 + blob[1]])]
    for key in refs(blob):
        data = parts.get(key)
        if data is None:
            return None
        out.append(len(data).to_bytes(4, "big") + data)
    return b"".join(out)
