"""The keyring of _crypto: AES-GCM bound to a value's place, several keys, clear errors."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver.codec.crypto import (
    MAGIC,
    DecryptionError,
    EncryptionKeyError,
    Keyring,
    KeyringSerializer,
    describe,
    place,
)

K1, K2 = b"1" * 32, b"2" * 16
HERE = place("blob", "thread-1", "", "messages", "00000000000000000000000000000003.0.5")
HERE_PARTS = ("blob", "t", "", "messages", "3")


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


# --------------------------------------------------------------------------- KeyringSerializer


def test_the_serializer_on_its_own_round_trips_bound_to_no_place() -> None:
    serde = KeyringSerializer({"k1": K1})
    type_, data = serde.dumps_typed({"a": [1, "two"]})
    assert type_ == "msgpack+aead"
    assert b"two" not in data
    assert serde.loads_typed((type_, data)) == {"a": [1, "two"]}
    sealed = serde.seal(*serde.serde.dumps_typed("x"), HERE_PARTS)
    with pytest.raises(DecryptionError, match="a value encrypted without a place"):
        serde.loads_typed(sealed)  # sealed for a place, read as unbound
    assert serde.open(*sealed, HERE_PARTS) == "x"


def test_strict_refuses_plaintext_and_lax_reads_it() -> None:
    plain = JsonPlusSerializer().dumps_typed("p")
    with pytest.raises(DecryptionError, match="stored unencrypted"):
        KeyringSerializer({"k1": K1}).open(*plain, HERE_PARTS)
    assert KeyringSerializer({"k1": K1}, strict=False).open(*plain, HERE_PARTS) == "p"


def test_places_are_described_for_errors() -> None:
    assert describe(HERE_PARTS) == (
        "the value of channel 'messages' (version 3) in thread 't', namespace ''"
    )
    assert describe(("write", "t", "", "c1", "task", -1, "__error__", "")) == (
        "the write to channel '__error__' (task 'task', idx -1) of checkpoint 'c1' in thread "
        "'t', namespace ''"
    )
    assert describe(("metadata", "t", "ns", "c1")) == (
        "the metadata of checkpoint 'c1' in thread 't', namespace 'ns'"
    )


def test_bad_options_are_refused() -> None:
    with pytest.raises(TypeError, match="plaintext_metadata"):
        KeyringSerializer({"k1": K1}, plaintext_metadata="source")
    with pytest.raises(TypeError, match="strict"):
        KeyringSerializer({"k1": K1}, strict="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="current key id 'k9'"):
        KeyringSerializer({"k1": K1}, current="k9")
    # counters_since_delta_snapshot stays in clear whatever is asked: prune reads it in SQL
    assert (
        "counters_since_delta_snapshot"
        in KeyringSerializer({"k1": K1}, plaintext_metadata=()).plaintext_metadata
    )


def test_a_copy_with_a_wider_msgpack_allowlist_keeps_the_keys() -> None:
    serde = KeyringSerializer({"k1": K1}, serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    wider = serde.with_msgpack_allowlist([("some.module", "Thing")])
    assert isinstance(wider, KeyringSerializer)
    assert wider.keyring is serde.keyring
    assert wider.loads_typed(serde.dumps_typed("v")) == "v"
