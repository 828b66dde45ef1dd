"""The Store's rules, without I/O: input checks, how values are stored, what a filter selects.

Values are JSON objects. They are stored as jsonb (``value``, which filters search) and, when
jsonb would change them (a NUL character, a float of 1e16 or more, -0.0: the rules of
``codec.jsonb``), also as their exact JSON text (``value_exact``), which reads return. Anything
JSON cannot hold (a datetime, a set, a tuple, bytes, NaN, a non-str key, a lone surrogate) is
refused, naming where it is, before anything is written: it would come back changed.

A filter selects what ``InMemoryStore`` selects: per top-level key, a dict filter matches a dict
value holding those keys (recursively), a list matches an equal list, a scalar an equal value, and
``{"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": x}`` compares (the ordering ones as numbers,
exactly as Python compares ints and floats).
In SQL, ``value @> prefilter`` narrows the candidates with the filter's parts whose jsonb
containment means exactly that on plain values (strings, numbers other than 0 and 1, dicts of
them); the store checks every candidate with the rule, so the result is the same either way.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any, NamedTuple

from langgraph.store.base import InvalidNamespaceError, Item, SearchItem

from langgraph_pg_saver.codec import jsonb as _jsonb
from langgraph_pg_saver.errors import InvalidInputError
from langgraph_pg_saver.store.rows import ItemRow, ScoredRow

_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


# --------------------------------------------------------------------------- input


def check_namespace(namespace: object, what: str = "namespace", *, empty: bool = False) -> str:
    """A namespace as stored: its labels joined by '.'; ``empty``: () is allowed (a prefix).

    A list of labels is taken as the tuple of the same labels, as the official store takes it
    (``search(["users"])``); a string is refused, not read as a sequence of one-letter labels."""
    if not isinstance(namespace, (tuple, list)):
        raise InvalidNamespaceError(
            f"{what} must be a tuple (or list) of strings, not {type(namespace).__name__}: "
            f"{namespace!r}"
        )
    if not namespace and not empty:
        raise InvalidNamespaceError(f"{what} cannot be empty")
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"{what} {namespace!r}: labels must be strings, not {type(label).__name__}"
            )
        if not label:
            raise InvalidNamespaceError(f"{what} {namespace!r}: labels cannot be empty strings")
        if "." in label:
            raise InvalidNamespaceError(
                f"{what} {namespace!r}: label {label!r} contains a '.', which labels cannot hold"
            )
        if "\x00" in label or not _jsonb.encodable(label):
            raise InvalidNamespaceError(
                f"{what} {namespace!r}: label {label!r} holds a NUL or a lone surrogate"
            )
    return ".".join(namespace)


def check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidInputError(f"an item key must be a str, not {type(key).__name__}: {key!r}")
    if "\x00" in key or not _jsonb.encodable(key):
        raise InvalidInputError(f"item key {key!r} holds a NUL or a lone surrogate")
    return key


def _where(path: str) -> str:
    return f"the value at {path}" if path else "the value"


def check_value(value: object, path: str = "") -> None:
    """Refuse what JSON cannot hold exactly, naming the path (``value['a'][2]``)."""
    if not isinstance(value, dict):
        raise InvalidInputError(f"an item value must be a dict, not {type(value).__name__}")
    stack: list[tuple[Any, str]] = [(value, "value")]
    while stack:
        obj, at = stack.pop()
        kind = type(obj)
        if obj is None or kind is bool:
            continue
        if kind is int:
            if obj.bit_length() > 14_000:
                raise InvalidInputError(f"{at} is an int too long to write as JSON text")
            continue
        if kind is str:
            if not _jsonb.encodable(obj):
                raise InvalidInputError(f"{at} holds a lone surrogate, which JSON cannot hold")
        elif kind is float:
            if not math.isfinite(obj):
                raise InvalidInputError(f"{at} is {obj!r}, which JSON cannot hold")
        elif kind is dict:
            for k, v in obj.items():
                if type(k) is not str:
                    raise InvalidInputError(
                        f"{at} has the key {k!r} ({type(k).__name__}): JSON keys are strings"
                    )
                if not _jsonb.encodable(k):
                    raise InvalidInputError(f"{at} has a key with a lone surrogate: {k!r}")
                stack.append((v, f"{at}[{k!r}]"))
        elif kind is list:
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(obj))
        else:
            hint = " (use a list)" if isinstance(obj, (tuple, set, frozenset)) else ""
            raise InvalidInputError(
                f"{at} is a {kind.__name__}, which JSON cannot hold and would come back "
                f"changed{hint}; nothing was written"
            )


def encode_value(value: dict[str, Any]) -> tuple[str, str | None]:
    """The jsonb text and, when jsonb would change the value, the exact JSON text."""
    check_value(value)
    text, lossy = _jsonb.encode(value)
    return text, (_JSON.encode(value) if lossy else None)


def check_ttl(ttl: object, what: str = "ttl") -> float | None:
    """A TTL in minutes, as the official store takes it: a number (or a numeric string) of 0 or
    more; 0 expires the item at once (kept until a sweep deletes it, as LangGraph's contract
    has it). A bool, a negative, infinite or NaN number is refused: none of them is a time."""
    if ttl is None:
        return None
    minutes: float | None = None
    if not isinstance(ttl, (bool, bytes, bytearray)):
        try:
            minutes = float(ttl)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            minutes = None
    if minutes is None or not math.isfinite(minutes) or minutes < 0:
        raise InvalidInputError(
            f"{what} must be a number of minutes (0 or more) or None, not {ttl!r}"
        )
    return minutes


def check_page(limit: object, offset: object) -> tuple[int, int]:
    for name, v in (("limit", limit), ("offset", offset)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidInputError(f"{name} must be a non-negative int, not {v!r}")
    return int(limit), int(offset)  # type: ignore[call-overload]


# --------------------------------------------------------------------------- rows


def below(prefix: str) -> str:
    """The LIKE pattern of the namespaces below ``prefix`` ('a.b' -> 'a.b.%', escaped)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ".%"


# an item's columns (rows.ItemRow), bound once: a module constant is read as fast as a literal
_PREFIX, _KEY, _VALUE = ItemRow.PREFIX, ItemRow.KEY, ItemRow.VALUE
_EXACT, _CREATED, _UPDATED = ItemRow.VALUE_EXACT, ItemRow.CREATED_AT, ItemRow.UPDATED_AT
_SCORE = ScoredRow.SCORE


def row_to_item(
    row: Sequence[Any],
    score: float | None = None,
    search: bool = False,
    loader: Callable[[Any], Any] | None = None,
) -> Item:
    """The Item of an item row (``rows.ItemRow``, or the item columns of a longer row); with
    ``search``, a SearchItem, scored by ``score`` or else by a ``rows.ScoredRow``'s score.

    psycopg loads jsonb into a dict, and the value is that dict. Only where the connection
    loads jsonb otherwise (it registered a loader of its own returning the raw bytes or text)
    is ``loader`` (the store's ``deserializer``) called, on what the connection returned, as
    the official store calls its deserializer; without one, it is read as JSON."""
    value = row[_VALUE]
    exact = row[_EXACT]
    if exact is not None:
        value = json.loads(exact)
    elif type(value) is not dict:
        # the connection loads jsonb into something else (a loader of its own): its raw JSON,
        # read by the store's deserializer, as the official store reads it
        value = (loader or _loads)(value)
    key, created, updated = row[_KEY], row[_CREATED], row[_UPDATED]
    namespace = tuple(row[_PREFIX].split("."))
    if search:
        if score is None and len(row) > _SCORE:
            score = row[_SCORE]
        return SearchItem(namespace, key, value, _utc(created), _utc(updated), score)
    return Item(
        value=value,
        key=key,
        namespace=namespace,
        created_at=_utc(created),
        updated_at=_utc(updated),
    )


def _loads(raw: Any) -> Any:
    if isinstance(raw, memoryview):
        raw = bytes(raw)
    if isinstance(raw, (bytes, bytearray, str)):
        return json.loads(raw)
    raise InvalidInputError(
        f"the connection loaded a stored value as a {type(raw).__name__}, not a dict: pass the "
        "store a deserializer= that reads it"
    )


def _utc(value: datetime) -> datetime:
    return value


# --------------------------------------------------------------------------- filters


def _number(value: Any) -> int | float | None:
    """The number a value means to an ordering operator, as InMemoryStore takes it (numbers,
    bools as 0 and 1, numeric strings), but kept exact: an int stays an int, so an int beyond
    float range (``10**400``) compares as Python compares it instead of raising OverflowError."""
    kind = type(value)
    if kind is int or kind is float:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        return int(value)
    if isinstance(value, (int, float)):  # a subclass (an IntEnum): its number
        return int(value) if isinstance(value, int) else float(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _apply(value: Any, operator: str, operand: Any) -> bool:
    """One comparison. The ordering ones compare as numbers (a numeric string counts, as in
    InMemoryStore), exactly as Python compares ints and floats; a value that is missing or not
    a number matches none of them."""
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    left, right = _number(value), _number(operand)
    if right is None:
        raise InvalidInputError(f"filter operator {operator} needs a number, not {operand!r}")
    if left is None:
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    if operator == "$lte":
        return left <= right
    raise InvalidInputError(f"unknown filter operator {operator!r}; use one of {sorted(OPERATORS)}")


def _match(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_apply(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_match(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_match(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def matches(filter: Mapping[str, Any] | None, value: Mapping[str, Any]) -> bool:
    """InMemoryStore's rule: every top-level key of the filter matches the value's."""
    return not filter or all(_match(value.get(k), v) for k, v in filter.items())


def check_filter(filter: object) -> dict[str, Any] | None:
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise InvalidInputError(f"filter must be a dict, not {type(filter).__name__}")
    stack: list[Any] = [filter]
    while stack:
        obj = stack.pop()
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                if not isinstance(k, str):
                    raise InvalidInputError(f"filter keys must be strings, not {k!r}")
                if k.startswith("$") and k not in OPERATORS:
                    raise InvalidInputError(
                        f"unknown filter operator {k!r}; use one of {sorted(OPERATORS)}"
                    )
                stack.append(v)
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
    return dict(filter) if filter else None


class FilterPlan(NamedTuple):
    #: jsonb the candidates' value must contain (None: every row is a candidate): one object, or
    #: an array of objects any of which it may contain (``alternatives``)
    prefilter: str | None
    #: the prefilter selects exactly the matches among plain rows (limit and offset in SQL)
    exact: bool
    filter: dict[str, Any] | None
    #: the objects of the prefilter, one JSON text each (None: no prefilter)
    alternatives: list[str] | None = None


_DROP = object()
#: the most alternatives a prefilter spells out (each 0, 1, True or False of a filter doubles
#: them); past that the filter's keys with several are checked in Python
MAX_ALTERNATIVES = 16


def _pre(wanted: Any) -> Any:
    """The values whose jsonb containment means what the rule means for ``wanted`` (a list of
    alternatives: Python's 1 == True == 1.0 and 0 == False, where jsonb tells a number from a
    boolean), or _DROP."""
    if type(wanted) is str:
        return [wanted] if "\x00" not in wanted and _jsonb.encodable(wanted) else _DROP
    if type(wanted) is bool:
        return [wanted, int(wanted)]
    if type(wanted) is int:
        # (jsonb holds an int exactly; one too long for JSON text is left to the check)
        if wanted in (0, 1):
            return [wanted, bool(wanted)]
        return [wanted] if wanted.bit_length() <= 14_000 else _DROP
    if type(wanted) is float and math.isfinite(wanted):
        if wanted in (0, 1):  # (-0.0 too: jsonb's numbers compare by value)
            return [int(wanted), bool(wanted)]
        return [wanted] if abs(wanted) < 1e16 else _DROP
    if type(wanted) is dict and wanted and not any(str(k).startswith("$") for k in wanted):
        if not all(_key_ok(k) for k in wanted):
            return _DROP
        parts = {k: _pre(v) for k, v in wanted.items()}
        if any(v is _DROP for v in parts.values()):
            return _DROP
        out: list[Any] = [{}]
        for k, options in parts.items():
            out = [{**o, k: x} for o in out for x in options]
            if len(out) > MAX_ALTERNATIVES:
                return _DROP
        return out
    if (
        type(wanted) is dict
        and set(wanted) == {"$eq"}
        and type(wanted["$eq"])
        in (
            str,
            int,
            float,
            bool,
        )
    ):
        return _pre(wanted["$eq"])  # (a dict operand means equality, not containment)
    return _DROP


def _key_ok(key: object) -> bool:
    """Whether jsonb holds a filter's key as it is (no NUL, no lone surrogate): one it does not
    is left to the check (no stored value has it, so the check matches nothing under it)."""
    return type(key) is str and "\x00" not in key and _jsonb.encodable(key)


def plan_filter(filter: dict[str, Any] | None) -> FilterPlan:
    if not filter:
        return FilterPlan(None, True, None)
    pre: list[dict[str, Any]] = [{}]
    exact = True
    for k, v in filter.items():
        options: Any = _pre(v) if _key_ok(k) else _DROP
        if options is _DROP or len(pre) * len(options) > MAX_ALTERNATIVES:
            exact = False
            continue
        pre = [{**o, k: x} for o in pre for x in options]
    if pre == [{}]:
        return FilterPlan(None, exact, filter)
    texts = [_JSON.encode(o) for o in pre]
    prefilter = texts[0] if len(texts) == 1 else "[" + ",".join(texts) + "]"
    return FilterPlan(prefilter, exact, filter, texts)


# --------------------------------------------------------------------------- namespaces


def namespace_matches(namespace: tuple[str, ...], match_type: str, path: tuple[str, ...]) -> bool:
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


def literal_prefix(conditions: Sequence[Any]) -> tuple[str, ...]:
    """The leading labels every listed namespace must have (a prefix condition's labels before
    its first wildcard), for the SQL to start from."""
    best: tuple[str, ...] = ()
    for c in conditions:
        if c.match_type != "prefix":
            continue
        labels: list[str] = []
        for label in c.path:
            if label == "*":
                break
            labels.append(label)
        if len(labels) > len(best):
            best = tuple(labels)
    return best


# --------------------------------------------------------------------------- semantic search

DISTANCES = ("cosine", "l2", "inner_product")
ANN_KINDS = ("hnsw", "ivfflat", "flat")
VECTOR_TYPES = ("vector", "halfvec")


#: the options of each kind of ANN index: pgvector's names (the index's WITH options), and the
#: other names the official store takes for them
ANN_BUILD = {"hnsw": ("m", "ef_construction"), "ivfflat": ("lists",), "flat": ("lists",)}
ANN_ALIASES = {"nlist": "lists"}
#: query-time options (pgvector's hnsw.ef_search and ivfflat.probes), kept for searches
ANN_SEARCH = ("ef_search", "probes")
#: the most pgvector lets a session set them to
ANN_SEARCH_MAX = {"ef_search": 1000, "probes": 32768}
#: ``ann_index_config``'s ``iterative_scan``, pgvector's values: "relaxed_order" (the default)
#: goes on past the candidates the prefix and filter drop until the nearest are found; "off"
#: reads the index's first ``ef_search`` candidates and keeps those that pass (the official
#: store's search: as fast, but it may return fewer items than asked for)
ITERATIVE_SCANS = ("relaxed_order", "strict_order", "off")

_log = logging.getLogger("langgraph_pg_saver.store")


class IndexSpec(NamedTuple):
    dims: int
    distance: str
    kind: str
    vector_type: str
    #: (field name as stored, tokenized path or "$") of the fields embedded by default
    fields: tuple[tuple[str, Any], ...]
    #: the index's build options, by pgvector's names (``m``, ``ef_construction``; ``lists``)
    ann: dict[str, int]
    #: the query-time options given in ``ann_index_config`` (``ef_search``, ``probes``): the
    #: least a search sets them to (pgvector's defaults, 40 and 1, when not given)
    search: Mapping[str, int] = MappingProxyType({})
    #: ``ann_index_config``'s ``iterative_scan`` (ITERATIVE_SCANS)
    iterative_scan: str = "relaxed_order"


def _ann_int(name: str, value: object) -> int | None:
    """An ANN option's value as the official store reads it: what ``int()`` makes of it, and
    0 or less for pgvector's default (None)."""
    try:
        if isinstance(value, (bytes, bytearray)):
            raise TypeError
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        raise InvalidInputError(f"ann_index_config {name} must be an int, not {value!r}") from None
    return number if number > 0 else None


def index_spec(index: Mapping[str, Any]) -> IndexSpec:
    """The store's ``index=`` checked: ``dims``, ``embed``, ``fields`` (a path or a list of
    paths; default ``["$"]``, the whole value), ``distance_type`` and ``ann_index_config`` as the
    official store takes them. An ANN option the index's kind does not have (``m`` for ivfflat, a
    name pgvector does not know) is ignored, as by the official store, and logged."""
    from langgraph.store.base import tokenize_path

    if not isinstance(index, Mapping):
        raise InvalidInputError(f"index must be a dict (dims, embed, fields), not {index!r}")
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or not 0 < dims <= 16000:
        raise InvalidInputError(f"index dims must be an int from 1 to 16000, not {dims!r}")
    if index.get("embed") is None:
        raise InvalidInputError("index needs embed: an Embeddings, a function or 'provider:model'")
    distance = index.get("distance_type", "cosine")
    if distance not in DISTANCES:
        raise InvalidInputError(f"distance_type must be one of {DISTANCES}, not {distance!r}")
    ann_config = index.get("ann_index_config") or {}
    if not isinstance(ann_config, Mapping):
        raise InvalidInputError(f"ann_index_config must be a dict, not {ann_config!r}")
    ann = dict(ann_config)
    kind = ann.pop("kind", "hnsw")
    if kind not in ANN_KINDS:
        raise InvalidInputError(f"ann_index_config kind must be one of {ANN_KINDS}, not {kind!r}")
    vector_type = ann.pop("vector_type", "vector")
    if vector_type not in VECTOR_TYPES:
        raise InvalidInputError(
            f"ann_index_config vector_type must be one of {VECTOR_TYPES}, not {vector_type!r}"
        )
    limit = 2000 if vector_type == "vector" else 4000
    if kind != "flat" and dims > limit:
        raise InvalidInputError(
            f"pgvector indexes {vector_type} columns of at most {limit} dimensions, not {dims}: "
            f"use vector_type 'halfvec' (up to 4000) or kind 'flat'"
        )
    scan = ann.pop("iterative_scan", "relaxed_order")
    if scan not in ITERATIVE_SCANS:
        raise InvalidInputError(
            f"ann_index_config iterative_scan must be one of {ITERATIVE_SCANS}, not {scan!r}"
        )
    build: dict[str, int] = {}
    search: dict[str, int] = {}
    for given, value in ann.items():
        name = ANN_ALIASES.get(given, given) if isinstance(given, str) else given
        if name in ANN_BUILD[kind]:
            target = build
        elif name in ANN_SEARCH:
            target = search
        else:
            _log.warning("ann_index_config: %r is not an option of kind %r; ignored", given, kind)
            continue
        number = _ann_int(given, value)
        if number is None:
            continue  # 0 or less: pgvector's default, as the official store takes it
        if target.get(name, number) != number:
            raise InvalidInputError(
                f"ann_index_config gives {name} twice ({given}={value!r} and {target[name]}): "
                "give one"
            )
        top = ANN_SEARCH_MAX.get(name)
        if top is not None and number > top:
            raise InvalidInputError(
                f"ann_index_config {given} must be at most {top} (pgvector's limit), not {value!r}"
            )
        target[name] = number
    if kind == "flat":
        build = {}  # no index to build
    fields = index.get("fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]  # one path, as the official store takes it
    if not isinstance(fields, (list, tuple)) or not all(isinstance(f, str) and f for f in fields):
        raise InvalidInputError(
            f"index fields must be a path or a list of paths (strings), not {fields!r}"
        )
    tokenized = tuple((f, f if f == "$" else tokenize_path(f)) for f in fields)
    return IndexSpec(
        dims, distance, kind, vector_type, tokenized, build, MappingProxyType(search), scan
    )


def index_ddl(schema_sql: str, spec: IndexSpec) -> list[str]:
    """The statements that make the vectors table and its index for ``spec`` (idempotent)."""
    column = f"{spec.vector_type}({spec.dims})"
    table = f"{schema_sql}.pgsaver_store_vectors"
    out = [
        f"CREATE TABLE IF NOT EXISTS {table} ("
        ' prefix text COLLATE "C" NOT NULL, key text COLLATE "C" NOT NULL,'
        ' field text COLLATE "C" NOT NULL, text_hash text NOT NULL,'
        f" embedding {column} NOT NULL, PRIMARY KEY (prefix, key, field),"
        f" FOREIGN KEY (prefix, key) REFERENCES {schema_sql}.pgsaver_store (prefix, key)"
        " ON DELETE CASCADE)",
    ]
    if spec.kind != "flat":
        suffix = {"cosine": "cosine", "l2": "l2", "inner_product": "ip"}[spec.distance]
        opclass = f"{spec.vector_type}_{suffix}_ops"
        options = ", ".join(f"{k} = {int(v)}" for k, v in sorted(spec.ann.items()))
        name = f"pgsaver_store_vectors_{spec.kind}_{spec.distance}_idx"
        out.append(
            f"CREATE INDEX IF NOT EXISTS {name} ON {table} USING {spec.kind} (embedding {opclass})"
            + (f" WITH ({options})" if options else "")
        )
    return out


def index_texts(
    spec: IndexSpec, value: Mapping[str, Any], fields: Sequence[str] | None
) -> list[tuple[str, str]]:
    """(field as stored, text) pairs to embed for a value: the put's own ``index`` list, or the
    index's fields. A path with several texts (``tags[*]``) gives ``path.0``, ``path.1``, ..."""
    from langgraph.store.base import get_text_at_path, tokenize_path

    paths = spec.fields if fields is None else [(f, tokenize_path(f)) for f in fields]
    out: list[tuple[str, str]] = []
    for name, path in paths:
        texts = get_text_at_path(value, path)
        if len(texts) == 1:
            out.append((name, texts[0]))
        else:
            out.extend((f"{name}.{i}", text) for i, text in enumerate(texts))
    return out


def text_hash(text: str) -> str:
    import hashlib

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def vector_text(vector: Sequence[float], dims: int, what: str) -> str:
    """An embedding as pgvector's text form, after checking its length and numbers."""
    if len(vector) != dims:
        raise InvalidInputError(
            f"the embedding of {what} has {len(vector)} dimensions; the index has {dims}: "
            "nothing was written"
        )
    for x in vector:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise InvalidInputError(f"the embedding of {what} holds {x!r}, not a finite number")
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def score(distance: float, kind: str) -> float:
    """A similarity from pgvector's distance: higher is nearer (cosine similarity for cosine; 0
    for a zero vector, whose cosine distance is NaN, as InMemoryStore scores it)."""
    if math.isnan(distance):
        return 0.0
    return 1.0 - distance if kind == "cosine" else -distance


# --------------------------------------------------------------------------- import


class SourceTables:
    """The statements that copy the official store's tables (``store``, ``store_vectors`` in
    ``schema``) into ours, one key range at a time. The range is in the source's own order
    (its primary key), so every statement selects a batch through the source table."""

    def __init__(self, schema: str) -> None:
        from psycopg import sql

        from langgraph_pg_saver.db.sql import queries_for

        queries_for(schema)  # the same rule for the name as the schema= option
        self.schema = schema
        self.schema_sql = sql.Identifier(schema).as_string()

    _RANGE = "(%(first)s OR (s.prefix, s.key) > (%(k1)s::text, %(k2)s::text))"

    def exists(self) -> bytes:
        return (
            b"SELECT to_regclass(%(store)s) IS NOT NULL AS has_store, "
            b"to_regclass(%(vectors)s) IS NOT NULL AS has_vectors"
        )

    def names(self) -> dict[str, str]:
        return {"store": f"{self.schema_sql}.store", "vectors": f"{self.schema_sql}.store_vectors"}

    def items(self, target: str, spec: IndexSpec | None = None) -> bytes:
        """A batch of items copied; with ``spec``, the vectors of the items copied (only those:
        an item already here keeps its own)."""
        vectors = ""
        if spec is not None:
            column = f"{spec.vector_type}({spec.dims})"
            vectors = f""", vec AS (
    INSERT INTO {target}.pgsaver_store_vectors (prefix, key, field, text_hash, embedding)
    SELECT v.prefix, v.key, v.field_name, '', v.embedding::text::{column}
    FROM ins JOIN {self.schema_sql}.store_vectors AS v ON v.prefix = ins.prefix AND v.key = ins.key
    ON CONFLICT (prefix, key, field) DO NOTHING
    RETURNING 1
)"""
        counted = "(SELECT count(*) FROM vec)" if spec is not None else "0"
        return f"""
WITH src AS MATERIALIZED (
    SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at, s.expires_at, s.ttl_minutes
    FROM {self.schema_sql}.store AS s
    WHERE {self._RANGE}
    ORDER BY s.prefix, s.key
    LIMIT %(limit)s
), ins AS (
    INSERT INTO {target}.pgsaver_store
        (prefix, key, value, created_at, updated_at, expires_at, ttl_minutes)
    SELECT prefix, key, value, created_at, updated_at, expires_at, ttl_minutes::float8 FROM src
    ON CONFLICT (prefix, key) DO NOTHING
    RETURNING prefix, key
){vectors}, last AS (
    SELECT prefix, key FROM src ORDER BY prefix DESC, key DESC LIMIT 1
)
SELECT (SELECT count(*) FROM src) AS items, (SELECT count(*) FROM ins) AS imported,
       (SELECT prefix FROM last) AS last_prefix, (SELECT key FROM last) AS last_key,
       {counted} AS vectors
""".encode()

    def _batch(self) -> str:
        return f"{self._RANGE} AND (s.prefix, s.key) <= (%(p2)s::text, %(q2)s::text)"

    def vector_column(self) -> bytes:
        """The type of the source's embedding column (``vector(1536)``), or none."""
        return (
            b"SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a "
            b"WHERE a.attrelid = to_regclass(%(vectors)s) AND a.attname = 'embedding' "
            b"AND NOT a.attisdropped"
        )

    def rows(self, target: str) -> bytes:
        return f"""
SELECT t.prefix, t.key, t.value, t.value_exact, t.created_at, t.updated_at, t.ttl_minutes
FROM {self.schema_sql}.store AS s
JOIN {target}.pgsaver_store AS t ON t.prefix = s.prefix AND t.key = s.key
WHERE {self._batch()}
""".encode()


# --------------------------------------------------------------------------- indexed writes

#: a statement's parameter, with the cast that follows it (``%(keys)b::text[]``)
_PARAM_RE = re.compile(r"%\((\w+)\)[sb](?:::(\w+(?:\[\])?))?")
#: the settings of the write function: one generic plan per session (made at its first call, and
#: again after an ANALYZE or DDL of its tables), on the primary keys whatever the statistics say
#: (statistics of empty tables included)
WRITE_SETTINGS = (
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
    ("enable_hashjoin", "off"),
    ("enable_mergejoin", "off"),
)


def write_function(spec: IndexSpec) -> str:
    """The name of the write function of ``spec``'s vector type (made by setup: write_ddl)."""
    return f"pgsaver_store_write_{spec.vector_type}"


def write_ddl(schema_sql: str, spec: IndexSpec) -> str:
    """The write function of ``spec``'s vector type: the ``store_write`` statement of
    queries.sql (one source) as a PL/pgSQL function, its named parameters renumbered to the
    function's arguments in ``store_write_call``'s order and types (docs/performance.md, "Store
    writes and the TTL sweep"). PL/pgSQL caches the plan of its statement for the session, and
    the SET clauses (WRITE_SETTINGS) make it one generic plan on the primary keys: a put is not
    planned at every call, as the statement sent unprepared is while the tables are small."""
    from langgraph_pg_saver.db.sql import raw_queries

    raw = raw_queries()
    body, call = raw["store_write"], raw["store_write_call"]
    args: dict[str, str] = {}
    for name, cast in _PARAM_RE.findall(call):
        if not cast or name in args:
            raise ValueError(f"store_write_call: argument {name!r} needs one cast, once")
        args[name] = cast
    casts: dict[str, set[str]] = {}
    for name, cast in _PARAM_RE.findall(body):
        casts.setdefault(name, set()).add(cast)
    if set(casts) != set(args):
        raise ValueError(
            f"store_write_call passes {sorted(args)}; store_write takes {sorted(casts)}"
        )
    for name, found in casts.items():
        if found - {"", args[name]}:
            raise ValueError(f"store_write casts {name!r} as {sorted(found)}, not {args[name]!r}")
    number = {name: i for i, name in enumerate(args, start=1)}

    def positional(m: re.Match[str]) -> str:
        cast = m.group(2)
        return f"${number[m.group(1)]}" + (f"::{cast}" if cast else "")

    body = _PARAM_RE.sub(positional, body)
    body = body.replace("{schema}", schema_sql).replace("{vtype}", spec.vector_type)
    if "{" in body or "$fn$" in body or "%(" in body:
        raise ValueError("store_write: a placeholder left that the write function cannot fill")
    params = ", ".join(f"p_{name} {cast}" for name, cast in args.items())
    settings = " ".join(f"SET {k} = {v}" for k, v in WRITE_SETTINGS)
    return f"""CREATE OR REPLACE FUNCTION {schema_sql}.{write_function(spec)}({params})
RETURNS TABLE (ok boolean, still boolean, prefix text, key text, field text)
LANGUAGE plpgsql VOLATILE {settings}
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
{body};
END
$fn$"""


# --------------------------------------------------------------------------- semantic search

#: the vectors' norm, for the partial index of zero vectors (which an ANN index of cosine
#: distance leaves out)
_NORM = {"vector": "vector_norm", "halfvec": "l2_norm"}


def zero_vector(text: str) -> bool:
    """Whether a vector (``vector_text``'s form) is all zeros: its cosine distance to anything
    is NaN, which no ANN index ranks."""
    return all(float(x) == 0.0 for x in text.strip("[]").split(","))


#: the most items the search function counts (under a prefix, or all of them without statistics)
COUNT_CAP = 200_000
#: the most matches of a filter whose keys the exact scan of a store without an ANN index takes
#: from the count (by primary key, one by one); past it, one scan planned for the call
LISTED_CAP = 2_000
#: with ``iterative_scan`` off, a filter over (about) the whole store goes to the index without
#: counting its matches only in a store of more items than this: in a smaller one their count,
#: up to the bound, reads pages that are in memory, and the official store's plan scans such a
#: store exactly (its recall@10 of a 1% filter: 1.0 at 10,000 items, 0.05 at 100,000)
FIRST_WHOLE_ITEMS = 50_000


def nearest_function(spec: IndexSpec) -> str:
    """The name of the search function of ``spec``'s distance (made by setup: nearest_ddl)."""
    return f"pgsaver_store_nearest_{spec.distance}"


def nearest_old_ddl(schema_sql: str, spec: IndexSpec) -> str:
    """The search function's form before ``p_scan`` (14 arguments), which stores of an earlier
    release call: made (or replaced) as a call of the current one with ``p_scan`` NULL (the
    default scan), so that during a rolling upgrade they search as before, in one statement."""
    name = f"{schema_sql}.{nearest_function(spec)}"
    args = ", ".join(["text", "text", "text", "jsonb", "boolean"] + ["integer"] * 9)
    passed = ", ".join(f"${i}" for i in range(1, 15))
    return (
        f"CREATE OR REPLACE FUNCTION {name}({args})"
        " RETURNS TABLE (prefix text, key text, value jsonb, value_exact text,"
        " created_at timestamptz, updated_at timestamptz, ttl_minutes double precision,"
        " distance double precision)"
        f" LANGUAGE sql AS $fn$ SELECT * FROM {name}({passed}, NULL::text) $fn$"
    )


def zero_index_ddl(schema_sql: str, spec: IndexSpec) -> str | None:
    """The partial index of the vectors of zero norm (cosine with an ANN index only: its scan
    never returns them; the search reads them through this index, scored as InMemoryStore
    scores them, 0)."""
    if spec.kind == "flat" or spec.distance != "cosine":
        return None
    return (
        "CREATE INDEX IF NOT EXISTS pgsaver_store_vectors_zero_idx ON "
        f"{schema_sql}.pgsaver_store_vectors (prefix, key) "
        f"WHERE {_NORM[spec.vector_type]}(embedding) = 0"
    )


def value_index_ddl(schema_sql: str) -> str:
    """The GIN index of the items' values (jsonb_path_ops: containment, the prefilter's test), so
    that a semantic search with a filter reads the items it matches rather than every item under
    its prefix. Built without fastupdate: each put pays its few entries at once (no pending list
    that a later put or search pays for)."""
    return (
        "CREATE INDEX IF NOT EXISTS pgsaver_store_value_idx ON "
        f"{schema_sql}.pgsaver_store USING gin (value jsonb_path_ops) WITH (fastupdate = off)"
    )


def nearest_ddl(schema_sql: str, spec: IndexSpec, iterative: bool) -> str:
    """The search function of ``spec`` (one statement per semantic search; docs/performance.md,
    "Semantic search"). Its parameters: the query vector (text), prefix and its LIKE pattern,
    the jsonb prefilter, omit_expired; ``probe``: the most matches the exact scan is always chosen
    for (NULL: always exact; 0: the ANN index, no count); ``cand``: vectors
    the ANN scan returns; ``n`` scored rows from the nearest (``skip`` of them left out), ``ulim``
    unscored rows, ``total`` rows in all; ``ef``, ``probes``: hnsw.ef_search and ivfflat.probes;
    ``tuples``: what a vector the index reads costs, in items of the exact scan; ``scan``: the
    index's ``iterative_scan`` ("off": its first ``ef`` candidates, those that pass, however
    few; the exact scan only where it costs less than those). Its SET clauses
    scope the pgvector settings to the call (iterative scans on pgvector 0.8 and newer); its
    statements run through EXECUTE, planned for each call's values (a LIKE pattern's index range
    and which conditions apply are known only then), and each is as small as the call allows:
    planning is most of a small search's time."""
    s = schema_sql
    vt = spec.vector_type
    op = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}[spec.distance]
    dist = f"v.embedding {op} $1::{vt}"
    # a zero vector's cosine distance is NaN: scored as InMemoryStore scores it (similarity 0)
    exact_dist = (
        f"coalesce(nullif({dist}, 'NaN'::float8), 1)" if spec.distance == "cosine" else dist
    )

    # the prefix and what is below it, as a key range first ('/' follows '.'): an OR of the two
    # alone is no index range
    def under(alias: str, p: str = "$2", b: str = "$3") -> str:
        return (
            f"({p}::text IS NULL OR ({alias}.prefix >= {p} AND {alias}.prefix < {p} || '/'"
            f" AND ({alias}.prefix = {p} OR {alias}.prefix LIKE {b})))"
        )

    def under_given(alias: str) -> str:
        # the same for a prefix that is given: a range a generic plan can scan
        return (
            f"({alias}.prefix >= $2 AND {alias}.prefix < $2 || '/'"
            f" AND ({alias}.prefix = $2 OR {alias}.prefix LIKE $3))"
        )

    under_s, under_v = under("s"), under("v")
    keep = "($4::jsonb[] IS NULL OR s.value @> ANY ($4)) AND (s.expires_at IS NULL OR s.expires_at > now() OR NOT $5)"
    cols = "s.prefix, s.key, s.value, s.value_exact, s.created_at, s.updated_at, s.ttl_minutes"
    item = "JOIN {s}.pgsaver_store AS s ON s.prefix = {a}.prefix AND s.key = {a}.key"
    # the items without vectors, newest first: after the scored ones, read only when those fall
    # short of the limit (the second branch of a UNION ALL under it)
    no_vectors = (
        f"NOT EXISTS (SELECT 1 FROM {s}.pgsaver_store_vectors AS w"
        " WHERE w.prefix = s.prefix AND w.key = s.key)"
    )

    def top(scored: str) -> str:
        """The items of ``scored`` (prefix, key, distance) as the function returns them, nearest
        first."""
        return (
            f"SELECT {cols}, t.distance FROM ({scored}) AS t {item.format(s=s, a='t')}"
            " ORDER BY t.distance, t.prefix, t.key"
        )

    def exact(candidates: str) -> str:
        """The exact scan of the items of ``candidates`` (prefix, key): each item's nearest
        field, then those without vectors."""
        return (
            f"WITH c AS ({candidates}), d AS MATERIALIZED ("
            " SELECT c.prefix, c.key, m.distance FROM c"
            f" LEFT JOIN LATERAL (SELECT min({exact_dist}) AS distance"
            f" FROM {s}.pgsaver_store_vectors AS v WHERE v.prefix = c.prefix AND v.key = c.key)"
            " AS m ON true)"
            f" ({top('SELECT * FROM d WHERE d.distance IS NOT NULL ORDER BY d.distance, d.prefix, d.key LIMIT $6 OFFSET $7')})"
            f" UNION ALL (SELECT {cols}, NULL::float8 FROM d {item.format(s=s, a='d')}"
            " WHERE d.distance IS NULL ORDER BY s.updated_at DESC, s.prefix, s.key LIMIT $8)"
            " LIMIT $9"
        )

    # no prefilter, expired items returned: every vector under the prefix is a candidate,
    # read from the vectors' own primary key range without the items (what a prefix of a tenth
    # of the store costs is then about its vectors alone)
    def exact_vectors_of(under_v: str, under_s: str) -> str:
        return (
            f"(SELECT {cols}, t.distance FROM (SELECT v.prefix, v.key, min({exact_dist}) AS distance"
            f" FROM {s}.pgsaver_store_vectors AS v WHERE {under_v} GROUP BY v.prefix, v.key"
            " ORDER BY 3, 1, 2 LIMIT $6 OFFSET $7) AS t"
            f" {item.format(s=s, a='t')} ORDER BY t.distance, t.prefix, t.key)"
            f" UNION ALL (SELECT {cols}, NULL::float8 FROM {s}.pgsaver_store AS s"
            f" WHERE {under_s} AND {no_vectors} ORDER BY s.updated_at DESC, s.prefix, s.key"
            " LIMIT $8) LIMIT $9"
        )

    def scan_of(under_s: str) -> str:
        return f"SELECT s.prefix, s.key FROM {s}.pgsaver_store AS s WHERE {under_s} AND {keep}"

    exact_vectors = exact_vectors_of(under_v, under_s)
    scan = scan_of(under_s)
    # with a prefix given, the exact scans' statements are static, with plans kept for the
    # session (their ranges are the prefix's whatever it is; planning was most of their time)
    exact_vectors_given = exact_vectors_of(under_given("v"), under_given("s"))
    scan_given = scan_of(under_given("s"))
    listed = "SELECT * FROM unnest($11::text[], $12::text[]) AS u(prefix, key)"
    matches = (
        "SELECT count(*), array_agg(c.prefix), array_agg(c.key) FROM (SELECT s.prefix, s.key"
        f" FROM {s}.pgsaver_store AS s WHERE {under('s', '$1', '$2')} AND s.value @> ANY ($3)"
        " AND (s.expires_at IS NULL OR s.expires_at > now() OR NOT $4) LIMIT $5) AS c"
    )
    count_all = f"SELECT count(*) FROM (SELECT 1 FROM {s}.pgsaver_store LIMIT $1) AS c"
    joined = item.format(s=s, a="v")

    def nearest(checked: bool) -> str:
        """The ANN index's nearest vectors under the prefix (joined to their items when the
        prefilter or expiry decides: pgvector's iterative scan goes on past the rows they
        drop), each item's nearest: the function's rows, or none when the index gave fewer
        than n items, or (cosine) when an item with a zero vector might rank among them."""
        scan_v = (
            f"SELECT v.prefix, v.key, {dist} AS distance FROM {s}.pgsaver_store_vectors AS v"
            + (f" {joined} WHERE {under_v} AND {keep}" if checked else f" WHERE {under_v}")
            + f" ORDER BY {dist} LIMIT $10"
        )
        worst = " AND t.worst < 1" if spec.distance == "cosine" else ""
        return (
            f"WITH near AS MATERIALIZED ({scan_v}),"
            " d AS (SELECT n.prefix, n.key, min(n.distance) AS distance, count(*) OVER () AS found"
            " FROM near AS n GROUP BY n.prefix, n.key),"
            " t AS (SELECT d.* FROM d ORDER BY d.distance, d.prefix, d.key LIMIT $6 OFFSET $7)"
            f" SELECT {cols}, t.distance FROM (SELECT t.*, max(t.distance) OVER () AS worst"
            f" FROM t) AS t {item.format(s=s, a='t')} WHERE (t.found >= $6{worst} OR bounded)"
            " ORDER BY t.distance, t.prefix, t.key"
        )

    zero_ann = ""
    if spec.distance == "cosine":
        # in every kind's function (one per distance and schema, whichever store's setup() made it
        # last): a flat store never takes the index's way, an HNSW store sharing its schema does.
        # The index never returns a zero vector (its distance is NaN): they are read through
        # their partial index and ranked at distance 1
        zero_ann = (
            f"WITH near AS MATERIALIZED ((SELECT v.prefix, v.key, {dist} AS distance"
            f" FROM {s}.pgsaver_store_vectors AS v {joined}"
            f" WHERE {under_v} AND {keep} ORDER BY {dist} LIMIT $10)"
            f" UNION ALL (SELECT v.prefix, v.key, 1::float8 FROM {s}.pgsaver_store_vectors AS v"
            f" {joined} WHERE {_NORM[vt]}(v.embedding) = 0 AND {under_v} AND {keep} LIMIT $10)),"
            " d AS (SELECT n.prefix, n.key, min(n.distance) AS distance, count(*) OVER () AS found"
            " FROM near AS n GROUP BY n.prefix, n.key),"
            " t AS (SELECT d.* FROM d ORDER BY d.distance, d.prefix, d.key LIMIT $6 OFFSET $7)"
            f" SELECT {cols}, t.distance FROM t {item.format(s=s, a='t')} WHERE t.found >= $6"
            " ORDER BY t.distance, t.prefix, t.key"
        )
    # the planner settings the function changes for its index scan are the defaults for the
    # rest of it (and the caller's again after it); its one static statement, the index scan,
    # keeps a generic plan (its EXECUTEd ones are planned at each call whatever this says)
    settings = (
        "SET hnsw.ef_search = 40 SET ivfflat.probes = 1 SET plan_cache_mode = force_generic_plan"
        " SET enable_seqscan = on SET enable_sort = on SET enable_bitmapscan = on"
        " SET enable_hashjoin = on SET enable_mergejoin = on"
    )
    if iterative:
        settings += (
            " SET hnsw.iterative_scan = relaxed_order SET ivfflat.iterative_scan = relaxed_order"
        )

    def lit(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    planner = ("seqscan", "sort", "bitmapscan", "hashjoin", "mergejoin")
    planner_off = ", ".join(f"set_config('enable_{k}', 'off', true)" for k in planner)
    planner_on = ", ".join(f"set_config('enable_{k}', 'on', true)" for k in planner)

    names = [
        "p_query",
        "p_prefix",
        "p_below",
        "alts",
        "p_omit",
        "p_n",
        "p_skip",
        "p_ulim",
        "p_total",
        "p_cand",
        "pa",
        "ka",
    ]

    def static(text: str) -> str:
        # an EXECUTE text's $1..$10 (the USING list) as the function's parameters
        return re.sub(r"\$(\d+)\b", lambda m: names[int(m.group(1)) - 1], text)

    using = "USING p_query, p_prefix, p_below, alts, p_omit, p_n, p_skip, p_ulim, p_total, p_cand"

    def guarded(text: str) -> list[str]:
        # a static statement whose plan is kept for the session: made (and run) with the
        # planner kept off every way but the indexes' (the function's SET clauses restore the
        # settings for the rest of it and for the caller); FOUND as it left it, in answered
        return [
            f"PERFORM {planner_off};",
            f"RETURN QUERY {static(text)};",
            "answered := FOUND;",
            f"PERFORM {planner_on};",
        ]

    def indented(lines: list[str], indent: int) -> str:
        return "\n".join(" " * indent + line for line in lines)

    def exact_all(indent: int, counted: bool = False) -> str:
        # the exact scan of every item under the prefix that the prefilter selects (without
        # one, of the prefix's vectors): planned for the call (with a filter, the value's GIN
        # index or the prefix's range; a large prefix, a sequential scan), except a prefix
        # without a filter counted small enough, whose plan is kept (its range, whatever the
        # prefix)
        if counted:
            first, second = guarded(exact(scan_given)), guarded(exact_vectors_given)
        else:
            first = [f"RETURN QUERY EXECUTE {lit(exact(scan))} {using};"]
            second = [f"RETURN QUERY EXECUTE {lit(exact_vectors)} {using};"]
        lines = ["IF checked THEN", *("    " + x for x in first), "ELSE"]
        return indented([*lines, *("    " + x for x in second), "END IF;"], indent)

    zero_step = (
        f"""
    -- an item with a zero vector (distance 1) might rank among them: the index's nearest and
    -- those, together
    RETURN QUERY EXECUTE {lit(zero_ann)} {using};
    IF FOUND THEN
        RETURN;
    END IF;"""
        if zero_ann
        else ""
    )
    scan_step = (
        """
    IF p_scan IS NOT NULL THEN
        -- ann_index_config's iterative_scan (ivfflat's has no strict_order)
        PERFORM set_config('hnsw.iterative_scan', p_scan, true),
                set_config('ivfflat.iterative_scan',
                           CASE p_scan WHEN 'off' THEN 'off' ELSE 'relaxed_order' END, true);
    END IF;"""
        if iterative
        else ""
    )
    return f"""CREATE OR REPLACE FUNCTION {s}.{nearest_function(spec)}(
    p_query text, p_prefix text, p_below text, p_filter jsonb, p_omit boolean, p_probe integer,
    p_cand integer, p_n integer, p_skip integer, p_ulim integer, p_total integer, p_ef integer,
    p_tuples integer, p_probes integer, p_scan text)
RETURNS TABLE (prefix text, key text, value jsonb, value_exact text, created_at timestamptz,
               updated_at timestamptz, ttl_minutes double precision, distance double precision)
LANGUAGE plpgsql {settings}
AS $fn$
#variable_conflict use_column
DECLARE
    pa text[];
    ka text[];
    seen bigint;
    bound bigint;
    everything float8;
    outside bigint := 0;
    checked boolean := p_filter IS NOT NULL OR p_omit;
    -- the index's first candidates only (iterative_scan off): what they give is the answer
    bounded boolean := coalesce(p_scan = 'off', false);
    answered boolean;
    -- the prefilter: one object, or an array of objects any of which the value may contain
    alts jsonb[] := CASE jsonb_typeof(p_filter) WHEN 'array'
                    THEN ARRAY(SELECT jsonb_array_elements(p_filter)) WHEN 'object'
                    THEN ARRAY[p_filter] END;
BEGIN
    IF p_probe IS NULL THEN
        IF p_filter IS NOT NULL THEN
            -- the matches, when no more than {LISTED_CAP:,}: the exact scan of those
            EXECUTE {lit(matches)} INTO seen, pa, ka
                USING p_prefix, p_below, alts, p_omit, {LISTED_CAP + 1};
            IF seen = 0 THEN
                RETURN;  -- nothing under the prefix matches
            END IF;
            IF seen <= {LISTED_CAP} THEN
{indented(guarded(exact(listed)), 16)}
                RETURN;
            END IF;
        END IF;
{exact_all(8)}
        RETURN;
    END IF;
    IF p_probe > 0 THEN
        -- the items of the whole store (the statistics' count, or counted when there are none)
        SELECT c.reltuples INTO everything FROM pg_class AS c
        WHERE c.oid = {lit(s + ".pgsaver_store")}::regclass;
        IF everything IS NULL OR everything < 1 THEN
            EXECUTE {lit(count_all)} INTO everything USING {COUNT_CAP};
        END IF;
        -- The index reads about cand * everything / matches vectors to find cand of the
        -- matches, each costing p_tuples items of the exact scan, which reads the matches: the
        -- exact scan costs less while matches^2 < cand * tuples * everything. So the matches
        -- are counted up to that bound (at least p_probe) and no further.
        -- (Without iterative scans, the index reads its ef candidates whatever the matches:
        -- the exact scan costs less while matches < ef * tuples.)
        bound := least({COUNT_CAP}, greatest(p_probe::float8, CASE WHEN bounded
                       THEN p_ef::float8 * p_tuples
                       ELSE ceil(sqrt(p_cand::float8 * p_tuples * greatest(everything, 1))) END)
                       )::bigint;
        IF bounded AND p_filter IS NOT NULL AND p_prefix IS NOT NULL
           AND everything > {FIRST_WHOLE_ITEMS} THEN
            -- iterative_scan off: the items outside the prefix's key range, up to the bound
            -- (two short index-only ranges of the primary key)
            PERFORM {planner_off};
            SELECT (SELECT count(*) FROM (SELECT 1 FROM {s}.pgsaver_store AS s
                        WHERE s.prefix < p_prefix LIMIT bound + 1) AS a)
                 + (SELECT count(*) FROM (SELECT 1 FROM {s}.pgsaver_store AS s
                        WHERE s.prefix >= p_prefix || '/' LIMIT bound + 1) AS b)
              INTO outside;
            PERFORM {planner_on};
        END IF;
        IF bounded AND p_filter IS NOT NULL AND outside <= bound
           AND everything > {FIRST_WHOLE_ITEMS} THEN
            -- iterative_scan off, a filter over (about) the whole of a large store: the
            -- index's first candidates, as the official store's plan reads them, without
            -- counting the matches (their count reads a heap page per match)
            NULL;
        ELSIF p_filter IS NOT NULL THEN
            -- the items the prefilter selects under the prefix (the value's GIN index, or the
            -- prefix's key range: the planner's choice for this call), kept for the exact scan
            EXECUTE {lit(matches)} INTO seen, pa, ka
                USING p_prefix, p_below, alts, p_omit, bound + 1;
            IF seen = 0 THEN
                RETURN;  -- nothing under the prefix matches
            END IF;
            IF seen <= bound THEN
{indented(guarded(exact(listed)), 16)}
                RETURN;
            END IF;
        ELSIF p_prefix IS NOT NULL THEN
            -- the prefix's key range, counted by a static statement (its plan kept for the
            -- session: planning was a third of the count's time)
            PERFORM {planner_off};
            SELECT count(*) INTO seen FROM (SELECT 1 FROM {s}.pgsaver_store AS s
                WHERE {static(under_given("s"))} LIMIT bound + 1) AS c;
            PERFORM {planner_on};
            IF seen <= bound THEN
{exact_all(16, counted=True)}
                RETURN;
            END IF;
        END IF;
    END IF;
    PERFORM set_config('hnsw.ef_search', greatest(p_ef, 1)::text, true),
            set_config('ivfflat.probes', greatest(p_probes, 1)::text, true);{scan_step}
    -- the index's scan, as a plan made once per session (generic: the same for any query):
    -- planning was most of its time. With the planner kept off every other way, the plan is
    -- the index's order with the item lookups by primary key, whatever the statistics say
    IF checked THEN
{indented(guarded(nearest(True)), 8)}
    ELSE
{indented(guarded(nearest(False)), 8)}
    END IF;
    IF answered OR bounded THEN
        RETURN;  -- (iterative_scan off: the first candidates' answer, however short)
    END IF;{zero_step}
    -- the index gave fewer items than asked for (a filter it could not satisfy within
    -- hnsw.max_scan_tuples, items without vectors): the exact scan decides
{exact_all(4)}
END
$fn$"""
