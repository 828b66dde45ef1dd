"""Authenticated encryption bound to where a value belongs: :class:`KeyringSerializer`.

A LangGraph serializer never learns where a value goes; the savers do. ``codec.values`` seals every value
it stores with the value's place (thread, namespace, channel, version; or checkpoint, task, index)
as AES-GCM associated data, so a row swapped with another, copied into another thread by hand, or
replaced by someone else's plaintext fails loudly instead of being read as that place's value.

Format of a ciphertext: ``MAGIC`` (4 bytes), the key id's length (1 byte), the key id (UTF-8), a
12-byte nonce, the AES-GCM ciphertext and its 16-byte tag. The associated data is the value's place,
so a row copied or moved elsewhere fails authentication instead of decrypting as someone else's.
Several keys: new values use the current one, reads use whichever the ciphertext names.
"""

from __future__ import annotations

import copy
import hashlib
import secrets
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from Crypto.Cipher import AES
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver.codec import compress as _compress
from langgraph_pg_saver.errors import DecryptionError, EncryptionKeyError

MAGIC = b"LGE1"
_NONCE = 12
_TAG = 16


def place(*parts: object) -> bytes:
    """The associated data for a value at ``parts`` (e.g. kind, thread, namespace, channel,
    version): each part's text, length-prefixed, so no two places give the same bytes."""
    out = bytearray()
    for part in parts:
        data = str(part).encode("utf-8", "surrogatepass")
        out += len(data).to_bytes(4, "big") + data
    return bytes(out)


class Keyring:
    """AES-GCM keys by id; ``current`` (default: the first given) encrypts.

    Args:
        keys: ``{key_id: key}`` or ``[(key_id, key), ...]``; keys of 16, 24 or 32 bytes, ids of
            1 to 255 bytes of UTF-8.
        current: the id new values are encrypted with.
        strict: refuse plaintext values on read (every row must be encrypted).
    """

    def __init__(
        self,
        keys: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
        *,
        current: str | None = None,
        strict: bool = False,
    ) -> None:
        pairs = list(keys.items()) if isinstance(keys, Mapping) else list(keys)
        if not pairs:
            raise ValueError("a Keyring needs at least one key")
        self._keys: dict[str, bytes] = {}
        for key_id, key in pairs:
            if not isinstance(key_id, str) or not 1 <= len(key_id.encode("utf-8")) <= 255:
                raise ValueError(f"a key id must be a str of 1 to 255 UTF-8 bytes, not {key_id!r}")
            if not isinstance(key, (bytes, bytearray)) or len(key) not in (16, 24, 32):
                raise ValueError(
                    f"key {key_id!r} must be 16, 24 or 32 bytes (AES-128/192/256), "
                    f"not {len(key) if isinstance(key, (bytes, bytearray)) else type(key).__name__}"
                )
            if key_id in self._keys:
                raise ValueError(f"key id {key_id!r} is given twice")
            self._keys[key_id] = bytes(key)
        self.current = pairs[0][0] if current is None else current
        if self.current not in self._keys:
            raise ValueError(f"the current key id {self.current!r} is not among the keys")
        self.strict = strict

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def encrypt(self, plaintext: bytes, aad: bytes) -> bytes:
        key_id = self.current.encode("utf-8")
        nonce = secrets.token_bytes(_NONCE)
        cipher = AES.new(self._keys[self.current], AES.MODE_GCM, nonce=nonce)
        cipher.update(aad)
        body, tag = cipher.encrypt_and_digest(plaintext)
        return MAGIC + bytes([len(key_id)]) + key_id + nonce + body + tag

    @staticmethod
    def is_encrypted(data: bytes) -> bool:
        return data[:4] == MAGIC

    def key_id_of(self, data: bytes) -> str | None:
        """The key id a ciphertext names (None for plaintext or a malformed header)."""
        if not self.is_encrypted(data) or len(data) < 5:
            return None
        n = data[4]
        try:
            return data[5 : 5 + n].decode("utf-8")
        except UnicodeDecodeError:
            return None

    def secret(self, label: bytes) -> bytes:
        """A 32-byte secret derived from the current key for ``label`` (at most 16 bytes): what
        names a sealed list's parts (codec/elements.py) without revealing their contents."""
        return hashlib.blake2b(
            label, digest_size=32, key=self._keys[self.current], person=b"pgsaver-derive"
        ).digest()

    def header(self) -> bytes:
        """The bytes every ciphertext of the current key starts with (what reencrypt looks for)."""
        key_id = self.current.encode("utf-8")
        return MAGIC + bytes([len(key_id)]) + key_id

    def decrypt(self, data: bytes, aad: bytes, where: str | Callable[[], str]) -> bytes:
        """The plaintext of ``data`` stored at ``where`` (named in errors; a callable is called
        only for an error); plaintext passes through unless the keyring is strict."""
        if not self.is_encrypted(data):
            if self.strict:
                at = where() if callable(where) else where
                raise DecryptionError(
                    f"{at} is stored unencrypted, and the keyring is strict", where=at
                )
            return data
        key_id = self.key_id_of(data)
        if key_id is None or len(data) < 5 + data[4] + _NONCE + _TAG:
            at = where() if callable(where) else where
            raise DecryptionError(
                f"{at}: the ciphertext is malformed or truncated", key_id=key_id, where=at
            )
        key = self._keys.get(key_id)
        if key is None:
            at = where() if callable(where) else where
            raise EncryptionKeyError(
                f"{at} is encrypted with key {key_id!r}, which the keyring does not hold "
                f"(it holds {', '.join(map(repr, self._keys))})",
                key_id=key_id,
                where=at,
            )
        start = 5 + data[4]
        nonce, body, tag = data[start : start + _NONCE], data[start + _NONCE : -_TAG], data[-_TAG:]
        cipher = AES.new(key, AES.MODE_GCM, nonce=nonce)
        cipher.update(aad)
        try:
            return bytes(cipher.decrypt_and_verify(body, tag))
        except ValueError:
            at = where() if callable(where) else where
            raise DecryptionError(
                f"{at} failed authentication with key {key_id!r}: it was changed, or it "
                "belongs to another place (a row moved or copied from elsewhere)",
                key_id=key_id,
                where=at,
            ) from None


#: the suffix of the type of a value KeyringSerializer sealed (the inner serializer's type before it)
SUFFIX = "+aead"
#: the place of a value sealed without one (the serializer used on its own, outside a saver)
UNBOUND = place("unbound")
#: the metadata keys LangGraph itself writes, kept in plaintext (and filterable in SQL) by default
DEFAULT_PLAINTEXT_METADATA = ("source", "step", "parents", "run_id")
#: always plaintext: prune, copy_thread and delete_for_runs read the counters in SQL to keep the
#: checkpoints a DeltaChannel is rebuilt from (channel names and counts, nothing a user passed),
#: retention reads "parents" to keep a subgraph's checkpoints with the root checkpoint that ran it
#: (checkpoint ids), and delete_for_runs selects by run_id (kept in a column of its own anyway)
REQUIRED_PLAINTEXT_METADATA = frozenset({"counters_since_delta_snapshot", "parents", "run_id"})

Place = tuple[object, ...]
#: bytes of a part's key (codec/elements.py)
KEY_BYTES = 16
#: the associated data of a list's parts: they are bound to their keys (inside the ciphertext),
#: which the list's seal binds to its place
PART_PLACE = place("element")


def list_place(parts: Place, header: bytes, keys: Sequence[bytes]) -> bytes:
    """The associated data of a sealed list's seal: its place, its header, its parts' keys."""
    return place(*parts, _compress.LIST_TYPE) + bytes(header) + b"".join(keys)


def describe(parts: Place, channel: object = None) -> str:
    """A value's place in words, for errors: ``('blob', thread, ns, channel, version)``,
    ``('write', thread, ns, checkpoint, task, idx, channel, task_path)``, ``('checkpoint', thread,
    ns, checkpoint, parent, versions)``, ``('metadata', thread, ns, checkpoint)``."""
    kind = parts[0] if parts else "unbound"
    if kind == "blob" and len(parts) == 5:
        return (
            f"the value of channel {parts[3]!r} (version {parts[4]}) in thread {parts[1]!r}, "
            f"namespace {parts[2]!r}"
        )
    if kind == "write" and len(parts) == 8:
        to = f" to channel {parts[6]!r}"
        return (
            f"the write{to} (task {parts[4]!r}, idx {parts[5]}) of checkpoint {parts[3]!r} in "
            f"thread {parts[1]!r}, namespace {parts[2]!r}"
        )
    if kind == "cache" and len(parts) == 3:
        return f"the cached value of key {parts[2]!r} in namespace {parts[1]}"
    if kind in ("checkpoint", "metadata") and len(parts) >= 4:
        what = "checkpoint" if kind == "checkpoint" else "the metadata of checkpoint"
        return f"{what} {parts[3]!r} in thread {parts[1]!r}, namespace {parts[2]!r}"
    return "a value encrypted without a place"


class KeyringSerializer(SerializerProtocol):
    """A ``serde=`` for the savers that encrypts with AES-GCM, binds every value to its place and
    rotates keys.

    Every channel value, write, checkpoint body and (see ``plaintext_metadata``) metadata is
    serialized by ``serde`` and then encrypted with the newest key; its ciphertext names its key
    id, and the value's place (thread, namespace, channel and version; checkpoint, task and index)
    is its associated data, so a row moved, swapped or replaced fails authentication.

    Args:
        keys: ``{key_id: key}`` or pairs; 16, 24 or 32 bytes each. Reads use whichever key a value
            names; ``reencrypt`` moves stored values to the current key.
        current: the key id new values are encrypted with (default: the first).
        strict: refuse any stored value that is not sealed by this serializer (default). Pass
            False while a database written without it is being converted with ``reencrypt``:
            such values are then read by ``fallback``.
        serde: the serializer of the plaintext (LangGraph's JsonPlusSerializer by default).
        plaintext_metadata: the metadata keys stored in clear in the ``metadata`` jsonb column
            (what ``list(filter=...)`` narrows by in SQL); every other key, including the
            ``configurable`` values LangGraph copies into metadata, is stored only encrypted.
            ``counters_since_delta_snapshot``, ``parents`` and ``run_id`` are always in clear
            (prune, retention and delete_for_runs select by them in SQL). What is read back is always the sealed copy.
        fallback: reads values not sealed by this serializer when ``strict=False``: ``serde``
            by default (plaintext); LangGraph's ``EncryptedSerializer`` for a database it wrote.
    """

    def __init__(
        self,
        keys: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
        *,
        current: str | None = None,
        strict: bool = True,
        serde: SerializerProtocol | None = None,
        plaintext_metadata: Collection[str] = DEFAULT_PLAINTEXT_METADATA,
        fallback: SerializerProtocol | None = None,
    ) -> None:
        if not isinstance(strict, bool):
            raise TypeError(f"strict must be a bool, not {type(strict).__name__}")
        if isinstance(plaintext_metadata, str) or not all(
            isinstance(k, str) for k in plaintext_metadata
        ):
            raise TypeError(
                "plaintext_metadata must be a collection of metadata key names (str), "
                f"not {plaintext_metadata!r}"
            )
        self.keyring = Keyring(keys, current=current, strict=strict)
        self.serde: SerializerProtocol = serde if serde is not None else JsonPlusSerializer()
        self.plaintext_metadata = frozenset(plaintext_metadata) | REQUIRED_PLAINTEXT_METADATA
        self.fallback = fallback

    @property
    def strict(self) -> bool:
        return self.keyring.strict

    # -- SerializerProtocol: a value with no place (the serializer used on its own)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.serde.dumps_typed(obj)
        return self.seal(type_, bytes(data), ())

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.open(data[0], data[1], ())

    # -- what the savers call, with the value's place

    def seal(self, type_: str, data: bytes, parts: Place) -> tuple[str, bytes]:
        """The stored form of a serialized value at ``parts`` (its inner type is bound too, so
        a changed type column fails as a moved value does)."""
        aad = place(*parts, type_) if parts else UNBOUND + place(type_)
        return type_ + SUFFIX, self.keyring.encrypt(data, aad)

    def unseal(
        self, type_: str, data: bytes, parts: Place, channel: object = None
    ) -> tuple[str, bytes] | None:
        """The inner serializer's (type, bytes) of a stored value, or None for a value this
        serializer did not seal (read by the fallback when not strict)."""
        if not type_.endswith(SUFFIX):
            if self.keyring.strict:
                at = describe(parts, channel)
                raise DecryptionError.unsealed(at, f"stored unencrypted (type {type_!r})", "values")
            return None
        inner = type_[: -len(SUFFIX)]
        aad = place(*parts, inner) if parts else UNBOUND + place(inner)
        plain = self.keyring.decrypt(bytes(data), aad, lambda: describe(parts, channel))
        return inner, plain

    def open(self, type_: str, data: bytes, parts: Place, channel: object = None) -> Any:
        """The value stored at ``parts`` (``channel`` only names it in errors)."""
        if type_ == _compress.LIST_TYPE:
            return self.serde.loads_typed(("msgpack", self.open_list(data, parts, channel)))
        inner = self.unseal(type_, data, parts, channel)
        if inner is not None:
            return self.serde.loads_typed(_compress.unpack(*inner))
        return self._fallback_loads(type_, data, parts, channel)

    # -- lists stored as their elements (codec/elements.py)

    def seal_list(self, header: bytes, keys: Sequence[bytes], parts: Place) -> bytes:
        """The seal of a list value stored as its elements at ``parts``: an AES-GCM tag over its
        place, its msgpack array header and the keys of its parts in order (the ciphertext of
        nothing), which a read checks against the keys its parts hold."""
        return self.keyring.encrypt(b"", list_place(parts, header, keys))

    def seal_part(self, key: bytes, stored: bytes) -> bytes:
        """A part of a list value as a KeyringSerializer stores it: the marker, then AES-GCM of its
        key and its stored form (``compress.pack_part``). A part is bound to its key, which the
        list's seal binds to the list's place and order."""
        return bytes((_compress.PART_SEALED,)) + self.keyring.encrypt(key + stored, PART_PLACE)

    def open_part(self, part: bytes | memoryview, where: str) -> tuple[bytes, bytes]:
        """A sealed part's key and stored form."""
        if len(part) < 5 or part[0] != _compress.PART_SEALED or bytes(part[1:5]) != MAGIC:
            # never read as plaintext, strict or not: a part's key is in the clear beside it, so
            # a part written in clear with a seal's key would pass the seal
            raise DecryptionError(f"{where}: a part of it is not sealed", where=where)
        plain = self.keyring.decrypt(bytes(part[1:]), PART_PLACE, where)
        if len(plain) < KEY_BYTES + 1:
            raise DecryptionError(f"{where}: a part holds no key", where=where)
        return plain[:KEY_BYTES], plain[KEY_BYTES:]

    def open_list(self, data: bytes | None, parts: Place, channel: object = None) -> bytes:
        """The serialized list a statement returns for a list value stored as its elements
        (``compress.stored_parts``), its seal checked: each part opened, and the seal verified
        over the value's place, its header and the keys the parts hold, in order (a part moved,
        swapped, reordered or changed, or a value moved to another place, fails). A list stored
        unsealed is refused when strict, else read as it is."""
        region, found = _compress.stored_parts(data)
        at = describe(parts, channel)
        if bytes(region[:4]) != MAGIC:
            if self.keyring.strict:
                raise DecryptionError.unsealed(at, "a list stored unencrypted", "values")
            return _compress.assembled(data)
        seal_size = 5 + region[4] + _NONCE + _TAG if len(region) > 4 else len(region) + 1
        if seal_size >= len(region):
            raise DecryptionError(f"{at}: the seal of its parts is truncated", where=at)
        seal, header = bytes(region[:seal_size]), bytes(region[seal_size:])
        _compress.check_header(header)
        keys: list[bytes] = []
        out: list[bytes | memoryview] = [header]
        for part in found:
            key, stored = self.open_part(part, at)
            keys.append(key)
            out.append(_compress.unpack_part(stored))
        self.keyring.decrypt(seal, list_place(parts, header, keys), at)
        return b"".join(out)

    def reseal_list(self, blob: bytes, old: Place, new: Place) -> bytes:
        """A stored list value's blob (``elements.split``) with its seal made again for ``new``
        with the current key, the old seal checked at ``old`` first. Its parts are unchanged:
        they are bound to their keys, not to a place."""
        head = 2 + blob[1] if len(blob) > 2 else len(blob)
        region, keys = blob[2:head], blob[head:]
        at = describe(old)
        if region[:4] != MAGIC or len(region) < 5 or len(keys) % KEY_BYTES:
            raise DecryptionError(f"{at} is a list stored unencrypted", where=at)
        seal_size = 5 + region[4] + _NONCE + _TAG
        seal, header = region[:seal_size], region[seal_size:]
        split = [keys[i : i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)]
        self.keyring.decrypt(seal, list_place(old, header, split), at)
        sealed = self.seal_list(header, split, new) + header
        if len(sealed) > 255:
            raise EncryptionKeyError(
                f"the current key id {self.keyring.current!r} is too long to seal a list stored "
                "as its elements (at most 217 bytes of UTF-8)",
                key_id=self.keyring.current,
                where=describe(new),
            )
        return blob[:1] + bytes((len(sealed),)) + sealed + keys

    def _fallback_loads(self, type_: str, data: bytes, parts: Place, channel: object) -> Any:
        if self.fallback is None and "+" in type_:
            at = describe(parts, channel)
            raise DecryptionError(
                f"{at} is encrypted by another serializer (type {type_!r}): pass that serializer "
                "as KeyringSerializer(..., fallback=...) to read it",
                where=at,
            )
        return (self.fallback or self.serde).loads_typed(_compress.unpack(type_, data))

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> KeyringSerializer:
        """A copy whose inner serializer has LangGraph's msgpack allowlist extended (what
        ``with_allowlist`` asks of a saver's serde)."""
        updated = getattr(self.serde, "with_msgpack_allowlist", None)
        if updated is None:
            return self
        inner = updated(extra_allowlist)
        if inner is self.serde:
            return self
        clone = copy.copy(self)
        clone.serde = inner
        return clone
