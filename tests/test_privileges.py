"""Least privilege: the savers run under a role with only SELECT, INSERT, UPDATE and DELETE on their
tables (the GRANTs of the user guide), and a role that lacks one gets an error naming what it lacks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from graphs import approval, delta_chat, two_nodes
from helpers import checkpoint, config
from langgraph.types import Command
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver, PrivilegeError
from langgraph_pg_saver.db.sql import migrations, queries_for

TABLES = ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes")

#: the user guide's GRANTs for the runtime role, for schema public
RUNTIME_GRANTS = (
    "GRANT USAGE ON SCHEMA public TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON pgsaver_checkpoints, pgsaver_blobs, pgsaver_writes,"
    " pgsaver_elements, pgsaver_deleted_threads TO {role}",
    "GRANT SELECT ON pgsaver_migrations TO {role}",
)


@pytest.fixture
def runtime(db_dsn: str) -> Iterator[tuple[str, str]]:
    """A login role with the runtime GRANTs only, and a DSN that connects as it."""
    role = f"lgps_rt_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        for grant in RUNTIME_GRANTS:
            admin.execute(grant.format(role=role))
    params = conninfo_to_dict(db_dsn)
    params["user"] = role
    try:
        yield make_conninfo(**params), role  # type: ignore[arg-type]
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
            )
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def _cfg(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def test_graphs_and_lifecycle_run_under_the_runtime_role(runtime: tuple[str, str]) -> None:
    dsn, role = runtime
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()  # the schema is current: a check, which the runtime role may do
        saver.verify_schema()
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({"foo": "", "bar": []}, _cfg("g"))
        assert graph.get_state(_cfg("g")).values == {"foo": "b", "bar": ["a", "b"]}
        history = list(graph.get_state_history(_cfg("g")))
        assert len(history) == 4
        graph.update_state(history[1].config, {"foo": "forked"})
        chat = delta_chat().compile(checkpointer=saver)
        for _ in range(4):
            chat.invoke({"messages": ["hi"]}, _cfg("c"))
        asked = approval().compile(checkpointer=saver)
        asked.invoke({"request": "r"}, _cfg("a"))
        asked.invoke(Command(resume="yes"), _cfg("a"))
        assert asked.get_state(_cfg("a")).values["answer"] == "yes"
        assert list(saver.list(None, filter={"source": "loop", "step": 0}))
        assert list(saver.list(None, filter={"missing": None}, limit=2))
        saver.copy_thread("c", "c2")
        saver.prune(["c"])
        saver.retention(thread_ids=["c2"], keep_last=1)
        run_id = str(uuid.uuid4())
        saver.put(config("r"), checkpoint({"a": 1}), {"run_id": run_id}, {"a": 1})
        saver.delete_for_runs([run_id])
        saver.delete_thread("g")
        assert saver.get_tuple(_cfg("g")) is None
        assert len(chat.get_state(_cfg("c")).values["messages"]) == 8
        assert saver.healthcheck()["ok"] is True
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT current_user").fetchone()
        assert row == (role,)


async def test_async_graphs_run_under_the_runtime_role(runtime: tuple[str, str]) -> None:
    dsn, _ = runtime
    async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
        await saver.setup()
        chat = delta_chat().compile(checkpointer=saver)
        for _ in range(3):
            await chat.ainvoke({"messages": ["hi"]}, _cfg("c"))
        assert (await chat.aget_state(_cfg("c"))).values["turns"] == 3
        await saver.aprune(["c"])
        await saver.adelete_thread("c")
        assert await saver.aget_tuple(_cfg("c")) is None


@pytest.mark.parametrize(
    ("table", "privilege", "call"),
    [
        ("pgsaver_checkpoints", "DELETE", lambda s, st, cp: s.delete_thread("p")),
        ("pgsaver_writes", "INSERT", lambda s, st, cp: s.put_writes(st, [("a", 2)], "task")),
        ("pgsaver_blobs", "SELECT", lambda s, st, cp: s.get_tuple(st)),
        # every read of values names the parts' table (list_storage="elements" or not)
        ("pgsaver_elements", "SELECT", lambda s, st, cp: s.get_tuple(st)),
        # a delete is recorded (migration 0018), and writes read the records
        ("pgsaver_deleted_threads", "INSERT", lambda s, st, cp: s.delete_thread("p")),
        ("pgsaver_deleted_threads", "SELECT", lambda s, st, cp: s.put_writes(st, [("a", 2)], "t")),
        # a put stored again (a retry) takes the new row: an upsert, which needs UPDATE
        ("pgsaver_checkpoints", "UPDATE", lambda s, st, cp: s.put(config("p"), cp, {}, {"a": 1})),
    ],
)
def test_a_missing_privilege_is_named(
    runtime: tuple[str, str], db_dsn: str, table: str, privilege: str, call: Any
) -> None:
    dsn, role = runtime
    with PostgresSaver.from_conn_string(dsn) as saver:
        cp = checkpoint({"a": 1})
        stored = saver.put(config("p"), cp, {}, {"a": 1})
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(f"REVOKE {privilege} ON {table} FROM {role}")
        saver._driver.pool.check()  # type: ignore[union-attr]
        with pytest.raises(PrivilegeError) as info:
            call(saver, stored, cp)
        assert (table, privilege) in info.value.missing, info.value.missing
        assert f"{privilege} on {table}" in str(info.value)
        assert isinstance(info.value.__cause__, psycopg.errors.InsufficientPrivilege)


def test_migration_0015_gives_the_parts_to_whoever_has_the_values(db_dsn: str) -> None:
    """A runtime role granted the tables by name before migration 0015 (as the user guide said
    then) keeps working after it: the migration grants pgsaver_elements to every role that has
    pgsaver_blobs, and lists stored as their elements then work under that role, lifecycle
    included."""
    role = f"lgps_old_{uuid.uuid4().hex[:10]}"
    q = queries_for("public")
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        admin.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON pgsaver_checkpoints, pgsaver_blobs,"
            f" pgsaver_writes TO {role}"
        )
        admin.execute(f"GRANT SELECT ON pgsaver_migrations TO {role}")
        admin.execute(f"REVOKE ALL ON pgsaver_elements, pgsaver_deleted_threads FROM {role}")
        assert admin.execute(
            "SELECT has_table_privilege(%s, 'pgsaver_elements', 'SELECT')", (role,)
        ).fetchone() == (False,)
        # migration 0015 again, as setup() runs it on a schema at 0014
        admin.execute(q.migration(next(m for m in migrations() if m.version == 15)))
        granted = admin.execute(
            "SELECT array_agg(p ORDER BY p) FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE',"
            " 'DELETE']) AS p WHERE has_table_privilege(%s, 'pgsaver_elements', p)",
            (role,),
        ).fetchone()
        assert granted == (["DELETE", "INSERT", "SELECT", "UPDATE"],)
        # and migration 0018 (the record of deletes) the same way
        admin.execute(q.migration(next(m for m in migrations() if m.version == 18)))
        assert admin.execute(
            "SELECT has_table_privilege(%s, 'pgsaver_deleted_threads', 'INSERT')", (role,)
        ).fetchone() == (True,)
    params = conninfo_to_dict(db_dsn)
    params["user"] = role
    try:
        dsn = make_conninfo(**params)  # type: ignore[arg-type]
        with PostgresSaver.from_conn_string(dsn, list_storage="elements") as saver:
            chat = delta_chat().compile(checkpointer=saver)
            graph = two_nodes().compile(checkpointer=saver)
            for i in range(3):
                graph.invoke({"foo": "", "bar": [f"x{i}"]}, _cfg("e"))
                chat.invoke({"messages": ["hi"]}, _cfg("c"))
            want = graph.get_state(_cfg("e")).values
            saver.copy_thread("e", "e2")
            saver.retention(thread_ids=["e", "e2"], keep_last=1)
            assert graph.get_state(_cfg("e2")).values == want
            saver.delete_thread("e")
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
            )
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_the_readme_roles_migrate_then_run(empty_db_dsn: str) -> None:
    """The user guide's two roles, from an empty database: the migration role creates the schema
    with setup(); default privileges give the runtime role exactly its four privileges."""
    suffix = uuid.uuid4().hex[:8]
    migrate, app = f"lgps_migrate_{suffix}", f"lgps_app_{suffix}"
    statements = [
        f"CREATE ROLE {migrate} LOGIN",
        f"CREATE ROLE {app} LOGIN",
        f"GRANT USAGE, CREATE ON SCHEMA public TO {migrate}",
        f"GRANT USAGE ON SCHEMA public TO {app}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {migrate} IN SCHEMA public"
        f" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {app}",
    ]
    with psycopg.connect(empty_db_dsn, autocommit=True) as admin:
        for stmt in statements:
            admin.execute(stmt)

    def as_role(role: str) -> str:
        params = conninfo_to_dict(empty_db_dsn)
        params["user"] = role
        return make_conninfo(**params)  # type: ignore[arg-type]

    try:
        with (
            PostgresSaver.from_conn_string(as_role(app)) as saver,
            pytest.raises(PrivilegeError, match="setup\\(check=True\\) in the application"),
        ):
            saver.setup()  # the runtime role cannot create the tables
        with PostgresSaver.from_conn_string(as_role(migrate)) as saver:
            saver.setup()
        with PostgresSaver.from_conn_string(as_role(app)) as saver:
            saver.setup(check=True)
            graph = two_nodes().compile(checkpointer=saver)
            graph.invoke({"foo": "", "bar": []}, _cfg("t"))
            assert graph.get_state(_cfg("t")).values["bar"] == ["a", "b"]
            saver.delete_thread("t")
        with psycopg.connect(empty_db_dsn) as admin:
            rows = admin.execute(
                "SELECT table_name, privilege_type FROM information_schema.role_table_grants"
                " WHERE grantee = %s ORDER BY 1, 2",
                (app,),
            ).fetchall()
        assert {priv for table, priv in rows if table in TABLES} == {
            "SELECT",
            "INSERT",
            "UPDATE",
            "DELETE",
        }
    finally:
        with psycopg.connect(empty_db_dsn, autocommit=True) as admin:
            for role in (app, migrate):
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    (role,),
                )
            admin.execute(f"DROP OWNED BY {app}, {migrate}")
            admin.execute(f"DROP ROLE {app}")
            admin.execute(f"DROP ROLE {migrate}")


def test_runtime_role_unprepared_without_execute_falls_back_to_the_statements(
    runtime: tuple[str, str], db_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind a pooler put calls pgsaver_put: PUBLIC's EXECUTE suffices. A DBA who revoked it
    loses only the optimisation: the saver says so once and sends the statements; the privilege
    report names the function."""
    dsn, _role = runtime
    signature = (
        "pgsaver_put(text, text, text, text, text, text, bytea, jsonb, jsonb, bytea, text[],"
        " text[], text[], bytea[], text)"
    )
    with PostgresSaver.from_conn_string(dsn, prepare_threshold=None) as saver:
        saver.put(config("f"), checkpoint({"a": 1}), {}, {"a": 1})
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(f"REVOKE EXECUTE ON FUNCTION {signature} FROM PUBLIC")
        try:
            with caplog.at_level("WARNING", logger="langgraph_pg_saver"):
                for i in range(3):
                    v = 2 + i
                    saver.put(config("f"), checkpoint({"a": v}, {"a": v}), {}, {"a": v})
            said = [r for r in caplog.records if "server-side functions" in r.getMessage()]
            assert len(said) == 1, said  # once, then the statements without asking again
            assert saver.get_tuple(config("f")).checkpoint["channel_values"] == {"a": 4}  # type: ignore[union-attr]
            with psycopg.connect(dsn) as conn:
                missing = conn.execute(
                    saver._q["missing_privileges"],  # type: ignore[attr-defined]
                    {"schema": "public"},
                ).fetchall()
            assert ("function pgsaver_put", "EXECUTE") in missing, missing
        finally:
            with psycopg.connect(db_dsn, autocommit=True) as admin:
                admin.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO PUBLIC")


def test_a_schema_without_the_functions_falls_back_to_the_statements(db_dsn: str) -> None:
    """A schema an older release migrated (no 0006 and 0007): behind a pooler, put and get_tuple
    send their statements."""
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        for name in ("pgsaver_put", "pgsaver_get_tuple", "pgsaver_put_status"):
            for (signature,) in admin.execute(
                "SELECT oid::regprocedure::text FROM pg_proc WHERE proname = %s", (name,)
            ).fetchall():
                admin.execute(f"DROP FUNCTION {signature}")
    with PostgresSaver.from_conn_string(db_dsn, prepare_threshold=None) as saver:
        stored = saver.put(config("old"), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(stored).checkpoint["channel_values"] == {"a": 1}  # type: ignore[union-attr]
        assert saver.get_tuple(config("old")) is not None


@pytest.mark.parametrize("prepare", [0, None])
def test_without_execute_on_the_delete_check_writes_go_on_and_late_ones_are_dropped(
    runtime: tuple[str, str], db_dsn: str, prepare: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """A DBA who revoked EXECUTE on migration 0018's pgsaver_check_deleted: put_writes sends the
    statements that call no function (the saver says so once), writes go on, and a late write
    of a deleted thread is dropped (no error there, nothing stored); the privilege report names
    the function."""
    dsn, _role = runtime
    signature = "pgsaver_check_deleted(text, text, text)"
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        admin.execute(f"REVOKE EXECUTE ON FUNCTION {signature} FROM PUBLIC")
    try:
        with (
            PostgresSaver.from_conn_string(dsn, prepare_threshold=prepare) as saver,
            caplog.at_level("WARNING", logger="langgraph_pg_saver"),
        ):
            stored = saver.put(config("w"), checkpoint({"a": 1}), {}, {"a": 1})
            for i in range(3):
                saver.put_writes(stored, [("a", i)], f"task-{i}")
            got = saver.get_tuple(stored)
            assert got is not None
            assert [w[2] for w in got.pending_writes or []] == [0, 1, 2]
            said = [r for r in caplog.records if "server-side functions" in r.getMessage()]
            assert len(said) == 1, said
            saver.delete_thread("w")
            saver.put_writes(stored, [("a", "late")], "late-task")
            with psycopg.connect(db_dsn) as conn:
                left = conn.execute(
                    "SELECT count(*) FROM pgsaver_writes WHERE thread_id = 'w'"
                ).fetchone()
                assert left == (0,)
            missing = conn_missing(dsn, saver)
            assert ("function pgsaver_check_deleted", "EXECUTE") in missing, missing
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO PUBLIC")


def conn_missing(dsn: str, saver: PostgresSaver) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(saver._q["missing_privileges"], {"schema": "public"}).fetchall()
    return [(str(a), str(b)) for a, b in rows]
