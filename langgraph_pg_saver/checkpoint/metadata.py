"""Checkpoint metadata as stored, and what ``list(filter=...)`` selects. No I/O happens here.

Stored: the ``metadata`` jsonb column, which ``list``'s filters search through a GIN index, and,
whenever jsonb would change the metadata, an exact copy in ``metadata_exact`` (the serializer's
bytes), which is what reads return. jsonb changes a NUL character (it cannot hold one), a float
of 1e16 or more (it prints ``4.907577792660525e16`` as the integer ``49075777926605250``), -0.0,
NaN and infinities, non-string keys, subclasses (an IntEnum reads back as an int) and every other
object; the jsonb of such a "lossy" row is an approximation (``approximate``).

Selected: what ``InMemorySaver`` selects, ``all(value == metadata.get(key) for key, value in
filter.items())`` on the metadata as read back: per-key Python equality, so ``{"k": None}`` matches
a missing key, ``{"k": 1}`` matches ``True`` and ``1.0``, ``{"tags": ["a"]}`` matches ``["a"]`` and
not ``["a", "b"]``. In SQL a containment ``metadata @> prefilter`` chooses candidates, a superset of
the matches; the saver then applies the exact rule to each candidate. The prefilter holds the
filter's string values and its numbers other than 0 and 1 (which equal False and True), each as the
form every equal stored value has in jsonb: exact for plain rows, and the approximation is built so
that it holds for lossy ones too (a str or int subclass as its value, a big float as the int of its
exact value, a Decimal or Fraction as its number). When nothing was left out, ``FilterPlan.exact``
says so and ``limit`` stays in SQL.

The one case outside this: an object of a class of your own whose ``==`` says True to a str or a
number it is not. InMemorySaver would match it; here it is not a candidate.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

# json.dumps with options builds an encoder per call: build it once (it keeps no state)
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
#: floats from here on print with an exponent, which jsonb turns into an integer
_FLOAT_EXPONENT = 1e16
#: ints this long cannot become text (sys.get_int_max_str_digits): stored only in the exact copy
_INT_MAX_BITS = 14_000


def encodable(text: str) -> bool:
    """Whether ``text`` is valid Unicode (no lone surrogate), so UTF-8 and jsonb can hold it."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_str(text: object) -> bool:
    """A str jsonb keeps exactly: the str type itself, no NUL, valid UTF-8."""
    return type(text) is str and "\x00" not in text and encodable(text)


def is_plain(obj: Any) -> bool:
    """Whether jsonb keeps ``obj`` exactly, type included, as json.loads reads it back (tuples
    become lists, as LangGraph's serializer makes them too). Dict key order is not kept."""
    stack = [obj]
    while stack:
        item = stack.pop()
        t = type(item)
        if t is str:
            if "\x00" in item or not encodable(item):
                return False
        elif t is dict:
            for key, value in item.items():
                if not _plain_str(key):
                    return False
                stack.append(value)
        elif t is list or t is tuple:
            stack.extend(item)
        elif t is float:
            if not (abs(item) < _FLOAT_EXPONENT) or (item == 0 and math.copysign(1, item) < 0):
                return False  # NaN fails the comparison too
        elif t is int:
            if item.bit_length() > _INT_MAX_BITS:
                return False
        elif item is not None and t is not bool:
            return False
    return True


def approximate(obj: Any) -> Any:
    """A JSON value close to ``obj``, for the jsonb of a lossy row (reads use the exact copy).

    Whatever equals a string or a number (other than the objects of user classes with their own
    ``==``) approximates to exactly that string or number, as the prefilter asks for it."""
    if isinstance(obj, str):
        text = str.__str__(obj)  # a str subclass's value, whatever its __str__ says
        return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        value = int.__index__(obj)
        return value if value.bit_length() <= _INT_MAX_BITS else None
    if isinstance(obj, float):
        return _number(float.__float__(obj))
    if isinstance(obj, numbers.Number):  # Decimal, Fraction, complex, numpy's numbers
        number: Any = obj
        try:
            if isinstance(number, complex) or not isinstance(number, numbers.Real):
                if number.imag != 0:
                    return str(number)
                number = number.real
            try:
                whole = int(number)
            except (ValueError, OverflowError):  # NaN, infinity
                whole = None
            if whole is not None and number == whole:
                return approximate(whole)
            return _number(float(number))
        except (TypeError, ValueError, OverflowError, ArithmeticError, AttributeError):
            return str(number)
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        # keys jsonb holds as they are first, so that an approximated key never hides one of them
        for key, value in obj.items():
            if _plain_str(key):
                out[key] = approximate(value)
        for key, value in obj.items():
            if not _plain_str(key):
                out.setdefault(
                    approximate(key if isinstance(key, str) else str(key)), approximate(value)
                )
        return out
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [approximate(v) for v in obj]
    iso = getattr(obj, "isoformat", None)
    if callable(iso):
        return approximate(iso())
    return approximate(str(obj))


def _number(value: float) -> Any:
    """A float as jsonb should hold it: finite only, -0.0 as 0, from 1e16 on as the int of its exact
    value (its repr is rounded: 4.907577792660525e16 is 49075777926605248)."""
    if not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return int(value) if abs(value) >= _FLOAT_EXPONENT else value


def encode(metadata: dict[str, Any]) -> tuple[str, bool]:
    """The jsonb text of ``metadata``, and whether it is lossy (the exact copy must then be stored
    beside it)."""
    if is_plain(metadata):
        return _JSON.encode(metadata), False
    return _JSON.encode(approximate(metadata)), True


def matches(filter: Mapping[Any, Any], metadata: Mapping[Any, Any]) -> bool:
    """InMemorySaver's rule, on the metadata as read back."""
    return all(value == metadata.get(key) for key, value in filter.items())


# --------------------------------------------------------------------------- the prefilter

_DROP = object()


def _pre(value: Any) -> Any:
    """The form in jsonb of every stored value equal to ``value`` (a str, or a number other than 0
    and 1), or _DROP: None (a missing key matches too), a bool, 0 or 1 (True == 1), NaN and the
    infinities, a string jsonb cannot hold, a list or dict (containment is not equality), any other
    type."""
    t = type(value)
    if t is str:
        return value if "\x00" not in value and encodable(value) else _DROP
    if t is int:
        return _DROP if value in (0, 1) or value.bit_length() > _INT_MAX_BITS else value
    if t is float:
        if not math.isfinite(value) or value in (0.0, 1.0):
            return _DROP
        # an integral float equals the int of its exact value, which its repr may round
        return int(value) if value.is_integer() else value
    return _DROP


class FilterPlan(NamedTuple):
    """How ``list`` runs a metadata filter."""

    #: jsonb text for ``metadata @>``; None when no part of the filter narrows in SQL
    prefilter: str | None
    #: the prefilter holds every item: it selects exactly the matches but for lossy rows
    exact: bool
    #: the caller's filter, for ``matches``
    filter: dict[Any, Any]


def plan_filter(filter: Mapping[Any, Any], visible: Collection[str] | None = None) -> FilterPlan:
    """``visible``: the keys the metadata column holds in clear (all when None); others are
    checked only on the whole metadata, read back."""
    pre: dict[str, Any] = {}
    exact = True
    for key, value in filter.items():
        part = _pre(value) if _plain_str(key) and (visible is None or key in visible) else _DROP
        if part is _DROP:
            exact = False
        else:
            pre[key] = part
    return FilterPlan(_JSON.encode(pre) if pre else None, exact, dict(filter))
