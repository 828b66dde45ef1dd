"""setup(): from empty, twice, check-only, too-new, caller's connection settings, many processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import traceback
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config
from psycopg.rows import dict_row

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    InvalidSchemaNameError,
    PostgresSaver,
    SchemaOutdatedError,
    SchemaTooNewError,
)
from langgraph_pg_saver.db.sql import migrations, queries_for

HEAD = len(migrations())
TABLES = {
    "pgsaver_checkpoints",
    "pgsaver_blobs",
    "pgsaver_writes",
    "pgsaver_migrations",
    "pgsaver_store",
    "pgsaver_imports",
    "pgsaver_thread_status",
    "pgsaver_elements",
    "pgsaver_cache",
    "pgsaver_deleted_threads",
}


def tables(dsn: str, schema: str = "public") -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'pgsaver%%'",
            (schema,),
        ).fetchall()
    return {r[0] for r in rows}


def applied(dsn: str, schema: str = "public") -> list[int]:
    with psycopg.connect(dsn) as conn:
        q = queries_for(schema)
        return [r[0] for r in conn.execute(q["migrations_applied"]).fetchall()]


def test_setup_from_empty_and_twice(empty_db_dsn: str) -> None:
    assert tables(empty_db_dsn) == set()
    with PostgresSaver.from_conn_string(empty_db_dsn) as saver:
        saver.setup()
        assert tables(empty_db_dsn) == TABLES
        assert applied(empty_db_dsn) == list(range(1, HEAD + 1))
        saver.setup()
        assert applied(empty_db_dsn) == list(range(1, HEAD + 1))
        saver.verify_schema()


async def test_async_setup_from_empty_and_twice(empty_db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(empty_db_dsn) as saver:
        await saver.setup()
        await saver.setup()
        await saver.verify_schema()
    assert applied(empty_db_dsn) == list(range(1, HEAD + 1))


def test_check_only_reports_missing_schema_and_changes_nothing(empty_db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(empty_db_dsn) as saver:
        with pytest.raises(SchemaOutdatedError) as info:
            saver.setup(check=True)
        assert info.value.missing == tuple(range(1, HEAD + 1))
        assert info.value.applied == ()
        assert "not set up" in str(info.value)
        with pytest.raises(SchemaOutdatedError):
            saver.verify_schema()
    assert tables(empty_db_dsn) == set()


async def test_async_check_only(empty_db_dsn: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(empty_db_dsn) as saver:
        with pytest.raises(SchemaOutdatedError):
            await saver.verify_schema()
    assert tables(empty_db_dsn) == set()


def test_a_newer_additive_migration_leaves_older_code_working(db_dsn: str) -> None:
    """A newer release's migration marked additive (recorded with the flag) is no reason for this
    code to stop: a worker of the older release can restart during a rolling deploy."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_migrations (version, name, additive)"
            " VALUES (%s, 'from_the_future', true)",
            (HEAD + 1,),
        )
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        saver.verify_schema()
        saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(config("t")) is not None
    assert applied(db_dsn) == [*range(1, HEAD + 1), HEAD + 1]


def test_migrations_record_whether_they_are_additive(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        rows = dict(conn.execute("SELECT version, additive FROM pgsaver_migrations").fetchall())
    assert rows == {m.version: m.additive for m in migrations()}
    assert rows[3] is True  # planner statistics only
    assert rows[1] is False


def test_upgrade_from_a_migrations_table_without_the_additive_flag(empty_db_dsn: str) -> None:
    """The table as releases before the flag created it: read, then upgraded in place."""
    q = queries_for("public")
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE pgsaver_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for mig in migrations()[:2]:
            conn.execute(q.migration(mig))
            conn.execute(
                "INSERT INTO pgsaver_migrations (version, name) VALUES (%s, %s)",
                (mig.version, mig.name),
            )
    with PostgresSaver.from_conn_string(empty_db_dsn) as saver:
        with pytest.raises(SchemaOutdatedError):
            saver.verify_schema()
        saver.setup()
        saver.verify_schema()
    with psycopg.connect(empty_db_dsn) as conn:
        rows = dict(conn.execute("SELECT version, additive FROM pgsaver_migrations").fetchall())
    assert rows == {1: False, 2: False, **{m.version: m.additive for m in migrations()[2:]}}


def test_schema_newer_than_the_code_is_a_clear_error(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsaver_migrations (version, name) VALUES (%s, 'from_the_future')",
            (HEAD + 1,),
        )
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        with pytest.raises(SchemaTooNewError) as info:
            saver.setup()
        assert info.value.known == HEAD
        assert "Upgrade" in str(info.value)
        with pytest.raises(SchemaTooNewError):
            saver.verify_schema()


@pytest.mark.parametrize("autocommit", [True, False])
def test_setup_on_a_connection_configured_any_way(empty_db_dsn: str, autocommit: bool) -> None:
    with psycopg.connect(empty_db_dsn, autocommit=autocommit, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        assert conn.autocommit is autocommit
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        saver.setup()
        saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(config("t")) is not None
    assert tables(empty_db_dsn) == TABLES


def test_setup_inside_the_callers_transaction(empty_db_dsn: str) -> None:
    with psycopg.connect(empty_db_dsn) as conn:
        saver = PostgresSaver(conn)
        with conn.transaction():
            saver.setup()  # the missing-table probe must not abort the caller's transaction
            conn.execute("SELECT 1")
    assert tables(empty_db_dsn) == TABLES


def test_schema_option_keeps_everything_in_that_schema(empty_db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(empty_db_dsn, schema="tenant_a") as saver:
        saver.setup()
        saver.put(config("t"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.schema == "tenant_a"
    assert tables(empty_db_dsn, "tenant_a") == TABLES
    assert tables(empty_db_dsn, "public") == set()
    # nothing relies on search_path: a connection whose search_path points elsewhere works the same
    with psycopg.connect(empty_db_dsn, options="-c search_path=pg_catalog") as conn:
        tup = PostgresSaver(conn, schema="tenant_a").get_tuple(config("t"))
        assert tup is not None
        assert tup.checkpoint["channel_values"] == {"a": 1}
    # a second schema is independent
    with PostgresSaver.from_conn_string(empty_db_dsn, schema="tenant_b") as other:
        other.setup()
        assert other.get_tuple(config("t")) is None


@pytest.mark.parametrize("bad", ["", "1abc", "a-b", 'x"; DROP TABLE y; --', "a" * 64, "Ä"])
def test_invalid_schema_names_are_rejected_before_any_io(bad: str) -> None:
    with pytest.raises(InvalidSchemaNameError) as info:
        PostgresSaver.from_conn_string("host=invalid.invalid", schema=bad)
    assert repr(bad) in str(info.value)


def _lz4_available(conn: psycopg.Connection[Any]) -> bool:
    try:
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE lz4_probe (b bytea COMPRESSION lz4)")
            conn.execute("DROP TABLE lz4_probe")
        return True
    except (psycopg.errors.FeatureNotSupported, psycopg.errors.SyntaxError):
        return False


def test_values_stay_in_the_row_and_use_lz4_where_available(empty_db_dsn: str) -> None:
    saver_dsn_schema = "valuesrow"
    with PostgresSaver.from_conn_string(empty_db_dsn, schema=saver_dsn_schema) as saver:
        saver.setup()
        random_2kb = os.urandom(1500).hex()[:2000]  # incompressible, over the ~2 KB threshold
        version = "00000000000000000000000000000001.0.7081237123811234"
        cp = checkpoint({"big": random_2kb}, {"big": version})
        cfg = saver.put(config("thread-" + "t" * 40), cp, {}, {"big": version})
        saver.put_writes(cfg, [("big", random_2kb)], "task-" + "x" * 36, "path-" + "y" * 30)
        tup = saver.get_tuple(cfg)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["big"] == random_2kb
        assert tup.pending_writes == [("task-" + "x" * 36, "big", random_2kb)]
    with psycopg.connect(empty_db_dsn) as conn:
        rows = conn.execute(
            """
            SELECT c.relname, a.attname, a.attstorage, a.attcompression,
                   (SELECT t.reltuples FROM pg_class t WHERE t.oid = c.reltoastrelid)
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %s AND a.attname IN ('blob', 'checkpoint')
            ORDER BY 1
            """,
            (saver_dsn_schema,),
        ).fetchall()
        assert [(r[0], r[1], r[2]) for r in rows] == [
            ("pgsaver_blobs", "blob", "m"),
            ("pgsaver_cache", "blob", "m"),
            ("pgsaver_checkpoints", "checkpoint", "m"),
            ("pgsaver_elements", "blob", "m"),
            ("pgsaver_writes", "blob", "m"),
        ]
        expected = "l" if _lz4_available(conn) else ""
        assert [r[3] for r in rows] == [expected] * 5
        toasted = conn.execute(
            """
            SELECT array_agg(c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_class t ON t.oid = c.reltoastrelid
            WHERE n.nspname = %s AND pg_relation_size(t.oid) > 0
            """,
            (saver_dsn_schema,),
        ).fetchone()
        assert toasted == (None,)


def test_upgrade_keeps_existing_data(empty_db_dsn: str) -> None:
    """From every earlier migration level with data in it, setup() reaches head and data stays readable."""
    q = queries_for("public")
    for level in range(1, HEAD + 1):
        with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
            conn.execute(
                "DROP TABLE IF EXISTS pgsaver_checkpoints, pgsaver_blobs, pgsaver_writes, pgsaver_migrations"
            )
            conn.execute(q["migrations_bootstrap"])
            conn.execute(q["migrations_bootstrap_additive"])
            for mig in migrations()[:level]:
                conn.execute(q.migration(mig))
                conn.execute(
                    q["migrations_record"],
                    {"version": mig.version, "name": mig.name, "additive": mig.additive},
                )
        with PostgresSaver.from_conn_string(empty_db_dsn) as saver:
            cp = checkpoint({"a": "kept"})
            stored = saver.put(config("t"), cp, {"step": 1}, cp["channel_versions"])
            saver.setup()
            tup = saver.get_tuple(stored)
            assert tup is not None
            assert tup.checkpoint["channel_values"] == {"a": "kept"}
        assert applied(empty_db_dsn) == list(range(1, HEAD + 1))


def _race_worker(dsn: str, barrier: Any, index: int, results: Any) -> None:
    try:
        # half the workers use autocommit connections, half plain ones with a dict row factory
        if index % 2:
            conn = psycopg.connect(dsn, row_factory=dict_row)
        else:
            conn = psycopg.connect(dsn, autocommit=True)
        with conn:
            saver = PostgresSaver(conn)
            barrier.wait(timeout=60)
            saver.setup()
            saver.verify_schema()
        results.put((index, "ok"))
    except BaseException:
        results.put((index, traceback.format_exc()))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("round_", range(3))
def test_sixteen_processes_set_up_an_empty_database_at_once(pg_server: Any, round_: int) -> None:
    from conftest import _create_db, _drop_db

    name = _create_db(pg_server)
    dsn = pg_server.dsn_for(name)
    try:
        ctx = mp.get_context("fork" if sys.version_info < (3, 12) else "spawn")
        n = 16
        barrier = ctx.Barrier(n)
        results = ctx.Queue()
        procs = [
            ctx.Process(target=_race_worker, args=(dsn, barrier, i, results)) for i in range(n)
        ]
        for p in procs:
            p.start()
        outcomes = dict(results.get(timeout=300) for _ in procs)
        for p in procs:
            p.join(timeout=60)
        failures = {i: out for i, out in outcomes.items() if out != "ok"}
        assert not failures, failures
        assert len(outcomes) == n
        assert applied(dsn) == list(range(1, HEAD + 1))
        assert tables(dsn) == TABLES
    finally:
        _drop_db(pg_server, name)
