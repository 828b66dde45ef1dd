"""Checkpoint metadata as stored, and what ``list(filter=...)`` selects. No I/O happens here.

Stored: the ``metadata`` jsonb column, which ``list``'s filters search through a GIN index, and,
whenever jsonb would change the metadata, an exact copy in ``metadata_exact`` (the serializer's
bytes), which is what reads return. jsonb changes a NUL character (it cannot hold one), a float
of 1e16 or more (it prints ``4.907577792660525e16`` as the integer ``49075777926605250``), -0.0,
NaN and infinities, non-string keys, subclasses (an IntEnum reads back as an int) and every other
object; the jsonb of such a "lossy" row is an approximation (``codec.jsonb``, which encodes it).

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
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from langgraph_pg_saver.codec.jsonb import INT_MAX_BITS, encodable, plain_str

# json.dumps with options builds an encoder per call: build it once (it keeps no state)
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


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
        return _DROP if value in (0, 1) or value.bit_length() > INT_MAX_BITS else value
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
        part = _pre(value) if plain_str(key) and (visible is None or key in visible) else _DROP
        if part is _DROP:
            exact = False
        else:
            pre[key] = part
    return FilterPlan(_JSON.encode(pre) if pre else None, exact, dict(filter))
