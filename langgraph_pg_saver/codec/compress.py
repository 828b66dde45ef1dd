"""Compression of stored values: zstd at level 1, marked in the value's type.

A value the saver stores (a channel value, a pending write, a checkpoint body) is serialized by the
serde into ``(type, bytes)``. With compression on (the savers' default, ``compression="zstd"``), bytes
of at least :data:`MIN_SIZE` (512 bytes) whose zstd frame saves at least an eighth are stored as that frame, and
the type gains :data:`SUFFIX` (``"msgpack"`` becomes ``"msgpack/zstd"``); anything else is stored as
it was. Under a KeyringSerializer the frame is what gets encrypted (ciphertext does not compress), so
the suffix sits inside the sealed inner type.

Reading looks only at the type: any saver, whatever its ``compression``, reads both forms, so the
option can change at any time and rows written either way stay readable.

What it buys and costs, as ``make bench`` measured it (docs/performance.md, "Compression"): the
storage of its payloads went from 0.74x to 0.46x of the official saver's, and reads pay the
decompression of every value they decode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

import zstandard

from langgraph_pg_saver.errors import CorruptValueError, DecryptionError

#: the compression option's values: "zstd" (default) or None (store values as serialized)
Compression = Literal["zstd"] | None
#: appended to the type of a value stored compressed
SUFFIX = "/zstd"
#: the type suffix of a value sealed by a KeyringSerializer (_crypto.SUFFIX, which imports this
#: module): what a saver without that serializer cannot read
SEALED = "+aead"
#: values shorter than this are stored as they are: below it, a frame's header and tables eat most
#: of the gain (a 2 KB threshold was measured too: docs/performance.md, "Compression")
MIN_SIZE = 512
LEVEL = 1
#: the type of a list value stored as its elements (codec/elements.py), which a read receives
#: assembled into the serialized list
LIST_TYPE = "pgsaver.list"

_local = threading.local()  # zstd contexts are reusable but not shareable between threads


def check(compression: object) -> Compression:
    """``compression`` as given, or a ValueError that names it."""
    if compression is not None and compression != "zstd":
        raise ValueError(f"compression must be 'zstd' or None, not {compression!r}")
    return compression


def _compressor() -> zstandard.ZstdCompressor:
    try:
        return _local.compressor  # type: ignore[no-any-return]
    except AttributeError:
        _local.compressor = zstandard.ZstdCompressor(level=LEVEL)
        return _local.compressor  # type: ignore[no-any-return]


def _decompressor() -> zstandard.ZstdDecompressor:
    try:
        return _local.decompressor  # type: ignore[no-any-return]
    except AttributeError:
        _local.decompressor = zstandard.ZstdDecompressor()
        return _local.decompressor  # type: ignore[no-any-return]


def pack(type_: str, data: bytes) -> tuple[str, bytes]:
    """The stored form of a serialized value: compressed and marked when that saves an eighth."""
    size = len(data)
    # a "+" type is encrypted by its serializer (LangGraph's EncryptedSerializer: "msgpack+aes"):
    # ciphertext does not compress
    if size < MIN_SIZE or "+" in type_ or type_.endswith(SUFFIX):
        return type_, data
    frame = _compressor().compress(data)
    if len(frame) > size - (size >> 3):
        return type_, data
    return type_ + SUFFIX, frame


def unpack(type_: str, data: bytes) -> tuple[str, bytes]:
    """The serializer's (type, bytes) of a stored value: decompressed when its type says so; a
    list stored as its elements (LIST_TYPE), as the statement assembled it (codec/elements.py)."""
    if not type_.endswith(SUFFIX):
        if type_ == LIST_TYPE:
            return "msgpack", assembled(data)
        return type_, data
    try:
        plain = _decompressor().decompress(data)
    except zstandard.ZstdError as exc:
        raise CorruptValueError(
            f"a stored value of type {type_!r} is not a whole zstd frame ({exc}): the row was "
            "changed or truncated outside the saver"
        ) from exc
    return type_[: -len(SUFFIX)], plain


def load(loads: Callable[[tuple[str, bytes]], Any], type_: str, data: bytes) -> Any:
    """``loads`` (a serde's loads_typed) of a stored value, decompressed first when its type says
    so; a value sealed by a KeyringSerializer that ``loads`` cannot open is a DecryptionError."""
    try:
        if type_.endswith(SUFFIX) or type_ == LIST_TYPE:
            return loads(unpack(type_, data))
        return loads((type_, data))
    except NotImplementedError as exc:  # the serializer's "Unknown serialization type"
        raise _unsealable(type_, exc) from exc


def _unsealable(type_: str, exc: NotImplementedError) -> Exception:
    """What reading a value of ``type_`` that the serializer does not know raises: for a value
    sealed by a KeyringSerializer, a DecryptionError that says what to do; else the error as it
    was."""
    if not type_.endswith(SEALED):
        return exc
    return DecryptionError(
        f"a stored value of type {type_!r} is sealed by a KeyringSerializer, which this saver's "
        "serializer cannot open: give the saver serde=KeyringSerializer(...) with the keys it "
        "was written with"
    )


#: the first byte of a stored part (codec/elements.py): its bytes as they are, or a zstd frame
PART_PLAIN = 0
PART_ZSTD = 1


def pack_part(data: bytes, compress: bool) -> bytes:
    """A list value's part as stored: a byte saying how, then its bytes, as a zstd frame where
    ``compress`` and that saves an eighth (as :func:`pack` decides)."""
    if compress and len(data) >= MIN_SIZE:
        frame = _compressor().compress(data)
        if len(frame) <= len(data) - (len(data) >> 3):
            return bytes((PART_ZSTD,)) + frame
    return bytes((PART_PLAIN,)) + data


#: ... or sealed by a KeyringSerializer: AES-GCM of the part's key and its stored form (plain or
#: zstd), which only that serializer opens (codec/crypto.py, ``KeyringSerializer.open_list``)
PART_SEALED = 2
#: the msgpack array header lengths a list value's header may have, by its first byte
_HEADERS = {**{b: 1 for b in range(0x90, 0xA0)}, 0xDC: 3, 0xDD: 5}


def check_header(header: bytes | memoryview) -> None:
    """A list value's msgpack array header, or a CorruptValueError."""
    if len(header) == 0 or _HEADERS.get(header[0]) != len(header):
        raise CorruptValueError(
            "a list value stored as its elements did not come back as a header and its parts: "
            "its row was changed outside the saver"
        )


def stored_parts(data: bytes | None) -> tuple[memoryview, list[memoryview]]:
    """What the statements' ``_list_value`` returns, split: the region before the parts (the
    msgpack array header; for a sealed list, its seal then the header) and each part as stored
    (a marker byte, then its bytes). NULL (read as empty: a part is not stored) and a length that
    does not fit are CorruptValueErrors."""
    if not data:
        raise CorruptValueError(
            "a list value stored as its elements came back without its parts: they are not in "
            "pgsaver_elements (rows deleted outside the saver), or this saver found the schema "
            "before migration 0015 and another process applied it since (run setup() at "
            "start-up: a saver that did finds the parts)"
        )
    view = memoryview(data)
    head = view[0] + 1
    if len(view) <= head or head < 2:
        raise CorruptValueError(
            "a list value stored as its elements did not come back as a header and its parts: "
            "its row was changed outside the saver"
        )
    found: list[memoryview] = []
    i, end = head, len(view)
    while i < end:
        size = int.from_bytes(view[i : i + 4], "big")
        i += 4
        if size < 1 or i + size > end:
            raise CorruptValueError(
                f"a list value stored as its elements could not be assembled (a part of {size} "
                f"bytes at offset {i} of {end}): its parts were changed outside the saver"
            )
        found.append(view[i : i + size])
        i += size
    return view[1:head], found


def unpack_part(part: bytes | memoryview) -> bytes | memoryview:
    """A part's bytes from its stored form (plain or zstd; a sealed one is opened first)."""
    try:
        if part[0] == PART_ZSTD:
            return _decompressor().decompress(part[1:])
        if part[0] == PART_PLAIN:
            return part[1:]
    except zstandard.ZstdError as exc:
        raise CorruptValueError(
            f"a list value stored as its elements could not be assembled ({exc}): its parts "
            "were changed outside the saver"
        ) from exc
    if part[0] == PART_SEALED:
        raise DecryptionError(
            "a list value stored as its elements is sealed by a KeyringSerializer, which this "
            "saver's serializer cannot open: give the saver serde=KeyringSerializer(...) with "
            "the keys it was written with"
        )
    raise CorruptValueError(
        f"a list value stored as its elements could not be assembled (a part marked {part[0]}): "
        "its parts were changed outside the saver"
    )


def assembled(data: bytes | None) -> bytes:
    """The serialized list a statement returns for a list value stored as its elements
    (queries.sql, ``_list_value``): the length of the msgpack array header, the header, then each
    part the value names, in order, as a 4-byte length and the part as stored (:func:`pack_part`);
    NULL (read as empty) when a part is not stored, which is a CorruptValueError. A list sealed
    by a KeyringSerializer is a DecryptionError here (its serializer opens it)."""
    header, found = stored_parts(data)
    if bytes(header[:4]) == SEALED_LIST:
        raise DecryptionError(
            "a list value stored as its elements is sealed by a KeyringSerializer, which this "
            "saver's serializer cannot open: give the saver serde=KeyringSerializer(...) with "
            "the keys it was written with"
        )
    check_header(header)
    return b"".join([header, *map(unpack_part, found)])


#: the first bytes of a sealed list's region (a KeyringSerializer's ciphertext, crypto.MAGIC)
SEALED_LIST = b"LGE1"
