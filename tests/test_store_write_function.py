"""The write function setup() makes (rules.write_ddl): a store with an index sends its puts and
deletes as a call of it, one round trip as before; a schema without it (set up by an older
release) gets the statement, said once; setup(check=True) names it when it is missing; and its
plan, made once per session, stays on the primary keys after statistics of empty tables while
the tables grow."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from langgraph.store.base import PutOp

from langgraph_pg_saver import PostgresStore, SchemaError
from langgraph_pg_saver.db import policy
from langgraph_pg_saver.store import rules
from langgraph_pg_saver.store.rows import WriteRow
from langgraph_pg_saver.store.rules import text_hash
from tests.helpers import bag_of_words, freeze_empty_statistics, scans_during, traced

DIMS = 8
FUNCTION = "pgsaver_store_write_vector"


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A bag of hashed words (one more in the last dimension: no zero vector)."""
    return bag_of_words(texts, DIMS, bias=True)


INDEX: dict[str, Any] = {"dims": DIMS, "embed": embed, "fields": ["title"]}


@pytest.fixture(autouse=True)
def _no_statistics_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables here are small: no statistics question within a count (test_roundtrips.py)."""
    monkeypatch.setattr(policy, "STATS_RECHECK", 3600.0)


def _functions(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT proname FROM pg_proc WHERE proname LIKE 'pgsaver_store_write%' ORDER BY 1"
        ).fetchall()
    return [str(r[0]) for r in rows]


def _sent(trace: Any) -> str:
    """The statements a trace sent (the frontend's Parse and Query messages)."""
    return "\n".join(
        m for m in trace.messages if m.startswith("F") and ("Parse" in m or "Query" in m)
    )


def _vectors(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT key, text_hash FROM pgsaver_store_vectors ORDER BY key, field"
        ).fetchall()
    return [(str(k), str(h)) for k, h in rows]


def _puts(store: PostgresStore, conn: psycopg.Connection[Any]) -> dict[str, tuple[int, str]]:
    """A new item, an update of the same text, a changed text, a delete: each one's round
    trips and what it sent."""
    out = {}
    for name, ops in (
        ("new", [PutOp(("w",), "a", {"title": "pizza"})]),
        ("same text", [PutOp(("w",), "a", {"title": "pizza", "n": 1})]),
        ("changed", [PutOp(("w",), "a", {"title": "pasta"})]),
        ("put and delete", [PutOp(("w",), "b", {"title": "dog"}), PutOp(("w",), "a", None)]),
    ):
        with traced(conn.pgconn) as t:
            store.batch(ops)
        out[name] = (t.round_trips, _sent(t))
    return out


@pytest.mark.parametrize("vtype", ["vector", "halfvec"])
def test_setup_makes_the_function_and_writes_call_it(vector_dsn: str, vtype: str) -> None:
    index = {**INDEX, "ann_index_config": {"kind": "hnsw", "vector_type": vtype}}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as setup:  # type: ignore[arg-type]
        setup.setup()
        setup.setup(check=True)
    assert _functions(vector_dsn) == [f"pgsaver_store_write_{vtype}"]
    with psycopg.connect(vector_dsn) as conn:
        store = PostgresStore(conn, index=index)  # type: ignore[arg-type]
        store.get(("warm",), "up")  # the connection's first use asks one more question, once
        done = _puts(store, conn)
    assert {name: trips for name, (trips, _) in done.items()} == {
        "new": 2,
        "same text": 1,
        "changed": 2,
        "put and delete": 2,
    }
    for name, (_, sent) in done.items():
        assert f"pgsaver_store_write_{vtype}(" in sent, name
        assert "WITH put AS" not in sent, name
    assert _vectors(vector_dsn) == [("b", text_hash("dog"))]
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store2:  # type: ignore[arg-type]
        item = store2.get(("w",), "b")
        assert item is not None
        assert item.value == {"title": "dog"}
        assert store2.get(("w",), "a") is None
        assert [i.key for i in store2.search(("w",), query="dog")] == ["b"]


def test_the_body_is_the_statement(vector_dsn: str) -> None:
    """The function's statement is store_write's text with the parameters renumbered."""
    spec = rules.index_spec(INDEX)
    ddl = rules.write_ddl('"public"', spec)
    for setting, value in rules.WRITE_SETTINGS:
        assert f"SET {setting} = {value}" in ddl
    assert "%(" not in ddl
    assert "$12::text[]" in ddl
    # its rows are store_write's (rows.WriteRow's positions)
    returned = ddl.split("RETURNS TABLE (", 1)[1].split(")", 1)[0]
    names = [column.split()[0] for column in returned.split(",")]
    positions = {n.upper(): i for i, n in enumerate(names)}
    assert positions == {k: v for k, v in vars(WriteRow).items() if k in positions}
    assert len(names) == WriteRow.WIDTH
    with PostgresStore.from_conn_string(vector_dsn, index=INDEX) as store:
        store.setup()
    with psycopg.connect(vector_dsn) as conn:
        row = conn.execute(
            "SELECT pg_get_function_arguments(p.oid), p.proconfig FROM pg_proc AS p "
            "WHERE p.proname = %s",
            (FUNCTION,),
        ).fetchone()
    assert row is not None
    assert row[0].startswith("p_prefixes text[], p_keys text[], p_values text[]")
    assert sorted(row[1]) == sorted(f"{k}={v}" for k, v in rules.WRITE_SETTINGS)


def test_a_schema_without_the_function_sends_the_statement(
    vector_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    with PostgresStore.from_conn_string(vector_dsn, index=INDEX) as setup:  # type: ignore[arg-type]
        setup.setup()
        with psycopg.connect(vector_dsn, autocommit=True) as admin:
            admin.execute(f"DROP FUNCTION {FUNCTION}")
        with pytest.raises(SchemaError, match=FUNCTION):
            setup.setup(check=True)
        with psycopg.connect(vector_dsn) as conn:
            store = PostgresStore(conn, index=INDEX)  # type: ignore[arg-type]
            store.get(("warm",), "up")
            with caplog.at_level(logging.WARNING, logger="langgraph_pg_saver"):
                done = _puts(store, conn)
                store.put(("w",), "c", {"title": "cat"})
            said = [r for r in caplog.records if FUNCTION in r.getMessage()]
            assert len(said) == 1, [r.getMessage() for r in caplog.records]
            assert said[0].levelno == logging.WARNING
            # the first try found the function missing: one round trip more, once
            assert {name: trips for name, (trips, _) in done.items()} == {
                "new": 3,
                "same text": 1,
                "changed": 2,
                "put and delete": 2,
            }
            for name, (_, sent) in list(done.items())[1:]:
                assert "WITH put AS" in sent, name
                assert FUNCTION not in sent, name
            assert _vectors(vector_dsn) == [("b", text_hash("dog")), ("c", text_hash("cat"))]
            assert store.get(("w",), "a") is None
            # setup() makes it again; the store that fell back calls it from then on
            store.setup()
            setup.setup(check=True)
            with traced(conn.pgconn) as t:
                store.put(("w",), "c", {"title": "cat", "n": 1})
            assert t.round_trips == 1
            assert f"{FUNCTION}(" in _sent(t)


def test_a_missing_function_inside_the_callers_transaction(
    vector_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The caller's transaction is aborted by the call that finds the function missing (it
    raises); the store's next write sends the statement."""
    with PostgresStore.from_conn_string(vector_dsn, index=INDEX) as setup:  # type: ignore[arg-type]
        setup.setup()
    with psycopg.connect(vector_dsn, autocommit=True) as admin:
        admin.execute(f"DROP FUNCTION {FUNCTION}")
    with psycopg.connect(vector_dsn) as conn:
        store = PostgresStore(conn, index=INDEX)  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="langgraph_pg_saver"):
            with pytest.raises(psycopg.errors.UndefinedFunction), conn.transaction():
                store.put(("t",), "a", {"title": "pizza"})
            with conn.transaction():
                store.put(("t",), "a", {"title": "pizza"})
                store.put(("t",), "b", {"title": "dog"})
        assert len([r for r in caplog.records if FUNCTION in r.getMessage()]) == 1
        assert store.search(("t",), query="dog")[0].key == "b"
    assert _vectors(vector_dsn) == [("a", text_hash("pizza")), ("b", text_hash("dog"))]


def _write_scans(store: PostgresStore, conn: psycopg.Connection[Any], n: int) -> dict[str, Any]:
    """A batch of a new item, an unchanged and a changed text and a delete, in a transaction
    rolled back: the scans of the store's tables it made."""
    ops = [
        PutOp(("p",), f"new{n}", {"title": "a new pizza"}),
        PutOp(("g", "s1"), "m1", {"title": "w1 w2 w3"}),  # as loaded: unchanged
        PutOp(("g", "s2"), "m2", {"title": "changed words"}),
        PutOp(("g", "s3"), "m3", None),
    ]
    return scans_during(conn, lambda: store.batch(ops))


def test_the_plan_stays_on_the_keys_after_statistics_of_empty_tables(vector_dsn: str) -> None:
    """ANALYZE of the empty tables (autovacuum off: the statistics stay those), a session that
    writes then (its plan made on them), 20,000 items loaded: that session's writes and a new
    session's read both tables through their indexes only."""
    index = {**INDEX, "ann_index_config": {"kind": "flat"}}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as loader:  # type: ignore[arg-type]
        loader.setup()
        freeze_empty_statistics(vector_dsn)
        with psycopg.connect(vector_dsn) as early_conn:
            early = PostgresStore(early_conn, index=index)  # type: ignore[arg-type]
            early.put(("p",), "first", {"title": "pizza"})  # the plan, made on empty tables
            for start in range(0, 20_000, 2_000):
                loader.batch(
                    [
                        PutOp(("g", f"s{i % 100}"), f"m{i}", {"title": f"w{i % 7} w2 w3"})
                        for i in range(start, start + 2_000)
                    ]
                )
            loader.put(("g", "s1"), "m1", {"title": "w1 w2 w3"})
            with psycopg.connect(vector_dsn) as admin:
                row = admin.execute(
                    "SELECT c.reltuples, pg_relation_size(c.oid) / 8192 FROM pg_class AS c "
                    "WHERE c.relname = 'pgsaver_store'"
                ).fetchone()
                assert row is not None
                assert row[0] <= 0  # the statistics of the empty table
                assert row[1] >= policy.TRUSTED_STORE_PAGES  # large enough to scan slowly
            early_scans = _write_scans(early, early_conn, 1)
        with psycopg.connect(vector_dsn) as late_conn:
            late = PostgresStore(late_conn, index=index)  # type: ignore[arg-type]
            late.get(("warm",), "up")
            late_scans = _write_scans(late, late_conn, 2)
    for scans in (early_scans, late_scans):
        assert scans["pgsaver_store"][0] == 0, scans
        assert scans["pgsaver_store_vectors"][0] == 0, scans
        assert scans["pgsaver_store"][1] > 0, scans
        assert scans["pgsaver_store_vectors"][1] > 0, scans


def test_the_statement_alone_would_scan(vector_dsn: str) -> None:
    """The same statement's generic plan without the function's settings, after statistics of
    empty tables: sequential scans (what the settings keep the function from)."""
    spec = rules.index_spec(INDEX)
    ddl = rules.write_ddl('"public"', spec)
    body = ddl.split("RETURN QUERY\n", 1)[1].rsplit(";\nEND", 1)[0]
    with PostgresStore.from_conn_string(vector_dsn, index=INDEX) as store:
        store.setup()
    with psycopg.connect(vector_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgsaver_store")
        conn.execute("ANALYZE pgsaver_store_vectors")
        plain = "\n".join(str(r[0]) for r in conn.execute(f"EXPLAIN (GENERIC_PLAN) {body}"))
        for setting, value in rules.WRITE_SETTINGS:
            conn.execute(f"SET {setting} = {value}")
        kept = "\n".join(str(r[0]) for r in conn.execute(f"EXPLAIN (GENERIC_PLAN) {body}"))
    assert "Seq Scan on pgsaver_store" in plain
    assert "Seq Scan" not in kept
    assert "Index" in kept
