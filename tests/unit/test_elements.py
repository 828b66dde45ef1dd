"""The element encoding of lists (codec/elements.py): what it reads back is what the plain
encoding reads back, an appended version costs its new elements, and a changed row is refused."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Overwrite, Send

from langgraph_pg_saver.codec import elements as el
from langgraph_pg_saver.errors import CorruptValueError, InvalidInputError

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


def store(value: list[Any]) -> tuple[bytes, dict[bytes, tuple[str, bytes]]]:
    blob, parts = el.split(SERDE, value, name="messages")
    return blob, {p.key: (p.type, p.data) for p in parts}


def load(blob: bytes, stored: dict[bytes, tuple[str, bytes]]) -> list[Any]:
    return el.join(blob, stored, lambda t, d: SERDE.loads_typed((t, d)), name="messages")


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
def test_round_trip(value: list[Any]) -> None:
    """The list read back is the one the plain encoding reads back: types, order, duplicates,
    nested values."""
    assert el.storable(value)
    blob, stored = store(value)
    got = load(blob, stored)
    assert same(got, plain_round_trip(value))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items, min_size=1, max_size=30), st.integers(0, 10))
def test_duplicates_are_stored_once(value: list[Any], copies: int) -> None:
    doubled = value * (copies + 1)
    _, parts = el.split(SERDE, doubled)
    elements = [p for p in parts if not p.is_frame]
    assert len({p.key for p in parts}) == len(parts)
    assert len(elements) <= len(doubled)
    blob, stored = store(doubled)
    assert same(load(blob, stored), plain_round_trip(doubled))


def chat(n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        out.append(HumanMessage(content=f"question {i} " * 20, id=f"h{i}"))
        out.append(AIMessage(content=f"answer {i} " * 60, id=f"a{i}"))
    return out


def test_extending_costs_the_new_elements() -> None:
    """A thread's versions of an appended list: each new version's parts are its new elements
    and at most one new frame per new element; its value grows by 16 bytes per frame closed (a
    tail never reaches FRAME_MAX here)."""
    messages = chat(300)
    seen: set[bytes] = set()
    total_new = 0
    for n in range(1, len(messages) + 1):
        blob, parts = el.split(SERDE, messages[:n])
        new = [p for p in parts if p.key not in seen]
        assert len([p for p in new if not p.is_frame]) <= 1
        assert len([p for p in new if p.is_frame]) <= 1
        seen.update(p.key for p in parts)
        total_new += sum(len(p.data) for p in new)
        frames, tail = el.refs(blob)
        assert len(tail) < el.FRAME_MAX
        assert len(blob) == 6 + 16 * (len(frames) + len(tail))
    content = sum(len(SERDE.dumps_typed(m)[1]) for m in messages)
    # each element is written at most twice over the thread's life: alone (in a tail), then in
    # its frame; the plain encoding writes the list at every version (~300 times here)
    assert total_new <= 2.1 * content


def test_frames_survive_a_trim_at_the_start() -> None:
    """A list that loses its first elements (a window of the last messages) keeps its frames
    after the first one that changed."""
    messages = chat(200)
    _, before = el.split(SERDE, messages)
    _, after = el.split(SERDE, messages[37:])
    old = {p.key for p in before if p.is_frame}
    new_frames = [p for p in after if p.is_frame and p.key not in old]
    assert len(new_frames) <= 1
    assert len([p for p in after if p.is_frame]) > 5


def test_a_secret_keys_the_digests() -> None:
    value = chat(20)
    blob_a, parts_a = el.split(SERDE, value, secret=b"k" * 32)
    _, parts_b = el.split(SERDE, value)
    assert {p.key for p in parts_a}.isdisjoint({p.key for p in parts_b})
    stored = {p.key: (p.type, p.data) for p in parts_a}
    loads = lambda t, d: SERDE.loads_typed((t, d))  # noqa: E731
    assert same(el.join(blob_a, stored, loads, secret=b"k" * 32), plain_round_trip(value))
    with pytest.raises(CorruptValueError):
        el.join(blob_a, stored, loads, secret=b"j" * 32)


def test_changed_rows_are_refused() -> None:
    value = chat(40)
    blob, stored = store(value)
    frame = next(k for k, (t, _) in stored.items() if t == el.FRAME_TYPE)
    element = next(k for k, (t, _) in stored.items() if t != el.FRAME_TYPE)
    # an element's bytes changed
    t, d = stored[element]
    with pytest.raises(CorruptValueError, match=r"messages.*changed outside the saver"):
        load(blob, {**stored, element: (t, d[:-1] + bytes([d[-1] ^ 1]))})
    # a frame swapped for another's
    other = next(k for k, (t, _) in stored.items() if t == el.FRAME_TYPE and k != frame)
    with pytest.raises(CorruptValueError, match="frame"):
        load(blob, {**stored, frame: stored[other]})
    # a row missing
    with pytest.raises(CorruptValueError, match="not stored"):
        load(blob, {k: v for k, v in stored.items() if k != element})
    # the value's own bytes cut
    with pytest.raises(CorruptValueError, match="changed outside the saver"):
        load(blob[:-3], stored)


def test_what_is_stored_as_elements() -> None:
    class Custom(list[int]):
        pass

    assert el.storable([1])
    assert not el.storable([])
    assert not el.storable(Custom([1]))
    assert not el.storable((1, 2))
    assert not el.storable("text")


def test_an_element_that_cannot_be_serialized_is_named() -> None:
    with pytest.raises(InvalidInputError, match=r"channel 'messages', element 2"):
        el.split(SERDE, [1, 2, lambda: 3], name="messages")
