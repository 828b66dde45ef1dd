"""Metadata reads back exactly as written, and list(filter=...) selects what InMemorySaver selects:
a property test over generated metadata and filters, then the cases users hit, the plan, and the
limit when candidates fail the exact check."""

from __future__ import annotations

import asyncio
import enum
import json
import math
import os
import threading
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from test_indexes import plan_nodes

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver
from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint import metadata as _metadata
from langgraph_pg_saver.checkpoint import reading as _reading
from langgraph_pg_saver.errors import InvalidInputError

SERDE = JsonPlusSerializer()
EXAMPLES = int(os.environ.get("LANGGRAPH_PG_SAVER_FILTER_EXAMPLES", "150"))

_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=4)
KEYS = st.one_of(st.sampled_from(["a", "b", "k\x00", "q'\"", "ü", "", "a b"]), _TEXT)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    # ints the serializer can hold (64 bits), as InMemorySaver needs
    st.sampled_from([0, 1, 2, -1, 2**53 + 1, 49075777926605248, 2**64 - 1, -(2**63)]),
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from(
        [
            0.0,
            -0.0,
            1.0,
            2.0,
            2.5,
            1e-7,
            1e16,
            4.907577792660525e16,
            1e300,
            -1e300,
            5e-324,
            math.inf,
            -math.inf,
            math.nan,
        ]
    ),
    st.floats(),
    st.sampled_from(["", "a", "ab", "a\x00b", "\x00", "'", '"', "\\", "\\u0000", "ü", "日本"]),
    st.sampled_from(["\ufdd0", "__pgsaver_exact__", "{}", "[]", "null", "1"]),
    _TEXT,
)


class Colour(str, enum.Enum):
    RED = "a"  # equal to the string "a"


class Level(enum.IntEnum):
    HIGH = 2  # equal to 2 and 2.0


# values jsonb cannot hold as they are, some equal to plain ones: read from the exact copy, and
# still found by the prefilter
EXOTIC = st.sampled_from(
    [
        *(Decimal("2.5"), Decimal(2), Decimal("1E+400"), Decimal("NaN"), Colour.RED, Level.HIGH),
        *(uuid.UUID(int=7), date(2026, 1, 2), {"a", "b"}),
    ]
)

VALUES = st.recursive(
    st.one_of(SCALARS, EXOTIC),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(KEYS, inner, max_size=3),
        st.dictionaries(st.integers(0, 2), inner, max_size=2),
    ),
    max_leaves=6,
)
METADATA = st.dictionaries(KEYS, VALUES, max_size=4)


def same(a: Any, b: Any) -> bool:
    """Equal with types: 1 is not True nor 1.0, -0.0 is not 0.0, NaN is NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Decimal) and a.is_nan():
        return bool(b.is_nan())
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _top_level_nul(*dicts: dict[Any, Any]) -> bool:
    return any(isinstance(v, str) and "\x00" in v for d in dicts for v in d.values())


def _clear(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM pgsaver_writes; DELETE FROM pgsaver_blobs;")
        conn.execute("DELETE FROM pgsaver_checkpoints")


def _ids(tuples: Any) -> list[tuple[str, str]]:
    return [(t.config["configurable"]["thread_id"], t.checkpoint["id"]) for t in tuples]


def _check_filters(saver: Any, dsn: str, data: st.DataObject) -> None:
    _clear(dsn)
    memory = InMemorySaver()
    written: list[tuple[tuple[str, str], tuple[str, bytes]]] = []
    puts = data.draw(st.lists(st.tuples(st.sampled_from(["t1", "t2"]), METADATA), max_size=6))
    heads: dict[str, Any] = {}
    for i, (thread, metadata) in enumerate(puts):
        cp = empty_checkpoint()
        cp["id"] = f"cp-{i:03d}"
        cfg = heads.get(thread, config(thread))
        heads[thread] = saver.put(cfg, cp, metadata, {})
        memory.put(cfg, cp, metadata, {})
        # read back exactly as written, types included (the serializer's round trip, which
        # InMemorySaver's filters see too: tuples become lists)
        packed = SERDE.dumps_typed(_keys.merge_metadata(cfg, metadata))
        merged = SERDE.loads_typed(packed)
        written.append(((thread, cp["id"]), packed))
        tup = saver.get_tuple(heads[thread])
        assert tup is not None
        assert same(tup.metadata, merged), (tup.metadata, merged)
    # each read decodes anew, as InMemorySaver's does: a NaN is never the filter's own object
    stored = [(k, v) for _, m in written for k, v in SERDE.loads_typed(m).items()]
    item = (
        st.one_of(st.tuples(KEYS, VALUES), st.sampled_from(stored))
        if stored
        else st.tuples(KEYS, VALUES)
    )
    for _ in range(4):
        filter = dict(data.draw(st.lists(item, min_size=1, max_size=3)))
        # the rule InMemorySaver applies, on the metadata as read back
        expected = [key for key, m in written if _metadata.matches(filter, SERDE.loads_typed(m))]
        got = _ids(saver.list(None, filter=filter))
        assert sorted(got) == sorted(expected), filter
        if not _top_level_nul(filter, *(SERDE.loads_typed(m) for _, m in written)):
            # InMemorySaver itself (it drops NULs from top-level strings; we keep them)
            assert sorted(_ids(memory.list(None, filter=filter))) == sorted(expected), filter
        for thread in ("t1", "t2"):
            limited = _ids(saver.list(config(thread), filter=filter, limit=1))
            mine = sorted((k for k in expected if k[0] == thread), reverse=True)
            assert limited == mine[:1], filter


PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(data=st.data())
def test_filters_select_what_in_memory_saver_selects(
    saver: PostgresSaver, db_dsn: str, data: st.DataObject
) -> None:
    _check_filters(saver, db_dsn, data)


class _Bridged:
    """An AsyncPostgresSaver on an event loop of its own thread, called through its sync methods
    (which run its async code on that loop)."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.saver = self._run(self._open(dsn))

    async def _open(self, dsn: str) -> AsyncPostgresSaver:
        return await AsyncPostgresSaver.from_conn_string(dsn, max_size=2).__aenter__()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def put(self, *args: Any) -> Any:
        return self.saver.put(*args)

    def get_tuple(self, cfg: Any) -> Any:
        return self.saver.get_tuple(cfg)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self.saver.list(*args, **kwargs)

    def close(self) -> None:
        self._run(self.saver.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def bridged(db_dsn: str) -> Iterator[_Bridged]:
    b = _Bridged(db_dsn)
    yield b
    b.close()


@settings(PROPERTY, max_examples=max(EXAMPLES // 3, 10))
@given(data=st.data())
def test_async_filters_select_what_in_memory_saver_selects(
    bridged: _Bridged, db_dsn: str, data: st.DataObject
) -> None:
    _check_filters(bridged, db_dsn, data)


# ---------------------------------------------------------------- the cases users hit


CASES: list[tuple[dict[str, Any], dict[str, Any], bool]] = [
    # stored, filter, matches
    ({"k": "a\x00b"}, {"k": "ab"}, False),
    ({"k": "a\x00b"}, {"k": "a\x00b"}, True),
    ({"tags": ["a", "b"]}, {"tags": ["a"]}, False),
    ({"tags": ["a", "b"]}, {"tags": ["a", "b"]}, True),
    ({"tags": ["a", "b"]}, {"tags": "a"}, False),
    ({"other": 1}, {"k": None}, True),
    ({"k": None}, {"k": None}, True),
    ({"k": "x"}, {"k": None}, False),
    ({"k": True}, {"k": 1}, True),
    ({"k": 1.0}, {"k": 1}, True),
    ({"k": 1}, {"k": True}, True),
    ({"k": 2}, {"k": True}, False),
    ({"k": 4.907577792660525e16}, {"k": 49075777926605248}, True),
    ({"k": 4.907577792660525e16}, {"k": 49075777926605250}, False),
    ({"k": 49075777926605250}, {"k": 4.907577792660525e16}, False),
    ({"k": 49075777926605248}, {"k": 4.907577792660525e16}, True),
    ({"k": 1e300}, {"k": 1e300}, True),
    ({"k": 1e300}, {"k": 10**300}, False),
    ({"k": {"a": 1, "b": 2}}, {"k": {"a": 1}}, False),
    ({"k": {"a": 1}}, {"k": {"a": 1.0}}, True),
    ({"k": [1, 2]}, {"k": (1, 2)}, False),
    ({"k": math.nan}, {"k": math.nan}, False),
    ({"k": math.inf}, {"k": math.inf}, True),
    ({"k": -0.0}, {"k": 0}, True),
    ({"k'\"": "v"}, {"k'\"": "v"}, True),
    ({"k": "'; DROP TABLE x; --"}, {"k": "'; DROP TABLE x; --"}, True),
    # lossy values equal to plain ones
    ({"k": Colour.RED}, {"k": "a"}, True),
    ({"k": Level.HIGH}, {"k": 2}, True),
    ({"k": Level.HIGH}, {"k": 2.0}, True),
    ({"k": Decimal("2.5")}, {"k": 2.5}, True),
    ({"k": Decimal("1E+400")}, {"k": 10**400}, True),
    ({"k": Decimal("0.1")}, {"k": 0.1}, False),
    ({"k": "a\x00b", "u": "x"}, {"u": "x"}, True),
]


def _run_cases(saver: Any) -> list[bool]:
    results = []
    for i, (stored, filter, _) in enumerate(CASES):
        cfg = config(f"case-{i}")
        saver.put(cfg, checkpoint({}), stored, {})
        found = _ids(saver.list(None, filter={**filter, "case": i}))
        results.append(bool(found))
    return results


def _with_case(saver: Any) -> Any:
    class Tagged:  # every put also records its case number, so the cases stay apart
        def put(self, cfg: Any, cp: Any, metadata: Any, versions: Any) -> Any:
            case = int(cfg["configurable"]["thread_id"].split("-")[1])
            return saver.put(cfg, cp, {**metadata, "case": case}, versions)

        def list(self, *args: Any, **kwargs: Any) -> Any:
            return saver.list(*args, **kwargs)

    return Tagged()


def test_the_filters_users_write_mean_what_in_memory_saver_means(saver: PostgresSaver) -> None:
    assert _run_cases(_with_case(saver)) == [m for _, _, m in CASES]
    memory = InMemorySaver()
    assert _run_cases(_with_case(memory))[2:] == [m for _, _, m in CASES][2:]  # NULs: it strips


async def test_async_the_filters_users_write(asaver: AsyncPostgresSaver) -> None:
    got = []
    for i, (stored, filter, _) in enumerate(CASES):
        await asaver.aput(config(f"case-{i}"), checkpoint({}), {**stored, "case": i}, {})
        got.append(bool([t async for t in asaver.alist(None, filter={**filter, "case": i})]))
    assert got == [m for _, _, m in CASES]
    # and metadata reads back with its types
    when = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)
    stored = {"f": 4.907577792660525e16, "big": 1e300, "neg": -0.0, "n": 2**64 - 1, "t": (1, "a")}
    stored["when"] = when
    cfg = await asaver.aput(config("types"), checkpoint({}), stored, {})
    tup = await asaver.aget_tuple(cfg)
    assert tup is not None
    assert same(tup.metadata, {**stored, "t": [1, "a"]})
    # an int beyond 64 bits is kept by jsonb (not by the serializer, which keeps the exact copy of
    # lossy metadata: that is refused by name)
    cfg = await asaver.aput(config("ints"), checkpoint({}), {"n": 10**30, "m": -(10**40)}, {})
    tup = await asaver.aget_tuple(cfg)
    assert tup is not None
    assert same(tup.metadata, {"n": 10**30, "m": -(10**40)})
    with pytest.raises(InvalidInputError, match="metadata could not be serialized"):
        await asaver.aput(config("ints"), checkpoint({}), {"n": 10**30, "f": math.inf}, {})


def test_a_limit_is_met_when_newer_candidates_fail_the_exact_check(saver: PostgresSaver) -> None:
    """Rows whose metadata jsonb cannot hold exactly are stored approximately (NULs dropped): the
    prefilter then also finds newer rows that fail the exact check, and list() reads further until
    the limit is met."""
    for i in range(5):
        saver.put(config(f"old-{i}"), checkpoint({}), {"user": "u1", "note": "ab", "i": i}, {})
    for i in range(40):
        saver.put(config(f"new-{i}"), checkpoint({}), {"user": "u1", "note": "a\x00b"}, {})
    got = list(saver.list(None, filter={"user": "u1", "note": "ab"}, limit=3))
    assert [t.metadata["i"] for t in got] == [4, 3, 2]
    # a filter checked on the candidates' metadata (None: also a missing key) with a limit
    for i in range(300):
        saver.put(config(f"more-{i}"), checkpoint({}), {"user": "u1", "flag": "set"}, {})
    got = list(saver.list(None, filter={"user": "u1", "flag": None, "note": "ab"}, limit=2))
    assert [t.metadata["i"] for t in got] == [4, 3]
    assert len(list(saver.list(None, filter={"user": "u1", "flag": None}))) == 45
    assert list(saver.list(None, filter={"user": "u1", "flag": None}, limit=0)) == []


def test_a_filter_runs_on_the_gin_index(saver: PostgresSaver, db_dsn: str) -> None:
    """list(None, filter, limit) across a large table, for a filter that matches few rows, finds
    them by a bitmap scan of the metadata index: the statement that reads every match when fewer
    than 5,000 do (read_tuples_capped, after the walk of the newest: tests/test_list_global.py).
    (The statement over the whole table, which runs only for more, may walk the id index instead
    when the sampled statistics overestimate the filter: it did once, at 1,001 for 100.)"""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type,"
            " checkpoint, channel_versions, metadata)"
            " SELECT 't-' || i, '', 'c-' || i, 'msgpack', '\\x80', '{}',"
            " jsonb_build_object('user', 'u-' || (i % 1000), 'source', 'loop', 'step', i % 50)"
            " FROM generate_series(1, 100000) AS i"
        )
        conn.execute("ANALYZE pgsaver_checkpoints")
        for filter in ({"user": "u-7", "source": "loop"}, {"user": "u-7", "step": 7, "x": None}):
            sel = _reading.list_select(None, filter, None, 10)
            assert sel.filter is not None
            query = saver._q.capped(
                "read_tuples" if sel.filter.exact else "list_keys", sel.predicates
            )
            assert query is not None
            # as the saver sends them: planned for these parameters (the filter matches 0.1%)
            params = {**sel.params, "limit": _reading.first_fetch(sel.filter, 10)}
            row = conn.execute(b"EXPLAIN (FORMAT JSON) " + query, params, prepare=False).fetchone()
            assert row is not None
            nodes = plan_nodes(row[0])
            scans = [n for n in nodes if n.get("Relation Name") == "pgsaver_checkpoints"]
            assert scans, json.dumps(row[0])
            assert all(n["Node Type"] != "Seq Scan" for n in scans), json.dumps(row[0])
            gin = [n for n in nodes if n.get("Index Name") == "pgsaver_checkpoints_metadata_idx"]
            assert len(gin) == 1, json.dumps(row[0])
    assert len(list(saver.list(None, filter={"user": "u-7", "source": "loop"}))) == 100
    assert len(list(saver.list(None, filter={"user": "u-7", "step": 7, "x": None}))) == 100
