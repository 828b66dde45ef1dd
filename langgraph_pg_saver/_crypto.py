"""Authenticated encryption bound to where a value belongs: the groundwork of issue 15's encryption.

Not wired into the savers yet (see the closing note of issue 15): this module holds the cipher, so
the saver can encrypt in ``_core`` where every value's place (thread, namespace, channel, version;
or checkpoint, task, index) is known, which a LangGraph serializer never is.

Format of a ciphertext: ``MAGIC`` (4 bytes), the key id's length (1 byte), the key id (UTF-8), a
12-byte nonce, the AES-GCM ciphertext and its 16-byte tag. The associated data is the value's place,
so a row copied or moved elsewhere fails authentication instead of decrypting as someone else's.
Several keys: new values use the current one, reads use whichever the ciphertext names.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from Crypto.Cipher import AES

from .errors import PgSaverError

MAGIC = b"LGE1"
_NONCE = 12
_TAG = 16


class EncryptionKeyError(PgSaverError):
    """A ciphertext names a key id the keyring does not hold (a key removed too early, or a
    keyring of another deployment)."""


class DecryptionError(PgSaverError):
    """A ciphertext failed authentication (tampered, truncated, or moved from another place), or
    a plaintext value was read in strict mode."""


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

    def decrypt(self, data: bytes, aad: bytes, where: str) -> bytes:
        """The plaintext of ``data`` stored at ``where`` (named in errors); plaintext passes
        through unless the keyring is strict."""
        if not self.is_encrypted(data):
            if self.strict:
                raise DecryptionError(f"{where} is stored unencrypted, and the keyring is strict")
            return data
        key_id = self.key_id_of(data)
        if key_id is None or len(data) < 5 + data[4] + _NONCE + _TAG:
            raise DecryptionError(f"{where}: the ciphertext is malformed or truncated")
        key = self._keys.get(key_id)
        if key is None:
            raise EncryptionKeyError(
                f"{where} is encrypted with key {key_id!r}, which the keyring does not hold "
                f"(it holds {', '.join(map(repr, self._keys))})"
            )
        start = 5 + data[4]
        nonce, body, tag = data[start : start + _NONCE], data[start + _NONCE : -_TAG], data[-_TAG:]
        cipher = AES.new(key, AES.MODE_GCM, nonce=nonce)
        cipher.update(aad)
        try:
            return bytes(cipher.decrypt_and_verify(body, tag))
        except ValueError:
            raise DecryptionError(
                f"{where} failed authentication with key {key_id!r}: it was changed, or it "
                "belongs to another place (a row moved or copied from elsewhere)"
            ) from None
