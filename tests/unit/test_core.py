"""The pure core, without a database."""

from __future__ import annotations

import enum
import json
import math
import uuid
from datetime import datetime, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint import metadata as _metadata
from langgraph_pg_saver.checkpoint import reading as _reading
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.codec import jsonb as _jsonb
from langgraph_pg_saver.codec import values as _values
from langgraph_pg_saver.db import adapt as _adapt
from langgraph_pg_saver.errors import InvalidInputError

SERDE = JsonPlusSerializer()


def cfg(**configurable: object) -> dict[str, object]:
    return {"configurable": configurable}


def test_config_keys_defaults_and_errors() -> None:
    assert _keys.config_keys(cfg(thread_id="t")) == ("t", "", None)
    assert _keys.config_keys(cfg(thread_id=5, checkpoint_ns=None, checkpoint_id="c")) == (
        "5",
        "",
        "c",
    )
    with pytest.raises(InvalidInputError, match="thread_id"):
        _keys.config_keys(cfg())
    with pytest.raises(InvalidInputError, match="thread_id"):
        _keys.config_keys(None)
    with pytest.raises(InvalidInputError, match="NUL"):
        _keys.config_keys(cfg(thread_id="a\x00"))


def test_encode_json_marks_lossy_forms() -> None:
    assert _jsonb.encode_json({"a": "b", "n": 2.5}) == ('{"a": "b", "n": 2.5}', False)
    text, lossy = _jsonb.encode_json({"a": "x\x00y"})
    assert (text, lossy) == ('{"a": "xy"}', True)
    # a literal backslash-u0000 is not a NUL: kept, not lossy
    text, lossy = _jsonb.encode_json({"a": "\\u0000"})
    assert lossy is False
    assert text == '{"a": "\\\\u0000"}'
    text, lossy = _jsonb.encode_json({"f": math.inf})
    assert (text, lossy) == ('{"f": null}', True)


def test_metadata_jsonb_is_plain_or_marked_lossy() -> None:
    plain = {"a": "b", "n": [1, 2.5, None, True, (3, 4)], "big": 2**80, "f": 9.9e15, "e": 1e-9}
    text, lossy = _jsonb.encode(plain)
    assert not lossy
    assert json.loads(text) == {**plain, "n": [1, 2.5, None, True, [3, 4]]}
    for bad in (
        {"a": "x\x00y"},
        {"f": 4.907577792660525e16},  # jsonb prints it as an integer
        {"f": -0.0},
        {"f": math.inf},
        {"f": math.nan},
        {"k": {1: "x"}},
        {"when": datetime(2026, 1, 2, tzinfo=timezone.utc)},
        {"o": object()},
        {"s": {1, 2}},
        {"huge": 10**5000},
    ):
        text, lossy = _jsonb.encode(bad)
        assert lossy, bad
        json.loads(text)
    assert json.loads(_jsonb.encode({"a": "x\x00y"})[0])["a"] == "xy"
    # the approximation holds what the prefilter asks of an equal value
    assert json.loads(_jsonb.encode({"f": 4.907577792660525e16})[0]) == {"f": 49075777926605248}
    assert (
        '"2026-01-02T00:00:00+00:00"'
        in _jsonb.encode({"w": datetime(2026, 1, 2, tzinfo=timezone.utc)})[0]
    )


def test_filter_plan_prefilters_what_sql_can_select_exactly() -> None:
    plan = _metadata.plan_filter(
        {"source": "loop", "step": 7, "score": 2.5, "big": 4.907577792660525e16}
    )
    assert plan.exact
    assert json.loads(plan.prefilter or "") == {
        "source": "loop",
        "step": 7,
        "score": 2.5,
        "big": 49075777926605248,
    }
    # None (a missing key matches), bools and 0/1 (True == 1), NaN, NUL strings, other types,
    # and containers (containment is not equality) are checked by the saver, not selected in SQL
    for value in [
        None,
        True,
        1,
        0.0,
        math.nan,
        math.inf,
        "a\x00b",
        datetime(2026, 1, 1),
        ["a"],
        {"x": 2},
    ]:
        plan = _metadata.plan_filter({"k": value, "other": "v"})
        assert not plan.exact, value
        assert json.loads(plan.prefilter or "") == {"other": "v"}, value
    assert _metadata.plan_filter({"k": None}).prefilter is None
    assert _metadata.plan_filter({1: "x"}).prefilter is None


def test_the_approximation_of_a_lossy_value_equal_to_a_str_or_number_is_that_str_or_number() -> (
    None
):
    class S(str, enum.Enum):
        A = "a"

    class Num(enum.IntEnum):
        X = 5

    approx = _jsonb.approximate
    assert approx(S.A) == "a"
    assert approx(Num.X) == 5
    assert type(approx(Num.X)) is int
    assert approx(Decimal("2.5")) == 2.5
    assert approx(Decimal("1e400")) == 10**400
    assert approx(Fraction(10, 4)) == 2.5
    assert approx(complex(3, 0)) == 3
    assert approx(Decimal("NaN")) is None
    assert approx(-0.0) == 0
    assert approx(1e300) == int(1e300)
    # a key jsonb holds is never hidden by an approximated one
    assert approx({"k": "plain", "k\x00": "other"}) == {"k": "plain"}
    assert approx({1: "a", "1": "b"}) == {"1": "b"}


def test_matches_is_in_memory_savers_rule() -> None:
    meta = {"a": 1, "t": True, "l": ["x"], "n": None}
    assert _metadata.matches({"a": 1.0, "t": 1, "l": ["x"], "n": None, "missing": None}, meta)
    assert not _metadata.matches({"l": "x"}, meta)
    assert not _metadata.matches({"l": ("x",)}, meta)
    assert not _metadata.matches({"a": math.nan}, meta)


def test_pack_typed_round_trip() -> None:
    for obj in [{"a": "\x00"}, None, b"bytes", [1, (2, 3)]]:
        assert _values.unpack_typed(SERDE, _values.pack_typed(SERDE, obj)) == SERDE.loads_typed(
            SERDE.dumps_typed(obj)
        )


@pytest.mark.parametrize("values_max", [_writing.VALUES_MAX_ROWS, 0])
def test_put_params_stores_only_new_versions_and_marks_missing_values_empty(
    values_max: int,
) -> None:
    checkpoint = {
        "v": 1,
        "id": "cp-2",
        "ts": "t",
        "channel_values": {"a": 1, "b": None},
        "channel_versions": {"a": "2", "b": "1", "delta": "5"},
        "versions_seen": {},
        "updated_channels": None,
    }
    built = _writing.put_params(
        SERDE,
        cfg(thread_id="t", checkpoint_id="cp-1"),
        checkpoint,  # type: ignore[arg-type]
        {"source": "loop", "step": 1, "run_id": "r"},
        {"b": "1", "delta": "5"},
        values_max=values_max,
    )
    params = built.params
    assert params["parent_checkpoint_id"] == "cp-1"
    if values_max:  # scalars, one key per row and column (the VALUES form of put)
        assert built.rows == 2
        assert (params["bc0"], params["bc1"]) == ("b", "delta")
        assert (params["bv0"], params["bv1"]) == ("1", "5")
        assert (params["bt0"], params["bt1"]) == ("null", "empty")
        assert params["bb1"] is _adapt.NULL_BYTEA  # a NULL typed bytea, as stored values are
        assert "blob_channels" not in params
    else:
        assert built.rows == 0
        assert params["blob_channels"] == ["b", "delta"]
        assert params["blob_types"] == ["null", "empty"]
        assert params["blob_values"][1] is None
        assert "bc0" not in params
    assert params["run_id"] == "r"
    assert params["metadata_exact"] is _adapt.NULL_BYTEA  # typed NULL: metadata kept whole in JSON
    body = SERDE.loads_typed((params["type"], params["checkpoint"]))
    assert "channel_values" not in body
    assert "channel_versions" not in body
    assert body["id"] == "cp-2"


def _body(versions: dict[str, object]) -> dict[str, object]:
    return {
        "v": 1,
        "id": "cp",
        "ts": "t",
        "channel_values": {},
        "channel_versions": versions,
        "versions_seen": {},
        "updated_channels": None,
    }


def test_put_params_checks_every_channel_name_not_only_the_new_ones() -> None:
    # names that are only in channel_versions (unchanged channels) are checked too
    for bad, message in (("a\x00b", "NUL"), ("a\ud800", "surrogate")):
        with pytest.raises(InvalidInputError, match=f"channel name.*{message}"):
            _writing.put_params(SERDE, cfg(thread_id="t"), _body({"ok": 1, bad: 2}), {}, {"ok": 1})  # type: ignore[arg-type]
    # non-ASCII names are fine, and so are names that look like escapes
    built = _writing.put_params(
        SERDE,
        cfg(thread_id="t"),
        _body({"ü": 1, "\\u0000": 2}),
        {},
        {},  # type: ignore[arg-type]
    )
    params = built.params
    assert params["channel_versions"] == '{"ü": 1, "\\\\u0000": 2}'


def test_non_str_keys_anywhere_keep_the_metadata_exactly_on_the_side() -> None:
    assert _jsonb.is_plain({"a": [{"b": ({"c": 1},)}], "d": "x"})
    assert not _jsonb.is_plain({"a": [{"b": ({"c": {1: "x"}},)}]})
    assert not _jsonb.is_plain([({(1, 2): None},)])
    assert _jsonb.is_plain("text")
    text, lossy = _jsonb.encode({"a": [{"b": {2: "two"}}]})
    assert lossy
    assert json.loads(text) == {"a": [{"b": {"2": "two"}}]}
    assert _jsonb.encode_json({2: "two"}) == ('{"2": "two"}', False)


def test_params_nbytes_counts_bytea_values() -> None:
    built = _writing.put_params(
        SERDE,
        cfg(thread_id="t"),
        {**_body({"a": 1, "b": 1}), "channel_values": {"a": "x" * 1000}},  # type: ignore[arg-type]
        {},
        {"a": 1, "b": 1},
    )
    params = built.params
    from langgraph_pg_saver.db.policy import params_nbytes

    n = params_nbytes(params)
    assert len(params["checkpoint"]) + 1000 < n < len(params["checkpoint"]) + 1100


def test_put_writes_params_idx_rules() -> None:
    built = _writing.put_writes_params(
        SERDE,
        cfg(thread_id="t", checkpoint_id="c"),
        [
            ("x", 1),
            ("__interrupt__", "first"),
            ("y", 2),
            ("__interrupt__", "last"),
            ("__error__", "e"),
        ],
        "task",
        "path",
    )
    params = None if built is None else built.params
    assert params is not None
    rows = dict(zip(params["idxs"], params["channels"], strict=False))
    assert rows == {0: "x", -3: "__interrupt__", 2: "y", -1: "__error__"}
    i = params["idxs"].index(-3)
    assert SERDE.loads_typed((params["types"][i], params["values"][i])) == "last"
    assert built.rows == 0  # special channels: arrays, with their own idx
    assert (
        _writing.put_writes_params(SERDE, cfg(thread_id="t", checkpoint_id="c"), [], "task", "")
        is None
    )


RUN = uuid.UUID(int=7)


@pytest.mark.parametrize(
    ("config", "metadata", "expected"),
    [
        # the checkpoint's own metadata, then the config's metadata, configurable, top level
        ({"metadata": {"run_id": "m"}, "run_id": RUN}, {"run_id": "own"}, "own"),
        ({"metadata": {"run_id": "m"}, "configurable": {"run_id": "c"}, "run_id": RUN}, {}, "m"),
        ({"configurable": {"run_id": "c"}, "run_id": RUN}, None, "c"),
        ({"run_id": RUN}, {}, str(RUN)),
        ({"metadata": {"run_id": RUN}}, None, str(RUN)),
        ({"configurable": {"run_id": 42}}, None, "42"),
        # what is no run id is passed over: bools, floats, None, a metadata that is no dict
        ({"metadata": {"run_id": True}, "run_id": RUN}, {"run_id": 1.5}, str(RUN)),
        ({"metadata": "not a dict", "configurable": {"run_id": None}}, None, None),
        ({}, None, None),
    ],
)
def test_run_id_of_takes_the_first_run_id_a_config_carries(
    config: dict[str, Any], metadata: dict[str, Any] | None, expected: str | None
) -> None:
    assert _keys.run_id_of(config, metadata) == expected  # type: ignore[arg-type]


def test_put_and_put_writes_store_the_same_run_id() -> None:
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_id": "c"}, "run_id": RUN}
    writes = _writing.put_writes_params(SERDE, config, [("x", 1)], "task", "")
    assert writes is not None
    assert writes.params["run_id"] == str(RUN)
    checkpoint: Any = {
        "v": 4,
        "id": "c2",
        "ts": "t",
        "channel_values": {},
        "channel_versions": {},
        "versions_seen": {},
    }
    put = _writing.put_params(SERDE, config, checkpoint, {"source": "loop", "step": 1}, {})
    assert put.params["run_id"] == str(RUN)
    # the stored metadata is LangGraph's: the top-level run id is not added to it
    assert "run_id" not in put.params["metadata"]
    no_run = _writing.put_writes_params(
        SERDE, cfg(thread_id="t", checkpoint_id="c"), [("x", 1)], "task", ""
    )
    assert no_run is not None
    assert no_run.params["run_id"] is None
    with pytest.raises(InvalidInputError, match="NUL"):
        _writing.put_writes_params(SERDE, {**config, "run_id": "a\x00b"}, [("x", 1)], "task", "")


def test_ordinary_writes_go_as_scalars_up_to_the_limit() -> None:
    config = cfg(thread_id="t", checkpoint_id="c")
    writes = [(f"ch{i}", i) for i in range(_writing.VALUES_MAX_ROWS + 1)]
    built = _writing.put_writes_params(SERDE, config, writes[:3], "task", "")
    params = None if built is None else built.params
    assert params is not None
    assert built.rows == 3
    assert [params[f"wc{i}"] for i in range(3)] == ["ch0", "ch1", "ch2"]
    assert SERDE.loads_typed((params["wt2"], params["wb2"])) == 2
    assert "idxs" not in params
    # one more than the limit, or values_max=0: arrays
    for many, values_max in ((writes, _writing.VALUES_MAX_ROWS), (writes[:3], 0)):
        built = _writing.put_writes_params(SERDE, config, many, "task", "", values_max=values_max)
        params = None if built is None else built.params
        assert params is not None
        assert built.rows == 0
        assert params["idxs"] == list(range(len(many)))


def test_put_params_send_arrays_for_no_values_and_for_many() -> None:
    names = [f"ch{i}" for i in range(_writing.VALUES_MAX_ROWS + 1)]
    body = {**_body(dict.fromkeys(names, 1)), "channel_values": dict.fromkeys(names, "v")}
    for new_versions in ({}, dict.fromkeys(names, 1)):
        built = _writing.put_params(SERDE, cfg(thread_id="t"), body, {}, new_versions)  # type: ignore[arg-type]
        params = built.params
        assert built.rows == 0
        assert params["blob_channels"] == list(new_versions)
    built = _writing.put_params(SERDE, cfg(thread_id="t"), body, {}, dict.fromkeys(names[:-1], 1))  # type: ignore[arg-type]
    params = built.params
    assert built.rows == _writing.VALUES_MAX_ROWS


def test_list_select_predicates() -> None:
    sel = _reading.list_select(None, None, None, None)
    assert sel.predicates == ()
    assert sel.params == {"limit": None}
    sel = _reading.list_select(
        cfg(thread_id="t", checkpoint_ns=""), {"source": "loop"}, cfg(checkpoint_id="b"), 3
    )
    assert sel.predicates == ("thread", "ns", "before", "filter")
    assert sel.params["filter"] == '{"source": "loop"}'
    assert sel.params["limit"] == 3
    # no checkpoint_ns key: all namespaces of the thread
    assert _reading.list_select(cfg(thread_id="t"), None, None, None).predicates == ("thread",)
    with pytest.raises(InvalidInputError, match="limit"):
        _reading.list_select(None, None, None, -1)
    with pytest.raises(InvalidInputError, match="filter"):
        _reading.list_select(None, [("a", 1)], None, None)  # type: ignore[arg-type]


def test_get_tuple_select() -> None:
    assert _reading.get_tuple_select(cfg(thread_id="t")).predicates == ("thread", "ns")
    sel = _reading.get_tuple_select(cfg(thread_id="t", checkpoint_id="c"))
    assert sel.predicates == ("thread", "ns", "id")
    assert sel.params == {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c"}


def test_next_version() -> None:
    v = _keys.next_version(None)
    assert len(v.split(".")[0]) == 32
    assert int(v.split(".")[0]) == 1
    assert int(_keys.next_version(v).split(".")[0]) == 2
    assert int(_keys.next_version(41).split(".")[0]) == 42


def test_merge_metadata_keeps_nuls_and_skips_reserved_keys() -> None:
    merged = _keys.merge_metadata(
        {
            "configurable": {"thread_id": "t", "user": "u\x00", "__x": 1, "obj": object()},
            "metadata": {"m": 1},
        },
        {"step": 1},  # type: ignore[typeddict-item]
    )
    assert merged == {"step": 1, "user": "u\x00", "m": 1}


def test_put_tries_plain_inserts_that_differ_from_the_upsert_only_in_on_conflict() -> None:
    from langgraph_pg_saver.db.sql import queries_for

    q = queries_for("public")
    assert b"ON CONFLICT" not in q.render(
        "put_new", blob_rows=0, claim=False, status=None, parts=False
    )
    assert (
        q.render("put", blob_rows=0, claim=False, status=None, parts=False).count(b"ON CONFLICT")
        == 2
    )
    plain = q.render("put", blob_rows=0, claim=False, status=None, parts=False).replace(
        b"ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING", b""
    )
    returning = plain[plain.index(b"RETURNING") :]
    plain = plain[: plain.index(b"ON CONFLICT")] + returning
    assert b" ".join(plain.split()) == b" ".join(
        q.render("put_new", blob_rows=0, claim=False, status=None, parts=False).split()
    )


def test_put_writes_tries_a_plain_insert_only_for_ordinary_writes() -> None:
    from psycopg_pool import ConnectionPool

    from langgraph_pg_saver import PostgresSaver

    pool: ConnectionPool = ConnectionPool("postgresql://unused", open=False)
    saver = PostgresSaver(pool)
    q = saver._q
    assert b"ON CONFLICT" not in q.render("put_writes_new", write_rows=0)
    assert b"ON CONFLICT" in q.render("put_writes", write_rows=0)
    ordinary = _writing.put_writes_params(
        SERDE, cfg(thread_id="t", checkpoint_id="c"), [("a", 1)], "t", ""
    )
    assert ordinary is not None
    assert saver._put_writes_sql(ordinary) == (
        q.render("put_writes_new", write_rows=1),
        q.render("put_writes", write_rows=1),
    )
    as_arrays = _writing.put_writes_params(
        SERDE, cfg(thread_id="t", checkpoint_id="c"), [("a", 1)], "t", "", values_max=0
    )
    assert as_arrays is not None
    assert saver._put_writes_sql(as_arrays) == (
        q.render("put_writes_new", write_rows=0),
        q.render("put_writes", write_rows=0),
    )
    # a special channel is expected to replace an earlier row: the upsert, with nothing to fall back to
    special = _writing.put_writes_params(
        SERDE, cfg(thread_id="t", checkpoint_id="c"), [("a", 1), ("__interrupt__", 2)], "t", ""
    )
    assert special is not None
    assert saver._put_writes_sql(special) == (q.render("put_writes", write_rows=0), None)


def test_values_json_cannot_hold_are_stored_lossy_with_the_exact_form_aside() -> None:
    for bad in ({"f": float("nan")}, {"o": object()}):
        assert _jsonb.encode_json(bad)[1] is True
        assert _jsonb.encode(bad)[1] is True


@pytest.mark.parametrize("name", ["put", "put_new", "put_writes", "put_writes_new"])
def test_rows_variants_differ_from_the_array_form_only_in_where_rows_come_from(name: str) -> None:
    from langgraph_pg_saver.db.sql import queries_for

    q = queries_for("public")
    slot = "blob_rows" if name.startswith("put_new") or name == "put" else "write_rows"
    extra: dict[str, Any] = (
        {"claim": False, "status": None, "parts": False} if slot == "blob_rows" else {}
    )
    arrays = q.render(name, **{slot: 0}, **extra)
    two = q.render(name, **{slot: 2}, **extra)
    sources = arrays.count(b"unnest(")
    assert sources == 1
    assert b"unnest(" not in two
    assert two.count(b"::bytea)") == 2 * sources
    # the same statement around every row source
    arrays_fragment = q._fragments["_blob_arrays" if slot == "blob_rows" else "_write_arrays"]
    values = two[two.index(b"(VALUES (") :]
    values = values[: values.index(b")) AS ") + len(b")) AS ")]
    alias = arrays_fragment[arrays_fragment.index(" AS ") + len(" AS ") :]
    assert two.replace(values + alias.encode(), arrays_fragment.encode()) == arrays
    assert q.render(name, **{slot: 2}, **extra) is two  # made once
    with pytest.raises(KeyError, match="get_tuple"):
        q.render("get_tuple", blob_rows=1)


def test_hot_statements_stay_within_psycopgs_query_cache() -> None:
    # psycopg converts a query's named placeholders once and caches the result only for queries of
    # up to MAX_CACHED_STATEMENT_LENGTH bytes sent with up to MAX_CACHED_STATEMENT_PARAMS
    # parameters; beyond either, it parses the query again on every call
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS

    from langgraph_pg_saver.db.sql import queries_for

    q = queries_for("s" * 63)  # the longest schema name
    n = _writing.VALUES_MAX_ROWS
    names = [f"ch{i}" for i in range(n)]
    body = {**_body(dict.fromkeys(names, 1)), "channel_values": dict.fromkeys(names, "v")}
    put_built = _writing.put_params(
        SERDE,
        cfg(thread_id="t"),
        body,  # type: ignore[arg-type]
        {"m": {2: 1}},
        dict.fromkeys(names, 1),
    )
    writes_built = _writing.put_writes_params(
        SERDE, cfg(thread_id="t", checkpoint_id="c"), [(c, 1) for c in names], "task", "p"
    )
    assert writes_built is not None
    put, writes = put_built.params, writes_built.params
    assert (put_built.rows, writes_built.rows) == (n, n)
    assert len(put) <= MAX_CACHED_STATEMENT_PARAMS
    assert len(writes) <= MAX_CACHED_STATEMENT_PARAMS
    statements = [
        q.render(
            name,
            **{slot: rows},
            **(
                {"claim": False, "status": "pending", "parts": parts}
                if name.startswith("put") and "writes" not in name
                else {}
            ),
        )
        for name, slot in (
            ("put", "blob_rows"),
            ("put_new", "blob_rows"),
            ("put_writes", "write_rows"),
            ("put_writes_new", "write_rows"),
        )
        for rows in range(n + 1)
        for parts in (False, True)
    ]
    # a put with parts sends two arrays more
    assert len(put) + 2 <= MAX_CACHED_STATEMENT_PARAMS
    statements += [q.get_tuple(("thread", "ns")), q.get_tuple(("thread", "ns", "id"))]
    for preds in (("thread",), ("thread", "ns", "before", "filter"), ("thread", "filter"), ()):
        statements.append(q.read_tuples(preds))
    assert max(len(s) for s in statements) <= MAX_CACHED_STATEMENT_LENGTH
    # put_orphan (a put's second try, only where the parent is not stored) is not on the hot
    # path: it fits for a schema name of usual length
    orphan = queries_for("public").render(
        "put_orphan", blob_rows=n, claim=True, status="pending", parts=False
    )
    assert len(orphan) <= MAX_CACHED_STATEMENT_LENGTH


def test_list_pages_start_after_the_last_key_in_list_order() -> None:
    from langgraph_pg_saver.db.sql import LIST_PAGE, queries_for

    assert not _reading.pages(LIST_PAGE)
    assert _reading.pages(LIST_PAGE + 1)
    assert _reading.pages(None)
    sel = _reading.list_select({"configurable": {"thread_id": "t"}}, None, None, None)
    first = _reading.page_select(sel, None)
    assert first.predicates == ("thread",)
    assert first.params == {"thread_id": "t", "limit": LIST_PAGE}
    after = _reading.page_select(sel, ("t", "ns", "id-7"))
    assert after.predicates == ("thread", "after")
    assert after.params == {
        "thread_id": "t",
        "limit": LIST_PAGE,
        "after_thread": "t",
        "after_ns": "ns",
        "after_id": "id-7",
    }
    assert sel.params["limit"] is None  # the caller's select is left as it was
    # the last checkpoint of read_tuples rows (kind 2 rows come last) and of list_keys rows
    head: list[Any] = [None] * 13
    head[0:4] = [2, "t", "ns", "id-1"]
    value: list[Any] = [None] * 13
    value[0:4] = [0, "t", "ns", "channel"]
    assert _reading.last_key("read_tuples", [tuple(value), tuple(head)]) == ("t", "ns", "id-1")
    assert _reading.last_key("read_tuples", [tuple(value)]) is None
    assert _reading.last_key("read_tuples", []) is None
    assert _reading.last_key("list_keys", [("t", "", "id-2", {}, None)]) == ("t", "", "id-2")
    # a thread's namespaces merged read a constant number: the smallest cap at least the limit
    q = queries_for("public")
    assert b"LIMIT 10\n" in q.read_tuples(("thread",), 3)
    assert b"LIMIT 100\n" in q.read_tuples(("thread",), 11)
    assert f"LIMIT {LIST_PAGE}\n".encode() in q.read_tuples(("thread",))
    assert b"(SELECT %(after_id)s::text)" in q.read_tuples(("thread", "ns", "after"))
