"""The keyring of _crypto: AES-GCM bound to a value's place, several keys, clear errors."""

from __future__ import annotations

import pytest

from langgraph_pg_saver._crypto import (
    MAGIC,
    DecryptionError,
    EncryptionKeyError,
    Keyring,
    place,
)

K1, K2 = b"1" * 32, b"2" * 16
HERE = place("blob", "thread-1", "", "messages", "00000000000000000000000000000003.0.5")


def test_a_value_decrypts_only_at_its_own_place() -> None:
    ring = Keyring({"k1": K1})
    data = ring.encrypt(b"secret state", HERE)
    assert data.startswith(MAGIC)
    assert b"secret" not in data
    assert ring.decrypt(data, HERE, "channel 'messages'") == b"secret state"
    elsewhere = place("blob", "thread-2", "", "messages", "00000000000000000000000000000003.0.5")
    with pytest.raises(DecryptionError, match="channel 'messages' failed authentication"):
        ring.decrypt(data, elsewhere, "channel 'messages'")
    tampered = data[:-20] + bytes([data[-20] ^ 1]) + data[-19:]
    with pytest.raises(DecryptionError, match="failed authentication"):
        ring.decrypt(tampered, HERE, "x")
    with pytest.raises(DecryptionError, match="malformed or truncated"):
        ring.decrypt(data[:20], HERE, "x")
    assert ring.encrypt(b"same", HERE) != ring.encrypt(b"same", HERE)  # a fresh nonce each time


def test_places_do_not_collide() -> None:
    assert place("a", "bc") != place("ab", "c")
    assert place("a", "") != place("a")


def test_rotation_reads_old_keys_and_tells_an_unknown_key_from_a_bad_one() -> None:
    old = Keyring({"k1": K1})
    data = old.encrypt(b"v", HERE)
    rotated = Keyring({"k2": K2, "k1": K1})
    assert rotated.current == "k2"
    assert rotated.decrypt(data, HERE, "x") == b"v"
    assert rotated.key_id_of(rotated.encrypt(b"v", HERE)) == "k2"
    with pytest.raises(EncryptionKeyError, match="key 'k1', which the keyring does not hold"):
        Keyring({"k2": K2}).decrypt(data, HERE, "x")
    wrong = Keyring({"k1": K2 * 2})
    with pytest.raises(DecryptionError, match="failed authentication with key 'k1'"):
        wrong.decrypt(data, HERE, "x")


def test_plaintext_passes_unless_strict() -> None:
    assert Keyring({"k1": K1}).decrypt(b"\x80plain", HERE, "x") == b"\x80plain"
    with pytest.raises(DecryptionError, match="stored unencrypted"):
        Keyring({"k1": K1}, strict=True).decrypt(b"\x80plain", HERE, "x")


@pytest.mark.parametrize(
    ("keys", "current", "match"),
    [
        ({}, None, "at least one key"),
        ({"k": b"short"}, None, "16, 24 or 32 bytes"),
        ({"": K1}, None, "key id"),
        ([("k", K1), ("k", K1)], None, "given twice"),
        ({"k": K1}, "other", "not among the keys"),
    ],
)
def test_bad_keyrings_are_refused(keys: object, current: str | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Keyring(keys, current=current)  # type: ignore[arg-type]
