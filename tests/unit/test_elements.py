"""The element encoding of lists (codec/elements.py): the parts assemble into the very bytes the
plain encoding stores, an appended version costs its new elements, and a list the serde does not
write as plain msgpack stays whole. (The statements that assemble the parts in SQL are tested
against a server in tests/test_list_elements.py.)"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Overwrite, Send

from langgraph_pg_saver.codec import compress
from langgraph_pg_saver.codec import elements as el
from langgraph_pg_saver.codec.crypto import KeyringSerializer
from langgraph_pg_saver.errors import CorruptValueError, DecryptionError, InvalidInputError

SERDE = JsonPlusSerializer()


@dataclasses.dataclass
class Point:
    x: int
    y: float


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.binary(max_size=20),
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)


@st.composite
def message(draw: st.DrawFn) -> Any:
    text = draw(st.text(max_size=60))
    mid = draw(st.sampled_from(["a", "b", "c", None]))
    kind = draw(st.sampled_from(["human", "ai", "tool", "remove", "point", "send", "overwrite"]))
    if kind == "human":
        return HumanMessage(content=text, id=mid)
    if kind == "ai":
        return AIMessage(content=text, id=mid, response_metadata={"n": len(text)})
    if kind == "tool":
        return ToolMessage(content=text, tool_call_id="call-1")
    if kind == "remove":
        return RemoveMessage(id=mid or "x")
    if kind == "point":
        return Point(len(text), 0.5)
    if kind == "send":
        return Send("node", {"text": text})
    return Overwrite([text])


items = st.one_of(plain, message())


def plain_round_trip(value: Any) -> Any:
    return SERDE.loads_typed(SERDE.dumps_typed(value))


def store(value: list[Any]) -> tuple[bytes, dict[bytes, bytes]]:
    stored = el.split(SERDE, value, name="messages")
    assert stored is not None
    blob, parts = stored
    return blob, {p.key: p.data for p in parts}


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (a tuple stays a tuple, a message its
    class)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items, min_size=1, max_size=60))
def test_parts_assemble_into_the_plain_bytes(value: list[Any]) -> None:
    """The header and the parts, in the order the value names them, are byte for byte what the
    serde stores for the whole list: a read returns what the plain encoding returns (types,
    order, duplicates, nested values)."""
    assert el.storable(value)
    blob, parts = store(value)
    returned = el.assemble(blob, parts)  # what the statement returns
    assert returned is not None
    assert compress.assembled(returned) == SERDE.dumps_typed(value)[1]
    got = compress.load(SERDE.loads_typed, el.LIST_TYPE, returned)
    assert same(got, plain_round_trip(value))


@pytest.mark.parametrize("n", [1, 15, 16, 17, 65535, 65536, 70000])
def test_every_array_header(n: int) -> None:
    """Lists of every msgpack array header size (fixarray, array 16, array 32)."""
    value = [i % 7 for i in range(n)]
    blob, parts = store(value)
    assert compress.assembled(el.assemble(blob, parts)) == SERDE.dumps_typed(value)[1]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items, min_size=1, max_size=30), st.integers(0, 10))
def test_duplicates_are_stored_once(value: list[Any], copies: int) -> None:
    doubled = value * (copies + 1)
    stored = el.split(SERDE, doubled)
    assert stored is not None
    _, parts = stored
    assert len({p.key for p in parts}) == len(parts)
    assert len([p for p in parts if not p.is_frame]) <= len(doubled)
    blob, by_key = store(doubled)
    assert compress.assembled(el.assemble(blob, by_key)) == SERDE.dumps_typed(doubled)[1]


def chat(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out.append(HumanMessage(content=f"question {i} " * 20, id=f"h{i}"))
        out.append(AIMessage(content=f"answer {i} " * 60, id=f"a{i}"))
    return out


def test_extending_costs_the_new_elements() -> None:
    """A thread's versions of an appended list: each new version's parts are its new element
    and at most one new frame; its value grows by 16 bytes per frame closed."""
    messages = chat(300)
    seen: set[bytes] = set()
    total_new = 0
    for n in range(1, len(messages) + 1):
        blob, by_key = store(messages[:n])
        new = [k for k in by_key if k not in seen]
        assert len(new) <= 2
        seen.update(by_key)
        total_new += sum(len(by_key[k]) for k in new)
        keys = el.refs(blob)
        assert len(blob) == 2 + len(el.array_header(n)) + 16 * len(keys)
        assert len(keys) < n // 4 + el.FRAME_MAX
    content = sum(len(SERDE.dumps_typed([m])[1]) - 1 for m in messages)
    # each element is written at most twice over the thread's life: alone (in a tail), then in
    # its frame; the plain encoding writes the list at every version (~600 times here)
    assert total_new <= 2.1 * content


def test_frames_survive_a_trim_at_the_start() -> None:
    """A list that loses its first elements (a window of the last messages) keeps its frames
    after the first one that changed."""
    messages = chat(200)
    before = el.split(SERDE, messages)
    after = el.split(SERDE, messages[37:])
    assert before is not None
    assert after is not None
    old = {p.key for p in before[1] if p.is_frame}
    new_frames = [p for p in after[1] if p.is_frame and p.key not in old]
    assert len(new_frames) <= 1
    assert len([p for p in after[1] if p.is_frame]) > 5


def test_a_missing_part_is_refused() -> None:
    value = chat(40)
    blob, parts = store(value)
    gone = next(iter(parts))
    assert el.assemble(blob, {k: v for k, v in parts.items() if k != gone}) is None
    # what a read receives then (the statement's NULL) is a clear error, not a short list
    with pytest.raises(CorruptValueError, match="not in pgsaver_elements"):
        compress.load(SERDE.loads_typed, el.LIST_TYPE, b"")
    with pytest.raises(CorruptValueError, match="element encoding"):
        el.refs(blob[:-3])
    # a part changed outside the saver: cut short, or marked with no known form
    key, data = next((k, v) for k, v in parts.items() if v[0] == compress.PART_ZSTD)
    for changed in (data[:-5], b"\x07" + data[1:]):
        with pytest.raises(CorruptValueError, match="could not be assembled"):
            compress.assembled(el.assemble(blob, {**parts, key: changed}))


def test_parts_are_compressed_where_it_pays() -> None:
    """With compression on, a frame of chat messages is stored as a zstd frame (a part of a few
    bytes, or one that does not shrink, as it is); off, every part as it is; either way the
    assembled list is the serde's bytes."""
    value = chat(60)
    on = el.split(SERDE, value)
    off = el.split(SERDE, value, compress=False)
    assert on is not None
    assert off is not None
    assert {p.data[0] for p in off[1]} == {compress.PART_PLAIN}
    assert compress.PART_ZSTD in {p.data[0] for p in on[1] if p.is_frame}
    assert sum(len(p.data) for p in on[1]) < 0.7 * sum(len(p.data) for p in off[1])
    for blob, parts in (on, off):
        stored = {p.key: p.data for p in parts}
        assert compress.assembled(el.assemble(blob, stored)) == SERDE.dumps_typed(value)[1]


def test_what_is_stored_as_elements() -> None:
    class Custom(list[int]):
        pass

    assert el.storable([1])
    assert not el.storable([])
    assert not el.storable(Custom([1]))
    assert not el.storable((1, 2))
    assert not el.storable("text")


def test_a_serde_that_does_not_write_msgpack_keeps_the_list_whole() -> None:
    """An element the serde writes another way (pickle fallback, an encrypting serde) keeps the
    whole value in the plain encoding."""

    class Pickling(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return ("pickle", b"x")

    assert el.split(Pickling(), [1, 2]) is None


def test_an_element_that_cannot_be_serialized_is_named() -> None:
    with pytest.raises(InvalidInputError, match=r"'messages', element 1"):
        el.split(SERDE, [1, lambda: 2], name="messages")


def test_the_option_is_checked() -> None:
    assert el.check_storage("elements") == "elements"
    with pytest.raises(ValueError, match="list_storage must be"):
        el.check_storage("lists")


def test_a_sealed_list_opens_only_at_its_place_with_its_parts_in_order() -> None:
    """Under a KeyringSerializer: the parts assemble, once opened, into the serde's bytes for
    the whole list; the seal fails for another place, for parts reordered or one replaced by
    another list's part, and for a seal made again elsewhere (reseal_list) read at the old place;
    a key id too long for the seal keeps the value whole."""
    crypt = KeyringSerializer({"k1": b"s" * 32})
    value = [HumanMessage(content=f"m{i} " + "x" * 200, id=f"m{i}") for i in range(60)]
    here = ("blob", "t", "", "messages", "v2")
    split = el.split(crypt, value, place=here)
    assert split is not None
    blob, parts = split
    stored = {p.key: p.data for p in parts}
    assert all(p.data[0] == compress.PART_SEALED for p in parts)
    data = el.assemble(blob, stored)
    assert crypt.open_list(data, here) == SERDE.dumps_typed(value)[1]
    assert crypt.open(el.LIST_TYPE, data, here) == value
    with pytest.raises(DecryptionError, match="another place"):
        crypt.open_list(data, ("blob", "t", "", "messages", "v3"))
    keys = el.refs(blob)
    assert len(keys) > 2
    swapped = dict(stored)
    swapped[keys[0]], swapped[keys[1]] = stored[keys[1]], stored[keys[0]]
    with pytest.raises(DecryptionError):
        crypt.open_list(el.assemble(blob, swapped), here)
    other = el.split(crypt, [HumanMessage(content="other", id="o")], place=here)
    assert other is not None
    replaced = {**stored, keys[-1]: other[1][0].data}
    with pytest.raises(DecryptionError):
        crypt.open_list(el.assemble(blob, replaced), here)
    there = ("blob", "u", "", "messages", "v2")
    moved = crypt.reseal_list(blob, here, there)
    assert el.refs(moved) == keys
    assert crypt.open(el.LIST_TYPE, el.assemble(moved, stored), there) == value
    with pytest.raises(DecryptionError):
        crypt.open_list(el.assemble(moved, stored), here)
    # read without the serializer: refused, not misread
    with pytest.raises(DecryptionError, match="KeyringSerializer"):
        compress.load(SERDE.loads_typed, el.LIST_TYPE, data)
    long_id = KeyringSerializer({"k" * 230: b"s" * 32})
    assert el.split(long_id, value, place=here) is None


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items, min_size=1, max_size=40))
def test_element_bounds_are_each_elements_own_encoding(value: list[Any]) -> None:
    """The list is serialized once and cut where msgpack says its elements start: each cut is
    the element's encoding on its own (a one-element list without its header), so a part's key
    names the element whichever list it sits in."""
    data = SERDE.dumps_typed(value)[1]
    bounds = el.element_bounds(data)
    assert bounds is not None
    assert len(bounds) == len(value) + 1
    for (a, b), item in zip(itertools.pairwise(bounds), value, strict=True):
        assert data[a:b] == SERDE.dumps_typed([item])[1][1:]


def test_element_bounds_of_every_msgpack_form() -> None:
    """Every size class msgpack has: long strings and binaries (8, 16, 32-bit lengths), maps and
    arrays past 15 and 65,535 entries, every int and float width, extensions; anything that is not
    one whole array is None."""
    value: list[Any] = [
        "s" * 40, "s" * 300, "s" * 70000, b"b" * 10, b"b" * 300, b"b" * 70000,
        {str(i): i for i in range(20)}, {str(i): None for i in range(70000)},
        list(range(20)), list(range(70000)), -1, -100, -40000, -(2**40), 200, 60000, 2**40,
        2**64 - 1, 1.5, True, False, None, HumanMessage(content="x" * 70000, id="h"),
    ]  # fmt: skip
    data = SERDE.dumps_typed(value)[1]
    bounds = el.element_bounds(data)
    assert bounds is not None
    assert [data[a:b] for a, b in itertools.pairwise(bounds)] == [
        SERDE.dumps_typed([v])[1][1:] for v in value
    ]
    for bad in (
        b"",
        b"\x01",
        b"\x92\x01",
        b"\x91\xc1",
        b"\x91\xd9\x05ab",
        data[:-1],
        data + b"\x00",
    ):
        assert el.element_bounds(bad) is None


@settings(max_examples=500)
@given(st.binary(max_size=64))
def test_element_bounds_of_any_bytes_never_fails(data: bytes) -> None:
    bounds = el.element_bounds(b"\x93" + data)
    assert bounds is None or bounds[-1] == len(data) + 1


def test_a_part_in_clear_is_refused_even_by_a_keyring_that_is_not_strict() -> None:
    """A part's key is stored in clear beside the list's seal: a part written in clear under that
    key would pass the seal, so no keyring reads one, strict or not. Equal elements of two threads
    get other keys (nothing links the threads)."""
    loose = KeyringSerializer({"k1": b"s" * 32}, strict=False)
    value = [HumanMessage(content=f"m{i}", id=f"m{i}") for i in range(3)]
    here = ("blob", "t", "", "messages", "v1")
    split = el.split(loose, value, place=here)
    assert split is not None
    blob, parts = split
    stored = {p.key: p.data for p in parts}
    forged = {
        key: bytes((compress.PART_SEALED,)) + key + compress.pack_part(b"\xc0", False)
        for key in stored
    }
    with pytest.raises(DecryptionError, match="not sealed"):
        loose.open_list(el.assemble(blob, forged), here)
    other = el.split(loose, value, place=("blob", "u", "", "messages", "v1"))
    assert other is not None
    assert not {p.key for p in other[1]} & set(stored)
