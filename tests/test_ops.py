"""The ops library (what the command line formats) called directly on a saver: the reports come
through the saver's driver, so a role without privileges gets the driver's PrivilegeError."""

from __future__ import annotations

import psycopg
import pytest
from graphs import approval, two_nodes

from langgraph_pg_saver import PostgresSaver, PrivilegeError, ops
from langgraph_pg_saver.db import migrate as _migrate
from langgraph_pg_saver.errors import SchemaMissingError


def test_schema_version_of_an_empty_and_of_a_set_up_database(empty_db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(empty_db_dsn, max_size=2) as saver:
        found = ops.schema_version(saver)
        assert (found.exists, found.tables, found.applied, found.migration) == (
            True,
            False,
            {},
            None,
        )
        with pytest.raises(SchemaMissingError, match="has no langgraph-pg-saver tables"):
            ops.status(saver)
        saver.setup()
        found = ops.schema_version(saver)
        assert found.migration == found.head == _migrate.head()
        assert found.pending() == []
    with PostgresSaver.from_conn_string(empty_db_dsn, schema="nowhere", max_size=2) as other:
        assert ops.schema_version(other).exists is False


def test_reports_of_a_filled_database(saver: PostgresSaver) -> None:
    graph = two_nodes().compile(checkpointer=saver)
    for i in range(3):
        graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": f"t{i}"}})
    approval().compile(checkpointer=saver).invoke(
        {"request": "r"}, {"configurable": {"thread_id": "waiting"}}
    )
    st = ops.status(saver, top=2)
    assert (st.threads, st.migration, len(st.top_by_bytes)) == (4, _migrate.head(), 2)
    assert st.as_dict()["tables"][0]["table"] == "pgsaver_checkpoints"
    rows = ops.threads(saver, order="checkpoints")
    assert {r.thread_id for r in rows} == {"t0", "t1", "t2", "waiting"}
    assert ops.thread_count(saver, "t1") == 2  # t2, waiting
    hist = ops.history(saver, "t0")
    assert [r.step for r in hist] == [2, 1, 0, -1]
    assert hist[-1].next == ["__start__"]
    assert ops.history(saver, "nope") == []
    shown = ops.show(saver, "t0")
    assert shown is not None
    assert shown.values == {"foo": "b", "bar": ["a", "b"]}
    assert shown.next == []
    assert ops.show(saver, "nope") is None
    report = ops.doctor(saver)
    assert report.ok, report.as_dict()
    assert [c.check for c in report.checks][:3] == ["connection", "server", "schema"]


def test_a_role_without_privileges_gets_the_drivers_diagnosis(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS lgps_ops_nobody")
        conn.execute("CREATE ROLE lgps_ops_nobody LOGIN")
    try:
        with PostgresSaver.from_conn_string(db_dsn + " user=lgps_ops_nobody", max_size=1) as weak:
            with pytest.raises(PrivilegeError) as err:
                ops.schema_version(weak)
            assert ("pgsaver_migrations", "SELECT") in err.value.missing
            failed = {c.check: c for c in ops.doctor(weak).checks if c.status == "FAIL"}
            assert "permission denied" in failed["schema"].detail
            assert "SELECT on pgsaver_migrations" in failed["privileges"].detail
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute("DROP OWNED BY lgps_ops_nobody")
            conn.execute("DROP ROLE lgps_ops_nobody")


@pytest.mark.parametrize("how", ["connection", "pool of one"])
def test_verify_import_reads_the_source_on_a_connection_of_its_own(db_dsn: str, how: str) -> None:
    """The official saver reads on its own connection: a saver on one connection, or on a pool of
    one, does not wait for itself, and the saver's connection keeps its search_path."""
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
    from psycopg_pool import ConnectionPool

    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        graph = two_nodes().compile(checkpointer=official)
        for t in range(3):
            graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": f"v{t}"}})
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        saver.import_official()
    if how == "connection":
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            saver = PostgresSaver(conn)
            found = ops.verify_import(saver, "public")
            path = conn.execute("SHOW search_path").fetchone()
    else:
        with ConnectionPool(db_dsn, min_size=1, max_size=1, timeout=5) as pool:
            saver = PostgresSaver(pool)
            found = ops.verify_import(saver, "public")
            with pool.connection() as conn:
                path = conn.execute("SHOW search_path").fetchone()
    assert (found.threads, found.different) == (3, [])
    assert found.checkpoints > 3
    assert path is not None
    assert path[0] == '"$user", public'
