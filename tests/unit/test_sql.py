"""The SQL files: every named query is used, every used name exists, migrations are well formed,
schema names are validated, and the wheel carries the SQL."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from langgraph_pg_saver import InvalidSchemaNameError
from langgraph_pg_saver.db import sql as _sql

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langgraph_pg_saver"


def _used_names() -> set[str]:
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r'q(?:ueries)?\["(\w+)"\]', text))
        used |= set(re.findall(r'self\._q\["(\w+)"\]', text))
        used |= set(re.findall(r'render\("(\w+)"', text))
    return used


def test_every_named_query_is_used_and_every_used_name_exists() -> None:
    raw = _sql.raw_queries()
    # a Citus form stands in for its namesake (Queries(citus=True)), which must exist; so does
    # a form for a schema without migration 0015 (Queries(lists=False))
    for suffix in (_sql.CITUS_SUFFIX, _sql.NOLISTS_SUFFIX, _sql.NODELETED_SUFFIX):
        forms = {n for n in raw if n.endswith(suffix)}
        assert {n.removesuffix(suffix) for n in forms} <= set(raw) - forms
        raw = {n: t for n, t in raw.items() if n not in forms}
    named = {n for n in raw if not n.startswith("_")}
    # read_tuples(_per_ns) and get_tuple(_id) go through Queries.read_tuples and Queries.get_tuple
    used = _used_names() | {"read_tuples", "read_tuples_per_ns", "get_tuple", "get_tuple_id"}
    assert used - named == set(), f"used but not defined: {used - named}"
    assert named - used == set(), f"defined but unused: {named - used}"
    # one set of WHERE fragments
    fragments = {n for n in raw if re.match(r"_wh?_", n)}
    assert fragments == {f"_w_{p}" for p in _sql.WHERE_FRAGMENTS}


def test_reads_hide_their_keys_from_the_planner_and_get_tuple_does_not() -> None:
    q = _sql.Queries("public")
    for predicates in (("thread",), ("thread", "ns"), ("thread", "ns", "id"), ("thread", "before")):
        text = q.read_tuples(predicates).decode()
        for p in predicates:
            param = {"thread": "thread_id", "ns": "checkpoint_ns", "id": "checkpoint_id"}.get(p, p)
            assert f"(SELECT %({param})s::text)" in text, (predicates, p)
    got = q.get_tuple(("thread", "ns", "id")).decode()
    assert "c.thread_id = %(thread_id)s" in got
    assert "(SELECT %(thread_id)s::text)" not in got


def test_rendered_queries_have_no_placeholders_left() -> None:
    q = _sql.Queries("tenant_1")
    for name in _sql.raw_queries():
        if not name.startswith("_") and name in q._rendered:
            text = q[name].decode()
            assert "{" not in text.replace("'{}'", ""), name
    sel = q.read_tuples(("thread", "ns", "before", "filter")).decode()
    assert '"tenant_1".pgsaver_checkpoints' in sel
    assert "{where}" not in sel
    assert "WITH RECURSIVE" not in sel
    assert q.read_tuples(()).decode().count("WHERE true") == 1
    per_ns = q.read_tuples(("thread", "filter")).decode()
    assert "WITH RECURSIVE" in per_ns
    assert "{" not in per_ns


def test_migrations_are_numbered_and_idempotent_in_form() -> None:
    migs = _sql.migrations()
    assert [m.version for m in migs] == list(range(1, len(migs) + 1))
    for m in migs:
        for stmt in re.findall(
            r"^\s*CREATE\s+(?:TABLE|INDEX|UNIQUE INDEX|SCHEMA)\b[^\n]*", m.text, re.M | re.I
        ):
            assert "IF NOT EXISTS" in stmt.upper(), f"{m.version}: {stmt.strip()}"


@pytest.mark.parametrize("name", ["public", "tenant_a", "_x", "A1", "a" * 63])
def test_valid_schema_names(name: str) -> None:
    assert _sql.validate_schema(name) == name


@pytest.mark.parametrize("name", ["", "1a", "a b", "a;b", 'a"b', "a" * 64, None, 5])
def test_invalid_schema_names(name: object) -> None:
    with pytest.raises(InvalidSchemaNameError):
        _sql.validate_schema(name)  # type: ignore[arg-type]


@pytest.mark.timeout(300)
def test_wheel_contains_the_sql(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    wheel = next(tmp_path.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "langgraph_pg_saver/sql/queries.sql" in names
    for mig in (ROOT / "sql" / "migrations").glob("*.sql"):
        assert f"langgraph_pg_saver/sql/migrations/{mig.name}" in names
    assert "langgraph_pg_saver/py.typed" in names


def test_additive_migrations_are_marked_in_their_header() -> None:
    flags = {m.version: m.additive for m in _sql.migrations()}
    assert flags[1] is False
    assert flags[2] is False
    # every migration since 0003 only adds (a release's older workers run on against it): one
    # written without its "-- additive" line would stop them with SchemaTooNewError
    assert all(flags[v] for v in flags if v >= 3), flags


def test_newer_migrations_are_refused_unless_all_additive() -> None:
    from langgraph_pg_saver import SchemaTooNewError
    from langgraph_pg_saver.db import migrate as _migrate

    head = _migrate.head()
    known = dict.fromkeys(range(1, head + 1), False)
    assert _migrate.pending("s", {**known, head + 1: True, head + 2: True}) == ()
    with pytest.raises(SchemaTooNewError):
        _migrate.pending("s", {**known, head + 1: True, head + 2: False})
    # an older known migration still missing is applied even next to newer additive ones
    missing = {v: a for v, a in known.items() if v != head} | {head + 1: True}
    assert [m.version for m in _migrate.pending("s", missing)] == [head]


def test_unknown_slots_and_placeholders_are_refused_when_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queries = _sql.Queries("public")  # the real ones, loaded before the typo is slipped in
    raw = dict(_sql.raw_queries())
    monkeypatch.setattr(_sql, "raw_queries", lambda: {**raw, "typo": "SELECT {wher}"})
    with pytest.raises(ValueError, match=r"typo has unknown slots \['wher'\]"):
        _sql.Queries("public")
    mig = _sql.Migration(99, "x", "CREATE TABLE {schema}.t (a int); -- {oops}")
    with pytest.raises(KeyError, match="oops"):
        queries.migration(mig)


def test_slots_must_be_given_exactly() -> None:
    q = _sql.Queries("public")
    with pytest.raises(KeyError, match="slots"):
        q.render("put", blob_rows=1, where=())
    with pytest.raises(KeyError, match="slots"):
        q["put"]
    with pytest.raises(ValueError, match="count of rows"):
        q.render("put", blob_rows=-1, claim=False, status=None, parts=False)
    with pytest.raises(ValueError, match="claim takes a bool"):
        q.render("put", blob_rows=1, claim=1, status=None, parts=False)


def test_the_server_side_functions_mirror_the_statements() -> None:
    """Migrations 0006 and 0016 (which replaced 0015's, 0012's and 0007's function) hold
    copies of put's lock and of get_tuple's queries: a change to those in queries.sql needs a
    migration replacing the functions, which this test asks for."""
    import re
    from pathlib import Path

    from langgraph_pg_saver.db.sql import queries_for

    migrations = Path(__file__).resolve().parents[2] / "sql" / "migrations"
    q = queries_for("public")
    lock_class = _sql.raw_queries()["_lock_class"].strip().splitlines()[-1]
    put_fn = (migrations / "0006_put_function.sql").read_text()
    assert f"pg_advisory_xact_lock_shared({lock_class}, hashtext(p_thread))" in put_fn

    def squash(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()

    get_fn = squash((migrations / "0016_list_assembly.sql").read_text())
    for name in ("get_tuple", "get_tuple_id"):
        body = q[name].decode().replace('"public".', "{schema}.")
        for param, arg in (
            ("thread_id", "p_thread"),
            ("checkpoint_ns", "p_ns"),
            ("checkpoint_id", "p_id"),
        ):
            body = body.replace(f"%({param})s", arg)
        assert squash(body) in get_fn, f"{name} changed: 0016's copy of it needs a new migration"


@pytest.mark.parametrize("citus", [False, True])
def test_a_schema_before_0018_gets_statements_that_never_name_its_objects(citus: bool) -> None:
    """Queries(deleted=False), alone or with Citus's forms (x__nodeleted wins over x__citus):
    the statements the savers send on such a schema name neither the record of deletes nor the
    functions reading it; with deleted=True they do."""
    old = _sql.Queries("public", citus=citus, deleted=False)
    new = _sql.Queries("public", citus=citus)
    names = {
        "put_writes": {"write_rows": 2},
        "put_writes_new": {"write_rows": 0},
        "put_writes_plain": {"write_rows": 1},
        "put_writes_new_plain": {"write_rows": 0},
        "put_orphan": {"blob_rows": 1, "claim": False, "status": None, "parts": False},
        "delete_thread": {},
        "delete_threads": {},
    }
    for name, slots in names.items():
        before = old.render(name, **slots) if slots else old[name]
        after = new.render(name, **slots) if slots else new[name]
        assert b"pgsaver_deleted" not in before, name
        assert b"pgsaver_check_deleted" not in before, name
        assert b"pgsaver_deleted" in after or b"pgsaver_check_deleted" in after, name
