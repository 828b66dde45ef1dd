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
keyed by a secret derived from the current key and the thread (so the stored keys do not let
anyone confirm a guess of an element, nor see that two threads hold the same one), and the blob holds, before the header, the list's *seal*: an AES-GCM tag
over the value's place (thread, namespace, channel, version), the header and the keys in order.
A read opens each part and checks the seal against the keys the parts hold
(``KeyringSerializer.open_list``): a part swapped, reordered, changed or removed, or a value moved
to another place, fails authentication. Parts carry no place, so ``copy_thread`` copies them as
they are and seals the target's lists again.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.codec.compress import LIST_TYPE, pack_part
from langgraph_pg_saver.codec.crypto import KeyringSerializer, Place
from langgraph_pg_saver.codec.values import dump
from langgraph_pg_saver.errors import CorruptValueError, InvalidInputError

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
    current key and the thread, ``place[1]``: equal elements of a thread are found equal, their
    contents are not revealed, nor their equality across threads), and the blob
    carries the list's seal for ``place`` before its header (``KeyringSerializer.seal_list``)."""
    crypt = serde if isinstance(serde, KeyringSerializer) else None
    inner = serde if crypt is None else crypt.serde
    # sealed: keys digested with a secret of the current key and the thread (place[1]), so that
    # equal elements of two threads are not seen to be equal
    secret = (
        None
        if crypt is None
        else hashlib.blake2b(
            str(place[1] if len(place) > 1 else "").encode("utf-8", "surrogatepass"),
            digest_size=32,
            key=crypt.keyring.secret(b"elements"),
        ).digest()
    )
    # the list serialized once, as stored whole, then cut at its elements' bounds
    try:
        type_, whole = dump(inner, value, what, name)
    except InvalidInputError:
        # named by its element: the first that cannot be serialized on its own
        label = f"{what} {name!r}, element" if name is not None else what
        for i, item in enumerate(value):
            dump(inner, [item], label, i)
        raise
    if type_ != MSGPACK:
        return None
    bounds = element_bounds(whole)
    if bounds is None or len(bounds) != len(value) + 1:
        return None
    datas = [whole[a:b] for a, b in itertools.pairwise(bounds)]
    keys = [element_key(data, secret) for data in datas]
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


#: bytes after the first of a msgpack value with no elements, by its first byte: fixed-size
#: scalars (-1: a length follows, or elements)
_FIXED = [0] * 256
for _b in (*range(0x80, 0xA0), *range(0xC0, 0xE0)):  # maps, arrays, and what has a length
    _FIXED[_b] = -1
_FIXED[0xC0] = _FIXED[0xC2] = _FIXED[0xC3] = 0
_FIXED[0xCA], _FIXED[0xCB] = 4, 8
_FIXED[0xCC], _FIXED[0xCD], _FIXED[0xCE], _FIXED[0xCF] = 1, 2, 4, 8
_FIXED[0xD0], _FIXED[0xD1], _FIXED[0xD2], _FIXED[0xD3] = 1, 2, 4, 8
_FIXED[0xD4], _FIXED[0xD5], _FIXED[0xD6], _FIXED[0xD7], _FIXED[0xD8] = 2, 3, 5, 9, 17
for _b in range(0xA0, 0xC0):  # fixstr
    _FIXED[_b] = _b - 0xA0
#: a length of 1, 2 or 4 bytes then that many bytes (+1: ext, whose type byte follows the length)
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1),
          0xD9: (1, 0), 0xDA: (2, 0), 0xDB: (4, 0)}  # fmt: skip
#: a count of 2 or 4 bytes then that many elements (x2: a map's keys and values)
_COUNTED = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}


def element_bounds(data: bytes) -> list[int] | None:
    """Where each element of a msgpack array starts, and where the last ends (the array's header
    before the first), or None when ``data`` is not one whole msgpack array. Strings, binaries
    and extensions (LangChain's messages) are stepped over by their lengths; maps and arrays
    within an element are walked."""
    n = len(data)
    if n == 0:
        return None
    first = data[0]
    if 0x90 <= first <= 0x9F:
        count, i = first - 0x90, 1
    elif first == 0xDC and n >= 3:
        count, i = int.from_bytes(data[1:3], "big"), 3
    elif first == 0xDD and n >= 5:
        count, i = int.from_bytes(data[1:5], "big"), 5
    else:
        return None
    bounds = [i]
    fixed, sized, counted = _FIXED, _SIZED, _COUNTED
    for _ in range(count):
        pending = 1  # values still to step over in this element
        while pending:
            if i >= n:
                return None
            b = data[i]
            pending -= 1
            size = fixed[b]
            if size >= 0:
                i += 1 + size
            elif b <= 0x8F:  # fixmap (0x80-0x8f; fixints are fixed)
                pending += 2 * (b - 0x80)
                i += 1
            elif b <= 0x9F:  # fixarray
                pending += b - 0x90
                i += 1
            elif b in sized:
                width, extra = sized[b]
                length = int.from_bytes(data[i + 1 : i + 1 + width], "big")
                i += 1 + width + extra + length
            elif b in counted:
                width, per = counted[b]
                pending += per * int.from_bytes(data[i + 1 : i + 1 + width], "big")
                i += 1 + width
            else:  # 0xc1: never used
                return None
        bounds.append(i)
    if i != n:
        return None
    return bounds


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
