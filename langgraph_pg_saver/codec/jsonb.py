"""Exact JSON for jsonb columns. No I/O happens here.

jsonb changes a NUL character (it cannot hold one), a lone surrogate, a float of 1e16 or more (it
prints ``4.907577792660525e16`` as the integer ``49075777926605250``), -0.0, NaN and infinities,
non-string keys, subclasses (an IntEnum reads back as an int) and every other object. ``encode``
says whether a value is stored exactly (``is_plain``) or as an approximation (``approximate``),
whose exact copy must then be stored beside it; ``encode_json`` is the same for a column whose
values are plain by construction (channel_versions). The checkpoint metadata and the store's values
both use these rules.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

# json.dumps with options builds an encoder per call: build it once (it keeps no state)
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
#: floats from here on print with an exponent, which jsonb turns into an integer
_FLOAT_EXPONENT = 1e16
#: ints this long cannot become text (sys.get_int_max_str_digits): stored only in the exact copy
INT_MAX_BITS = 14_000


def encodable(text: str) -> bool:
    """Whether ``text`` is valid Unicode (no lone surrogate), so UTF-8 and jsonb can hold it."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plain_str(text: object) -> bool:
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
                if not plain_str(key):
                    return False
                stack.append(value)
        elif t is list or t is tuple:
            stack.extend(item)
        elif t is float:
            if not (abs(item) < _FLOAT_EXPONENT) or (item == 0 and math.copysign(1, item) < 0):
                return False  # NaN fails the comparison too
        elif t is int:
            if item.bit_length() > INT_MAX_BITS:
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
        return value if value.bit_length() <= INT_MAX_BITS else None
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
            if plain_str(key):
                out[key] = approximate(value)
        for key, value in obj.items():
            if not plain_str(key):
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


def _reject(obj: Any) -> Any:
    raise TypeError(type(obj).__name__)


# json.dumps builds a new encoder on every call that passes options: build them once (they keep no
# state between calls)
_STRICT_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_reject)
_SAFE_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def encode_json(obj: Any) -> tuple[str, bool]:
    """JSON text for a jsonb column (channel_versions), and whether it lost anything: NUL
    characters and lone surrogates (jsonb cannot hold them), non-JSON values. Metadata has its own
    rules (encode)."""
    try:
        text = _STRICT_JSON.encode(obj)
        if not text.isascii():
            text.encode("utf-8")
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return _SAFE_JSON.encode(approximate(obj)), True
    if "\\u0000" in text:  # may also be a literal backslash-u0000: re-encoding is then a no-op
        safe = _SAFE_JSON.encode(approximate(obj))
        return safe, safe != text
    return text, False
