"""The ``langgraph-pg-saver`` command line, run as a user runs it: a subprocess against a real
database (and a real pseudo-terminal for the prompt and the progress bar)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import citus
import psycopg
import pytest
from conftest import ON_CITUS, _create_db, _drop_db
from graphs import approval, delta_chat, two_nodes, with_subgraph
from pgserver import Server
from psycopg.conninfo import conninfo_to_dict

from langgraph_pg_saver import KeyringSerializer, PostgresSaver, PostgresStore
from langgraph_pg_saver.db import migrate as _migrate

CLI = [sys.executable, "-m", "langgraph_pg_saver"]
HEAD = _migrate.head()
ALL_MIGRATIONS = list(range(1, HEAD + 1))


def cli(
    *args: str, dsn: str | None = None, env: dict[str, str] | None = None, check: int | None = 0
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("LANGGRAPH_PG_DSN", None)
    if dsn is not None:
        full_env["LANGGRAPH_PG_DSN"] = dsn
    done = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if check is not None:
        assert done.returncode == check, (args, done.returncode, done.stdout, done.stderr)
    return done


def cli_json(*args: str, dsn: str, **kw: Any) -> Any:
    return json.loads(cli(*args, "--json", dsn=dsn, **kw).stdout)


def fill(dsn: str, threads: int = 12, turns: int = 3) -> None:
    """Graph threads as an app leaves them: plain ones, a DeltaChannel one, an interrupted one."""
    with PostgresSaver.from_conn_string(dsn, max_size=2) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        for i in range(threads):
            cfg = {"configurable": {"thread_id": f"t-{i:03d}", "team": f"team-{i % 3}"}}
            for _ in range(turns):
                graph.invoke({"foo": "x", "bar": ["y" * 100]}, cfg)
        chat = delta_chat().compile(checkpointer=saver)
        for _ in range(7):
            chat.invoke({}, {"configurable": {"thread_id": "delta"}})
        approval().compile(checkpointer=saver).invoke(
            {"request": "r"}, {"configurable": {"thread_id": "waiting"}}
        )


def stored(dsn: str) -> dict[str, Any]:
    """What is stored, by key (ids differ between databases filled separately: compare steps)."""
    with psycopg.connect(dsn) as conn:
        return {
            "checkpoints": sorted(
                conn.execute(
                    "SELECT thread_id, checkpoint_ns, checkpoint_id FROM pgsaver_checkpoints"
                ).fetchall()
            ),
            "writes": conn.execute("SELECT count(*) FROM pgsaver_writes").fetchone(),
            "blobs": conn.execute("SELECT count(*) FROM pgsaver_blobs").fetchone(),
        }


@pytest.fixture
def filled(db_dsn: str) -> str:
    fill(db_dsn)
    return db_dsn


@pytest.fixture
def twin(request: pytest.FixtureRequest, filled: str) -> Iterator[str]:
    """A second database holding exactly what ``filled`` holds (a template copy; on Citus a
    distributed database the rows are copied into)."""
    if ON_CITUS:
        with citus.database(request.getfixturevalue("citus_cluster")) as dsn:
            with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
                saver.setup()
            citus.copy_rows(filled, dsn)
            yield dsn
        return
    pg_server: Server = request.getfixturevalue("pg_server")
    source = str(conninfo_to_dict(filled)["dbname"])
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (source,)
        )
    name = _create_db(pg_server, source)
    try:
        yield pg_server.dsn_for(name)
    finally:
        _drop_db(pg_server, name)


# --------------------------------------------------------------------------- setup


def test_setup_sql_prints_the_ddl_without_connecting_and_it_builds_a_current_schema(
    empty_db_dsn: str,
) -> None:
    nowhere = "postgresql://nobody@127.0.0.1:1/none"
    script = cli("--schema", "tenant_a", "setup", "--sql", dsn=nowhere).stdout
    assert 'CREATE TABLE IF NOT EXISTS "tenant_a".pgsaver_checkpoints' in script
    assert script.startswith("-- langgraph-pg-saver schema 'tenant_a'")
    check = cli("--schema", "tenant_a", "setup", "--check", dsn=empty_db_dsn, check=1)
    assert f"missing migrations {ALL_MIGRATIONS}" in check.stderr
    assert check.stderr.count("\n") == 1  # one line, no traceback
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        conn.execute(script)
        conn.execute(script)  # a second run changes nothing
    cli("--schema", "tenant_a", "setup", "--check", dsn=empty_db_dsn)
    later = cli("setup", "--sql", "--from", "3", dsn=nowhere).stdout
    assert "0004_single_writer" in later
    assert "0001_initial" not in later
    assert cli("setup", "--sql", "--from", str(HEAD + 1), check=2).stderr.count("--from") >= 1
    assert "--schema" in cli("--schema", "bad-name", "setup", "--sql", check=2).stderr
    cli("setup", "--sql", "--check", check=2)
    cli("setup", "--from", "2", dsn=empty_db_dsn, check=2)


def test_setup_applies_migrations_and_check_then_passes(empty_db_dsn: str) -> None:
    cli("setup", "--check", dsn=empty_db_dsn, check=1)
    missing = json.loads(cli("setup", "--check", "--json", dsn=empty_db_dsn, check=1).stdout)
    assert missing == {
        "schema": "public",
        "current": False,
        "applied": [],
        "missing": ALL_MIGRATIONS,
    }
    assert f"is set up (migration {HEAD})" in cli("setup", dsn=empty_db_dsn).stdout
    assert "is current" in cli("setup", "--check", dsn=empty_db_dsn).stdout
    assert cli_json("setup", "--check", dsn=empty_db_dsn)["current"] is True


# --------------------------------------------------------------------------- doctor


def test_doctor_direct_and_through_pgbouncer(filled: str, bouncer: Any, empty_db_dsn: str) -> None:
    report = cli_json("doctor", dsn=filled)
    checks = {c["check"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert set(checks) == {
        "connection",
        "server",
        "schema",
        "pooler",
        "privileges",
        "compression",
        "jit",
        "autovacuum",
        "bloat",
        "deleted threads",
        *(["citus"] if ON_CITUS else []),  # how the schema is distributed
    }
    assert "direct connection" in checks["pooler"]["detail"]
    text = cli("doctor", dsn=filled).stdout
    assert re.search(r"^OK +connection: .* round trip [0-9.]+ ms$", text, re.MULTILINE)
    pooled = cli_json("doctor", dsn=bouncer.dsn(filled))
    pooler = next(c for c in pooled["checks"] if c["check"] == "pooler")
    assert "pooling proxy" in pooler["detail"]
    assert pooled["ok"] is True
    # an empty database: FAIL, exit 1, with the fix
    bad = cli("doctor", dsn=empty_db_dsn, check=1)
    assert "FAIL schema: schema 'public' is not set up" in bad.stdout
    assert "fix: langgraph-pg-saver --schema public setup" in bad.stdout
    down = cli("doctor", "--json", dsn="postgresql://postgres@127.0.0.1:1/x", check=1)
    assert json.loads(down.stdout)["checks"][0]["status"] == "FAIL"
    nowhere = cli_json("--schema", "nowhere", "doctor", dsn=filled, check=1)
    assert {"check": "schema", "status": "FAIL"}.items() <= nowhere["checks"][-1].items()
    # a role without privileges on our tables: a FAIL naming what it lacks, not a crash
    with psycopg.connect(filled, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS lgps_cli_nobody")
        conn.execute("CREATE ROLE lgps_cli_nobody LOGIN")
    try:
        weak = cli_json("doctor", dsn=filled + " user=lgps_cli_nobody", check=1)
        failed = {c["check"]: c for c in weak["checks"] if c["status"] == "FAIL"}
        assert "SELECT on pgsaver_migrations" in failed["privileges"]["detail"]
        assert "permission denied" in failed["schema"]["detail"]
        hist = cli("history", "t-001", dsn=filled + " user=lgps_cli_nobody", check=1)
        assert "checking the schema needs SELECT on pgsaver_migrations" in hist.stderr
    finally:
        with psycopg.connect(filled, autocommit=True) as conn:
            conn.execute("DROP OWNED BY lgps_cli_nobody")
            conn.execute("DROP ROLE lgps_cli_nobody")


def test_without_a_dsn_the_cli_names_the_database_libpq_reached(filled: str) -> None:
    params = conninfo_to_dict(filled)
    env = {
        "PGHOST": str(params.get("host", "")),
        "PGPORT": str(params.get("port", "5432")),
        "PGDATABASE": str(params["dbname"]),
        "PGUSER": str(params.get("user", "postgres")),
    }
    done = cli("status", "--json", env=env)
    assert json.loads(done.stdout)["checkpoints"] > 0
    where = (
        f"{env['PGHOST']}:{env['PGPORT']}" if not env["PGHOST"].startswith("/") else env["PGHOST"]
    )
    assert done.stderr == (
        f"no --dsn or $LANGGRAPH_PG_DSN: using {where} database {env['PGDATABASE']!r} as "
        f"{env['PGUSER']!r} (libpq's defaults and PG* variables)\n"
    )
    assert cli("status", "--json", dsn=filled).stderr == ""  # a DSN given: nothing said


def test_doctor_says_when_autovacuum_is_off_and_what_a_vacuum_returns(filled: str) -> None:
    """autovacuum turned off for a table, and a prune's worth of dead rows in it: doctor warns
    of both (what stays until a VACUUM, what only VACUUM FULL or pg_repack returns to the disk),
    and says OK again once autovacuum is back and the table vacuumed."""
    with psycopg.connect(filled, autocommit=True) as conn:
        conn.execute("ALTER TABLE pgsaver_writes SET (autovacuum_enabled = false)")
        conn.execute(
            "INSERT INTO pgsaver_writes (thread_id, checkpoint_id, task_id, idx, channel, type)"
            " SELECT 'dead', 'c', 't', g, 'x', 'null' FROM generate_series(1, 12000) AS g"
        )
        conn.execute("DELETE FROM pgsaver_writes WHERE thread_id = 'dead'")
    try:
        deadline = time.monotonic() + 30  # the statistics of dead rows reach doctor within ~10 s
        while True:
            checks = {c["check"]: c for c in cli_json("doctor", dsn=filled)["checks"]}
            if checks["bloat"]["status"] == "WARN" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert checks["autovacuum"]["status"] == "WARN", checks["autovacuum"]
        assert "turned off for pgsaver_writes" in checks["autovacuum"]["detail"]
        assert "RESET (autovacuum_enabled)" in checks["autovacuum"]["fix"]
        assert checks["bloat"]["status"] == "WARN", checks["bloat"]
        # (a read of those pages may prune some of them before doctor counts)
        assert re.search(r"pgsaver_writes: [\d,]+ dead", checks["bloat"]["detail"])
        assert "VACUUM FULL" in checks["bloat"]["detail"]
    finally:
        with psycopg.connect(filled, autocommit=True) as conn:
            conn.execute("ALTER TABLE pgsaver_writes RESET (autovacuum_enabled)")
            conn.execute("VACUUM pgsaver_writes")
    assert {c["check"]: c for c in cli_json("doctor", dsn=filled)["checks"]}["autovacuum"][
        "status"
    ] == "OK"


def test_doctor_warns_when_nothing_forgets_the_records_of_deleted_threads(filled: str) -> None:
    """Records of deleted threads older than 30 days say no retention job runs: doctor warns;
    prune (retention) with --keep-deleted forgets them, and doctor is content again."""
    cli("delete-thread", "t-001", "--yes", dsn=filled)
    cli("delete-thread", "t-002", "--yes", dsn=filled)

    def check() -> dict[str, Any]:
        checks = {c["check"]: c for c in cli_json("doctor", dsn=filled)["checks"]}
        return dict(checks["deleted threads"])

    fresh = check()
    assert fresh["status"] == "OK", fresh
    assert "the oldest from" in fresh["detail"]
    with psycopg.connect(filled, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_deleted_threads SET deleted_at = now() - interval '40 days'"
            " WHERE thread_id = 't-001'"
        )
    stale = check()
    assert stale["status"] == "WARN", stale
    assert "no retention job forgets them" in stale["detail"]
    assert "--keep-deleted" in stale["fix"]
    # --keep-deleted 30d: the record 40 days old goes, the fresh one stays
    cli("prune", "--idle-for", "3650d", "--keep-deleted", "30d", "--yes", dsn=filled)
    with psycopg.connect(filled) as conn:
        left = conn.execute("SELECT thread_id FROM pgsaver_deleted_threads").fetchall()
    assert left == [("t-002",)]
    assert check()["status"] == "OK"
    cli("prune", "--idle-for", "3650d", "--keep-deleted", "0s", "--yes", dsn=filled)
    empty = check()
    assert (empty["status"], empty["detail"]) == ("OK", "no delete recorded")
    # with --strategy delete it would do nothing: refused
    bad = cli(
        "prune",
        "--strategy",
        "delete",
        "--thread",
        "t-003",
        "--keep-deleted",
        "1d",
        "--yes",
        dsn=filled,
        check=2,
    )
    assert "--keep-deleted goes with --keep-last or --idle-for" in bad.stderr


# --------------------------------------------------------------------------- status, threads


def test_status_and_threads_report_what_is_stored(filled: str) -> None:
    with PostgresStore.from_conn_string(filled) as store:
        store.setup()
        for i in range(3):  # before any ANALYZE: the table's estimate still says nothing
            store.put(("status",), f"k{i}", {"i": i})
    data = cli_json("status", "--top", "3", dsn=filled)
    with psycopg.connect(filled) as conn:
        counts = conn.execute(
            "SELECT (SELECT count(DISTINCT thread_id) FROM pgsaver_checkpoints), "
            "(SELECT count(*) FROM pgsaver_checkpoints), (SELECT count(*) FROM pgsaver_writes), "
            "(SELECT count(*) FROM pgsaver_blobs)"
        ).fetchone()
        items = conn.execute("SELECT count(*) FROM pgsaver_store").fetchone()
    assert (data["threads"], data["checkpoints"], data["writes"], data["blobs"]) == counts
    rows = {t["table"]: t["rows"] for t in data["tables"]}
    # numbers as JSON numbers (on Citus too, where they are the shards' sums)
    for table in data["tables"]:
        assert all(type(table[k]) is int for k in ("rows", "bytes", "dead_rows")), table
    assert rows["pgsaver_store"] == items[0] >= 3  # type: ignore[index]
    assert rows["pgsaver_checkpoints"] == counts[1]  # type: ignore[index]
    assert data["migration"] == data["current_migration"] == HEAD
    assert data["top_by_checkpoints"][0]["checkpoints"] == 21  # the delta thread
    assert data["top_by_checkpoints"][0]["thread_id"] == "delta"
    assert len(data["top_by_bytes"]) == 3
    threads = cli_json("threads", "--filter", "team=team-1", "--limit", "100", dsn=filled)
    assert sorted(t["thread_id"] for t in threads) == [f"t-{i:03d}" for i in range(1, 12, 3)]
    assert all(t["checkpoints"] == 12 and t["bytes"] > 0 for t in threads)
    assert cli_json("threads", "--idle-for", "1d", dsn=filled) == []
    assert len(cli_json("threads", "--idle-for", "0s", "--limit", "5", dsn=filled)) == 5
    assert "t-000" in cli("threads", dsn=filled).stdout
    bad = cli("threads", "--idle-for", "soon", dsn=filled, check=2)
    assert "not a duration like 30d" in bad.stderr
    twice = cli("threads", "--filter", "team=a", "--filter", "team=b", dsn=filled, check=2)
    assert "key 'team' is given twice" in twice.stderr
    assert len(cli_json("threads", "--limit", "0", dsn=filled)) == 14
    cut = cli("threads", "--limit", "3", dsn=filled)
    assert "more threads match" in cut.stderr
    cli("threads", "--limit", "-1", dsn=filled, check=2)


def _all_bytes(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT sum(pg_column_size(c.*)) FROM pgsaver_checkpoints AS c)"
            " + (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM pgsaver_writes AS w)"
            " + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM pgsaver_blobs AS b)"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_status_shows_growth_per_day_and_sizes_by_a_metadata_key(filled: str) -> None:
    """status's growth: every checkpoint in the hour or day it was made, and every byte of the
    three tables once, about (a checkpoint's row, the writes after it, the channel values it
    stored anew); --by KEY: threads, checkpoints and bytes by a metadata key, adding up to the totals."""
    with psycopg.connect(filled, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgsaver_checkpoints SET created_at = now() - interval '3 days'"
            " WHERE thread_id = 't-001'"
        )
    total = _all_bytes(filled)
    data = cli_json("status", "--by", "team", dsn=filled)
    growth = data["growth"]
    assert growth["unit"] == "day"
    rows = growth["rows"]
    assert len(rows) == 15  # 14 days back to today, each present
    assert sum(r["checkpoints"] for r in rows) == data["checkpoints"]
    # (a row's size as a join reads it, not always as a scan of its table does: within 2%)
    assert sum(r["bytes"] for r in rows) == pytest.approx(total, rel=0.02)
    days = [datetime.fromisoformat(r["at"]) for r in rows]
    assert days == sorted(days)
    back = [r for r, d in zip(rows, days, strict=True) if (days[-1] - d).days in (3, 4)]
    assert sum(r["checkpoints"] for r in back) == 12  # t-001's, three days ago
    by = data["by"]
    assert by["key"] == "team"
    groups = {r["value"]: r for r in by["rows"]}
    assert groups["team-1"]["threads"] == 4
    assert groups["team-1"]["checkpoints"] == 48
    assert sum(r["threads"] for r in by["rows"]) == data["threads"]
    assert sum(r["checkpoints"] for r in by["rows"]) == data["checkpoints"]
    assert sum(r["bytes"] for r in by["rows"]) == pytest.approx(total, rel=0.02)
    hourly = cli_json("status", "--window", "1d", dsn=filled)["growth"]
    assert hourly["unit"] == "hour"
    assert len(hourly["rows"]) in (24, 25, 26)  # 25, but on a night the clocks change
    text = cli("status", "--by", "team", dsn=filled).stdout
    assert "written per day, last 15 days" in text
    assert "█" in text
    assert "by team" in text
    assert (
        "growth" not in cli_json("status", "--window", "0s", dsn=filled)
        or not cli_json("status", "--window", "0s", dsn=filled)["growth"]["rows"]
    )


def test_status_prometheus_is_the_text_format_with_the_status_figures(filled: str) -> None:
    """``status --prometheus`` parses as Prometheus's text format (the client library's own
    parser), every metric a gauge labelled with the schema, with status --json's figures, and
    the recent growth and the longest-idle thread read from the tables."""
    from prometheus_client.parser import text_string_to_metric_families

    data = cli_json("status", dsn=filled)
    text = cli("status", "--prometheus", dsn=filled).stdout
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(f.type == "gauge" for f in families.values())

    def value(name: str, **labels: str) -> float:
        samples = families["langgraph_pg_saver_" + name].samples
        found = [s.value for s in samples if s.labels == {"schema": "public", **labels}]
        assert len(found) == 1, (name, samples)
        return found[0]

    for key in ("threads", "checkpoints", "writes", "blobs"):
        assert value(key) == data[key], key
    assert value("schema_migration") == value("schema_migration_expected") == HEAD
    # (sizes and dead rows come from the server's statistics, which may move between two
    # commands: every table is there, with whole numbers)
    for table in data["tables"]:
        assert value("table_bytes", table=table["table"]) > 0
        assert value("table_dead_rows", table=table["table"]) >= 0
        assert float(value("table_rows", table=table["table"])).is_integer()
    assert value("table_rows", table="pgsaver_checkpoints") == data["checkpoints"]
    # every checkpoint of the fixture was made in the last minutes
    assert value("checkpoints_last_hour") == value("checkpoints_last_day") == data["checkpoints"]
    assert value("checkpoint_bytes_last_day") > 0
    with psycopg.connect(filled) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM min(last)) FROM (SELECT max(created_at) AS last"
            " FROM pgsaver_checkpoints GROUP BY thread_id) AS t"
        ).fetchone()
    assert row is not None
    assert value("oldest_thread_activity_timestamp_seconds") == pytest.approx(float(row[0]))
    assert text.endswith("\n")
    assert cli("status", "--prometheus", "--json", dsn=filled, check=2)


# --------------------------------------------------------------------------- history, show


def test_history_and_show_match_what_langgraph_sees(filled: str) -> None:
    with PostgresSaver.from_conn_string(filled, max_size=1) as saver:
        for builder, thread in ((two_nodes, "t-004"), (approval, "waiting"), (delta_chat, "delta")):
            graph = builder().compile(checkpointer=saver)
            cfg = {"configurable": {"thread_id": thread}}
            want = [
                (s.config["configurable"]["checkpoint_id"], s.metadata["step"], list(s.next))
                for s in graph.get_state_history(cfg)
            ]
            got = cli_json("history", thread, "--limit", "0", dsn=filled)
            assert [(r["checkpoint_id"], r["step"], r["next"]) for r in got] == want, thread
            state = graph.get_state(cfg)
            shown = cli_json("show", thread, dsn=filled)
            values = dict(shown["values"])
            for channel, d in shown["delta_channels"].items():  # the graph's reducer: extend
                values[channel] = list(d["seed"] or []) + [x for w in d["writes"] for x in w]
            assert values == json.loads(json.dumps(state.values, default=repr)), thread
            assert shown["next"] == list(state.next)
        first = want[-1][0]
        old = cli_json("show", "delta", "--checkpoint", first, dsn=filled)
        assert old["checkpoint_id"] == first
    text = cli("show", "t-004", "--width", "40", dsn=filled).stdout
    assert "… (" in text  # a long value is cut, saying how long it was
    assert "branch:to" not in cli("show", "waiting", dsn=filled).stdout
    assert "branch:to:ask" in cli("show", "waiting", "--all", dsn=filled).stdout
    missing = cli("history", "nope", dsn=filled, check=1)
    assert missing.stderr == "error: thread 'nope' has no checkpoints\n"


def test_history_shows_the_run_id_delete_runs_takes(db_dsn: str) -> None:
    """A run id given as plain LangGraph takes it (the config's top-level run_id) is in no
    metadata: history shows it from its column, and delete-runs deletes that run."""
    import uuid

    run = uuid.uuid4()
    with PostgresSaver.from_conn_string(db_dsn, max_size=1) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({"foo": ""}, {"configurable": {"thread_id": "r"}})
        graph.invoke({"foo": ""}, {"configurable": {"thread_id": "r"}, "run_id": run})
    got = cli_json("history", "r", "--limit", "0", dsn=db_dsn)
    mine = [r for r in got if r["run_id"] == str(run)]
    assert mine
    assert all("run_id" not in r["metadata"] for r in got)
    # the run id shown by its end (12 characters), whole with --full-ids
    assert "…" + str(run)[-12:] in cli("history", "r", dsn=db_dsn).stdout
    assert str(run) in cli("history", "r", "--full-ids", dsn=db_dsn).stdout
    cli("delete-runs", str(run), "--yes", dsn=db_dsn)
    left = cli_json("history", "r", "--limit", "0", dsn=db_dsn)
    assert len(left) == len(got) - len(mine)
    assert all(r["run_id"] is None for r in left)


def test_history_and_show_read_under_pressure(db_dsn: str) -> None:
    """history: a time column, newest first across namespaces, ids by their end (show takes
    one), --ns a subgraph's node name for its 'node:<task id>' namespaces; show: a list of
    messages as 'role: text' lines, the last N."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"answer {len(state['messages'])}\nmore")]}

    chat: StateGraph[Any] = StateGraph(MessagesState)
    chat.add_node("reply", reply)
    chat.add_edge(START, "reply")
    chat.add_edge("reply", END)
    with PostgresSaver.from_conn_string(db_dsn, max_size=1) as saver:
        graph = chat.compile(checkpointer=saver)
        for i in range(4):
            graph.invoke(
                {"messages": [("user", f"question {i}")]}, {"configurable": {"thread_id": "chat"}}
            )
        nested = with_subgraph().compile(checkpointer=saver)
        for _ in range(2):
            nested.invoke({"foo": "x", "inner_log": []}, {"configurable": {"thread_id": "sub"}})
    shown = cli("show", "chat", "--messages", "3", dsn=db_dsn).stdout
    assert "messages: 8 messages, the last 3 (--messages 0 for all)" in shown
    assert "  ai: answer 7 more" in shown
    assert "  human: question 3" in shown
    assert "question 0" not in shown
    assert "  human: question 0" in cli("show", "chat", "--messages", "0", dsn=db_dsn).stdout
    rows = cli_json("history", "sub", "--limit", "0", dsn=db_dsn)
    ids = [r["checkpoint_id"] for r in rows]
    assert ids == sorted(ids, reverse=True)  # newest first, whatever the namespace
    assert all(r["ts"] for r in rows)
    below = {r["checkpoint_ns"] for r in rows if r["checkpoint_ns"]}
    assert below
    assert all(ns.startswith("child:") for ns in below)
    child = cli_json("history", "sub", "--ns", "child", "--limit", "0", dsn=db_dsn)
    assert {r["checkpoint_ns"] for r in child} == below
    assert all(r["checkpoint_ns"] == "" for r in cli_json("history", "sub", "--ns", "", dsn=db_dsn))
    cli("history", "sub", "--ns", "chil", dsn=db_dsn, check=1)  # not a node's name: nothing
    latest = cli_json("history", "sub", "--limit", "3", dsn=db_dsn)
    assert [r["checkpoint_id"] for r in latest] == ids[:3]
    text = cli("history", "sub", dsn=db_dsn).stdout
    assert "time (UTC)" in text
    root = next(r for r in rows if r["checkpoint_ns"] == "")
    assert "…" + root["checkpoint_id"][-12:] in text
    assert root["checkpoint_id"] not in text
    got = cli_json("show", "sub", "--checkpoint", root["checkpoint_id"][-12:], dsn=db_dsn)
    assert got["checkpoint_id"] == root["checkpoint_id"]


# --------------------------------------------------------------------------- prune


def test_a_dry_run_counts_what_the_real_run_removes(filled: str) -> None:
    before = stored(filled)
    plan = cli_json("prune", "--keep-last", "2", "--dry-run", dsn=filled)
    assert stored(filled) == before
    done = cli_json("prune", "--keep-last", "2", "--batch-size", "7", dsn=filled)
    for key in ("threads", "checkpoints", "writes", "blobs", "bytes"):
        assert plan[key] == done[key], key
    assert plan["dry_run"] is True
    assert done["checkpoints"] > 0
    assert len(before["checkpoints"]) - len(stored(filled)["checkpoints"]) == done["checkpoints"]
    again = cli_json("prune", "--keep-last", "2", dsn=filled)
    assert again["checkpoints"] == 0
    # idle threads go whole; nothing is idle for a day here
    assert cli_json("prune", "--idle-for", "1d", dsn=filled)["threads"] == 0
    gone = cli_json("prune", "--thread", "t-000", "--strategy", "delete", dsn=filled)
    assert gone["threads"] == 1
    assert cli_json("history", "t-001", "--limit", "0", dsn=filled)
    cli("history", "t-000", dsn=filled, check=1)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_prune_interrupted_and_resumed_ends_as_an_uninterrupted_one(
    filled: str, twin: str, signum: int, code: int
) -> None:
    """Ctrl-C (SIGINT), or SIGTERM as Kubernetes sends it, between batches: the batch in flight
    rolled back, the resume hint printed, exit 130 or 143; resumed, the prune ends as one that
    was never stopped."""
    with PostgresSaver.from_conn_string(filled, max_size=1) as saver:  # more threads, to interrupt
        graph = two_nodes().compile(checkpointer=saver)
        for i in range(60):
            graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": f"more-{i:03d}"}})
            graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": f"more-{i:03d}"}})
    with PostgresSaver.from_conn_string(twin, max_size=1) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        for i in range(60):
            graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": f"more-{i:03d}"}})
            graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": f"more-{i:03d}"}})
    args = ["prune", "--keep-last", "3", "--thread-batch", "1", "--batch-size", "2"]
    env = {**os.environ, "LANGGRAPH_PG_DSN": filled}
    proc = subprocess.Popen(
        [*CLI, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # SIGINT as a terminal delivers it, whatever this process inherited: a test run started
        # in the background of a non-interactive shell ignores SIGINT, its children too, and
        # Python then installs no KeyboardInterrupt handler (the prune ran to its end)
        preexec_fn=_default_sigint,
    )
    assert proc.stderr is not None
    lines = []
    while len(lines) < 5:  # a few batches committed
        line = proc.stderr.readline()
        assert line, (lines, proc.wait())
        lines.append(line)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (out, err)
    assert "nothing half-done" in err
    resume = re.search(r"Resume with: langgraph-pg-saver (.*) \(or run", err)
    assert resume is not None, err
    assert "--start-after" in resume.group(1)
    # the resume command as printed, then the same command again from the start
    cli(*resume.group(1).replace("'", "").split(), dsn=filled)
    cli(*args, dsn=filled)
    cli(*args, dsn=twin)  # uninterrupted

    # the same checkpoints remain (the twin has other ids for the 'more' threads: compare steps)
    def shape(dsn: str) -> list[tuple[str, int]]:
        with psycopg.connect(dsn) as conn:
            return sorted(
                conn.execute(
                    "SELECT thread_id, (metadata->>'step')::int FROM pgsaver_checkpoints"
                ).fetchall()
            )

    assert shape(filled) == shape(twin)
    assert stored(filled)["blobs"] == stored(twin)["blobs"]


def _pty_run(args: Sequence[str], dsn: str, answer: str | None) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal (stdin, stdout and stderr), answering a prompt."""
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.environ["LANGGRAPH_PG_DSN"] = dsn
        os.environ["COLUMNS"] = "120"
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C on the terminal: see above
        os.execv(sys.executable, [*CLI, *args])
    out = b""
    answered = 0.0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        # the answer once the question is asked (Ctrl-C again every 2 s until the CLI is gone)
        again = answer == "\x03" and answered and time.monotonic() - answered > 2
        if answer is not None and (not answered or again) and b"[y/N]" in out:
            os.write(fd, answer.encode() + (b"" if answer == "\x03" else b"\r"))
            answered = time.monotonic()
    ends = time.monotonic() + 10  # its terminal closed: the process ends
    done, status = os.waitpid(pid, os.WNOHANG)
    while not done and time.monotonic() < ends:
        time.sleep(0.05)
        done, status = os.waitpid(pid, os.WNOHANG)
    if not done:  # still running: a failure to report, not a hung test
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_on_a_terminal_prune_asks_first_and_shows_a_progress_bar(filled: str) -> None:
    before = stored(filled)
    code, out = _pty_run(["prune", "--keep-last", "1"], filled, "n")
    assert code == 1, out
    assert "would remove " in out
    assert "Remove these? [y/N]" in out
    # the plan's walk showed as it went, with its total
    planned = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert re.search(r"plan ━+ (\d+)/\1 threads", planned), planned
    assert stored(filled) == before
    # Ctrl-C at the question: interrupted (130), not a refusal (1)
    code, out = _pty_run(["prune", "--keep-last", "1"], filled, "\x03")
    assert code == 130, out
    assert "interrupted" in out
    assert stored(filled) == before
    code, out = _pty_run(["prune", "--keep-last", "1", "--thread-batch", "4"], filled, "y")
    assert code == 0, out
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert re.search(r"prune ━+ (\d+)/\1 threads", plain), plain
    assert "removed " in out
    assert len(stored(filled)["checkpoints"]) < len(before["checkpoints"])
    # --yes: no question
    code, out = _pty_run(["prune", "--keep-last", "1", "--yes"], filled, None)
    assert code == 0
    assert "[y/N]" not in out


# --------------------------------------------------------------------------- copy, delete


def test_copy_delete_thread_and_delete_runs_print_what_they_did(filled: str) -> None:
    copied = cli_json("copy-thread", "t-001", "t-copy", dsn=filled)
    assert copied["checkpoints"] == 12
    refused = cli("copy-thread", "t-001", "t-copy", dsn=filled, check=1)
    assert refused.stderr == (
        "error: thread 't-copy' already has checkpoints: pass --overwrite to replace them\n"
    )
    typo = cli("copy-thread", "t-0001", "t-other", dsn=filled, check=1)
    assert "thread 't-0001' has no checkpoints: nothing was copied" in typo.stderr
    assert (
        cli_json("copy-thread", "t-002", "t-copy", "--overwrite", dsn=filled)["checkpoints"] == 12
    )
    deleted = cli_json("delete-thread", "t-copy", "t-003", dsn=filled)
    assert deleted["threads"] == 2
    assert deleted["checkpoints"] == 24
    run_id = str(uuid.uuid4())
    with PostgresSaver.from_conn_string(filled, max_size=1) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({"foo": "x", "bar": []}, {"configurable": {"thread_id": "t-004"}})
        # LangGraph's server passes the run id in the config's metadata
        cfg: Any = {"configurable": {"thread_id": "t-004"}, "metadata": {"run_id": run_id}}
        graph.invoke({"foo": "x", "bar": []}, cfg)
    with psycopg.connect(filled) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgsaver_checkpoints WHERE run_id = %s", (run_id,)
        ).fetchone()
    assert row is not None
    n = row[0]
    assert n == 4
    runs = cli_json("delete-runs", run_id, dsn=filled)
    assert runs["checkpoints"] == n
    assert runs["threads"] == 1


# --------------------------------------------------------------------------- unknown ids, plans, questions


def rows_of(dsn: str) -> dict[str, list[Any]]:
    """Every row of the saver's tables, whole (any change shows), sorted."""
    with psycopg.connect(dsn) as conn:
        return {
            t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)  # fixed names
            for t in ("pgsaver_checkpoints", "pgsaver_writes", "pgsaver_blobs")
        }


def checkpoints_of(dsn: str, thread: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgsaver_checkpoints WHERE thread_id = %s", (thread,)
        ).fetchone()
    assert row is not None
    return int(row[0])


REFUSED = "{}: nothing was {} (pass --missing-ok to go on with the others)\n"


def test_unknown_thread_ids_fail_the_command_naming_them_and_change_nothing(filled: str) -> None:
    before = rows_of(filled)
    one = "error: thread 'no-such-thread' has no checkpoints"
    for args, done in (
        (["delete-thread", "no-such-thread"], "deleted"),
        (["delete-thread", "t-001", "no-such-thread"], "deleted"),  # the known one stays too
        (["prune", "--keep-last", "1", "--thread", "no-such-thread"], "removed"),
        (
            ["prune", "--keep-last", "1", "--thread", "t-002", "--thread", "no-such-thread"],
            "removed",
        ),
        (
            ["prune", "--strategy", "delete", "--thread", "t-002", "--thread", "no-such-thread"],
            "removed",
        ),
        (["prune", "--idle-for", "1s", "--thread", "no-such-thread"], "removed"),
    ):
        failed = cli(*args, dsn=filled, check=1)
        assert failed.stderr == REFUSED.format(one, done), args
        assert failed.stdout == ""
        assert rows_of(filled) == before, args
        # --json: the plan (nothing was done), naming the ids
        report = json.loads(cli(*args, "--json", dsn=filled, check=1).stdout)
        assert report["missing"] == ["no-such-thread"], args
        assert report["dry_run"] is True
        assert rows_of(filled) == before, args
    # several unknown ids are named together, sorted
    both = cli("delete-thread", "nope-b", "t-003", "nope-a", dsn=filled, check=1)
    assert both.stderr.startswith("error: threads 'nope-a', 'nope-b' have no checkpoints: ")
    # a dry run says the same, and exits 1 as the run would
    dry = cli(
        "prune", "--keep-last", "1", "--thread", "nope", "--dry-run", "--json", dsn=filled, check=1
    )
    assert json.loads(dry.stdout)["missing"] == ["nope"]
    assert "error: thread 'nope' has no checkpoints: the command would change nothing" in dry.stderr
    # copy-thread: a missing source copies nothing, into an empty or (--overwrite) a used target
    for args in (["nope", "t-new"], ["nope", "t-004", "--overwrite", "--yes"]):
        failed = cli("copy-thread", *args, dsn=filled, check=1)
        assert failed.stderr == "error: thread 'nope' has no checkpoints: nothing was copied\n"
        report = json.loads(cli("copy-thread", *args, "--json", dsn=filled, check=1).stdout)
        assert report["missing"] == ["nope"]
        assert report["checkpoints"] == 0
    assert rows_of(filled) == before


def test_missing_ok_goes_on_with_the_known_threads_and_names_the_others(filled: str) -> None:
    n = checkpoints_of(filled, "t-001")
    done = cli("delete-thread", "t-001", "nope", "--missing-ok", "--json", dsn=filled)
    assert done.stderr == "warning: thread 'nope' has no checkpoints (skipped)\n"
    report = json.loads(done.stdout)
    assert (report["threads"], report["checkpoints"], report["missing"]) == (1, n, ["nope"])
    assert checkpoints_of(filled, "t-001") == 0
    n = checkpoints_of(filled, "t-002")
    pruned = cli_json(
        "prune",
        "--keep-last",
        "1",
        "--thread",
        "t-002",
        "--thread",
        "nope",
        "--missing-ok",
        dsn=filled,
    )
    assert pruned["missing"] == ["nope"]
    assert pruned["checkpoints"] == n - 1
    # a dry run with --missing-ok exits 0 too
    plan = cli_json("delete-thread", "t-003", "nope", "--dry-run", "--missing-ok", dsn=filled)
    assert (plan["threads"], plan["missing"], plan["dry_run"]) == (1, ["nope"], True)


def test_dry_runs_change_nothing_and_count_what_the_run_does(filled: str) -> None:
    before = rows_of(filled)
    plan = cli_json("delete-thread", "t-001", "t-002", "--dry-run", dsn=filled)
    assert rows_of(filled) == before
    assert (plan["threads"], plan["dry_run"], plan["missing"]) == (2, True, [])
    text = cli("delete-thread", "t-001", "--dry-run", dsn=filled).stdout
    assert text.startswith("would delete 12 checkpoints, ")
    pruned = cli_json("prune", "--keep-last", "1", "--thread", "t-003", "--dry-run", dsn=filled)
    assert pruned["checkpoints"] == 11
    assert rows_of(filled) == before
    # copy-thread --overwrite --dry-run: what would be replaced and copied
    with PostgresSaver.from_conn_string(filled, max_size=1) as saver:
        two_nodes().compile(checkpointer=saver).invoke(
            {"foo": "x", "bar": []}, {"configurable": {"thread_id": "short"}}
        )
    before = rows_of(filled)
    copy = cli_json("copy-thread", "t-004", "short", "--overwrite", "--dry-run", dsn=filled)
    assert (copy["checkpoints"], copy["dry_run"], copy["missing"]) == (12, True, [])
    assert copy["replaced"]["checkpoints"] == 4
    text = cli("copy-thread", "t-004", "short", "--overwrite", "--dry-run", dsn=filled).stdout
    assert text.splitlines()[0].startswith("would replace 'short': delete 4 checkpoints, ")
    assert text.splitlines()[1].startswith("would copy 't-004' to 'short': 12 checkpoints, ")
    assert rows_of(filled) == before
    # without --overwrite, the plan refuses as the copy would
    used = cli("copy-thread", "t-004", "short", "--dry-run", dsn=filled, check=1)
    assert "'short' already has checkpoints: pass --overwrite" in used.stderr
    assert rows_of(filled) == before
    # the runs do what the plans said
    done = cli_json("copy-thread", "t-004", "short", "--overwrite", dsn=filled)  # no terminal
    assert (done["checkpoints"], done["writes"], done["blobs"]) == (
        copy["checkpoints"],
        copy["writes"],
        copy["blobs"],
    )
    assert checkpoints_of(filled, "short") == 12
    deleted = cli_json("delete-thread", "t-001", "t-002", dsn=filled)
    for key in ("threads", "checkpoints", "writes", "blobs"):
        assert deleted[key] == plan[key], key


def test_on_a_terminal_destructive_commands_show_their_plan_and_ask(filled: str) -> None:
    before = rows_of(filled)
    code, out = _pty_run(["delete-thread", "t-001"], filled, "n")
    assert code == 1, out
    assert "would delete 12 checkpoints" in out
    assert "Delete these threads? [y/N]" in out
    assert rows_of(filled) == before
    code, out = _pty_run(["copy-thread", "t-002", "t-003", "--overwrite"], filled, "n")
    assert code == 1, out
    assert "would replace 't-003': delete 12 checkpoints" in out
    assert "would copy 't-002' to 't-003': 12 checkpoints" in out
    assert "Replace thread 't-003'? [y/N]" in out
    assert rows_of(filled) == before
    # an unknown id is refused before any question
    code, out = _pty_run(["delete-thread", "t-001", "nope"], filled, "y")
    assert code == 1, out
    assert "[y/N]" not in out
    assert "thread 'nope' has no checkpoints" in out
    assert rows_of(filled) == before
    # 'y' does it
    code, out = _pty_run(["delete-thread", "t-001", "nope", "--missing-ok"], filled, "y")
    assert code == 0, out
    assert "thread 'nope' has no checkpoints: skipped" in out
    assert "deleted 12 checkpoints" in out
    assert checkpoints_of(filled, "t-001") == 0
    code, out = _pty_run(["copy-thread", "t-002", "t-003", "--overwrite"], filled, "y")
    assert code == 0, out
    assert "copied 't-002' to 't-003': 12 checkpoints" in out
    # a copy that replaces nothing asks nothing; --yes asks nothing
    code, out = _pty_run(["copy-thread", "t-002", "t-fresh"], filled, None)
    assert code == 0, out
    assert "[y/N]" not in out
    code, out = _pty_run(["delete-thread", "t-fresh", "--yes"], filled, None)
    assert code == 0, out
    assert "[y/N]" not in out
    assert checkpoints_of(filled, "t-fresh") == 0


def test_delete_runs_names_unknown_ids_plans_and_refuses_before_deleting(db_dsn: str) -> None:
    exit_run = str(uuid.uuid4())
    with PostgresSaver.from_conn_string(db_dsn, max_size=1) as saver:
        chat = delta_chat().compile(checkpointer=saver)
        for i in range(3):
            chat.invoke(
                {"messages": [f"hi{i}"]}, {**_thread("d"), "metadata": {"run_id": f"run-{i}"}}
            )
        # plain LangGraph: the run id at the top of the config; exit durability stores this run's
        # DeltaChannel writes on run-2's last checkpoint
        chat.invoke(
            {"messages": ["secret"]}, {**_thread("d"), "run_id": exit_run}, durability="exit"
        )
    before = stored(db_dsn)

    for args in (["nope"], [exit_run, "nope", "other"]):
        done = cli("delete-runs", *args, dsn=db_dsn, check=1)
        assert done.stderr.startswith("error: no such run")
        assert "'nope'" in done.stderr
        assert "nothing was deleted" in done.stderr
        assert repr(exit_run) not in done.stderr
        assert done.stdout == ""
    assert "no such runs: 'nope', 'other'" in done.stderr
    plan = cli_json("delete-runs", exit_run, "--dry-run", dsn=db_dsn)
    assert (plan["checkpoints"], plan["writes"], plan["threads"]) == (1, 2, 1)
    assert (plan["dry_run"], plan["missing"]) == (True, [])
    text = cli("delete-runs", exit_run, "nope", "--dry-run", dsn=db_dsn, check=1)
    assert text.stdout.startswith("would delete 1 checkpoint, 2 writes, ")
    assert "error: no such run: 'nope'" in text.stderr
    # run-2's last checkpoint holds what the exit run's checkpoint rebuilds its messages from
    refused = cli("delete-runs", "run-2", dsn=db_dsn, check=1)
    assert refused.stderr.startswith("error: delete_for_runs refused: surviving checkpoints")
    assert "nothing was deleted" in refused.stderr
    assert stored(db_dsn) == before

    done = cli("delete-runs", exit_run, "nope", "--missing-ok", "--json", dsn=db_dsn)
    report = json.loads(done.stdout)
    assert (report["checkpoints"], report["writes"], report["missing"]) == (1, 2, ["nope"])
    assert "no such run: 'nope'" in done.stderr
    with psycopg.connect(db_dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pgsaver_writes WHERE run_id = %s", (exit_run,))
        assert left.fetchone() == (0,)

    # on a terminal: the plan, then a question
    after = stored(db_dsn)
    code, out = _pty_run(["delete-runs", "run-2"], db_dsn, "n")
    assert code == 1, out
    assert "would delete 3 checkpoints" in out
    assert "Delete what 1 run wrote? [y/N]" in out
    assert stored(db_dsn) == after
    code, out = _pty_run(["delete-runs", "run-2"], db_dsn, "y")
    assert code == 0, out
    assert "deleted 3 checkpoints" in out
    assert len(stored(db_dsn)["checkpoints"]) == len(after["checkpoints"]) - 3


def _thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


# --------------------------------------------------------------------------- reencrypt


def test_reencrypt_and_show_with_keys_from_a_file_or_the_environment(
    db_dsn: str, tmp_path: Any
) -> None:
    k1, k2 = b"1" * 32, b"2" * 32
    with PostgresSaver.from_conn_string(db_dsn, serde=KeyringSerializer({"k1": k1})) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        graph.invoke({"foo": "x", "bar": ["secret"]}, {"configurable": {"thread_id": "s"}})
    cli("show", "s", dsn=db_dsn, check=1)  # no keys: the plain serializer cannot read it
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {"k2": k2.hex(), "k1": "base64:" + "MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTE="}
        )
    )
    before = rows_of(db_dsn)
    plan = cli_json("reencrypt", "--keys-file", str(keys), "--dry-run", dsn=db_dsn)
    assert (plan["checkpoints"], plan["dry_run"]) == (4, True)
    unknown = cli("reencrypt", "--keys-file", str(keys), "--thread", "nope", dsn=db_dsn, check=1)
    assert unknown.stderr == "error: thread 'nope' has no checkpoints: nothing was sealed again\n"
    code, out = _pty_run(["reencrypt", "--keys-file", str(keys)], db_dsn, "n")
    assert code == 1, out
    assert "would seal again 4 checkpoints" in out
    assert "Seal these again? [y/N]" in out
    assert rows_of(db_dsn) == before  # the dry run, the unknown thread and the 'n' changed nothing
    done = cli("reencrypt", "--keys-file", str(keys), "--json", dsn=db_dsn)
    report = json.loads(done.stdout)
    assert report["checkpoints"] == 4
    # a line per batch: its pass over the tables, in order (no plan without a terminal: no total)
    passes = re.findall(
        r"^reencrypt pass (\d)/3, ([a-z ]+): ([\d,]+) sealed again", done.stderr, re.M
    )
    assert [p[0] for p in passes] == sorted(p[0] for p in passes), done.stderr
    assert passes[-1][1:] == ("checkpoints", "4"), done.stderr
    for key in ("threads", "checkpoints", "writes", "blobs"):
        assert report[key] == plan[key], key
    only_k2 = json.dumps({"k2": k2.hex()})
    shown = cli_json("show", "s", dsn=db_dsn, env={"LANGGRAPH_PG_KEYS": only_k2})
    assert shown["values"] == {"foo": "b", "bar": ["secret", "a", "b"]}
    wrong = cli(
        "show", "s", dsn=db_dsn, env={"LANGGRAPH_PG_KEYS": json.dumps({"k1": k1.hex()})}, check=1
    )
    assert "encrypted with key 'k2', which the keyring does not hold" in wrong.stderr
    bad = cli("reencrypt", dsn=db_dsn, check=2)
    assert "needs keys" in bad.stderr
    junk = cli("show", "s", dsn=db_dsn, env={"LANGGRAPH_PG_KEYS": "{"}, check=1)
    assert "is not JSON" in junk.stderr


# --------------------------------------------------------------------------- errors


def test_user_mistakes_are_one_line_with_exit_codes(filled: str) -> None:
    for dsn, words in (
        ("postgresql://postgres@127.0.0.1:1/x", "Connection refused"),
        (filled + " user=nobody_here", 'role "nobody_here" does not exist'),
        ("not a dsn at all", "connection info string"),
    ):
        done = cli("status", dsn=dsn, check=1)
        assert words in done.stderr, done.stderr
        assert done.stderr.startswith("error: ")
        assert done.stderr.count("\n") == 1
        assert "Traceback" not in done.stderr
    missing = cli("--schema", "nowhere", "status", dsn=filled, check=1)
    assert "schema 'nowhere' has no langgraph-pg-saver tables" in missing.stderr
    hist = cli("--schema", "nowhere", "history", "t-001", dsn=filled, check=1)
    assert "is not set up" in hist.stderr
    assert (
        cli("prune", dsn=filled, check=2)
        .stderr.strip()
        .endswith("say what to prune: --keep-last N, --idle-for 30d, or --strategy")
    )
    assert cli("no-such-command", dsn=filled, check=2).returncode == 2
    assert cli("prune", "--keep-last", "x", dsn=filled, check=2).returncode == 2
    verbose = cli("-v", "status", dsn="postgresql://postgres@127.0.0.1:1/x", check=1)
    assert "error: " in verbose.stderr
    # libpq's variables are the last resort
    pg_env = {"PGHOST": "127.0.0.1", "PGPORT": "1"}
    assert "port 1 failed" in cli("status", env=pg_env, check=1).stderr


def test_the_resume_hint_hides_the_password() -> None:
    from langgraph_pg_saver import cli as cli_module

    masked = cli_module._masked(
        ["--dsn", "postgresql://u:s3cret@db/app", "prune", "--keep-last", "2"]
    )
    assert "s3cret" not in " ".join(masked)
    assert "password=****" in masked[1]
    (one,) = cli_module._masked(["--dsn=host=db password=x"])
    assert sorted(one.removeprefix("--dsn=").split()) == ["host=db", "password=****"]


def test_import_official_dry_run_then_import_and_verify(db_dsn: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
    from langgraph.store.postgres import PostgresStore as OfficialStore

    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        graph = two_nodes().compile(checkpointer=official)
        for i in range(4):
            graph.invoke({"foo": "x", "bar": [f"v{i}"]}, {"configurable": {"thread_id": f"o-{i}"}})
    with OfficialStore.from_conn_string(db_dsn) as store:
        store.setup()
        store.put(("users", "u1"), "m", {"text": "hello"})
    plan = cli_json("import-official", "--dry-run", dsn=db_dsn)
    assert plan["saver"]["checkpoints"] == 16
    assert stored(db_dsn)["checkpoints"] == []
    done = cli_json("import-official", "--store", "--thread-batch", "3", dsn=db_dsn)
    assert done["saver"]["checkpoints"] == 16
    assert done["verify"] == {"threads": 4, "checkpoints": 16, "different": []}
    assert done["store"]["imported"] == 1
    text = cli("import-official", dsn=db_dsn).stdout
    assert "imported 0 checkpoints" in text
    assert "skipped as already imported: 16 checkpoints; 4 threads with nothing new" in text
    assert (
        "verified 16 imported checkpoints held here, of 4 threads: every one reads the same" in text
    )
    # pruned here, then imported again: nothing comes back, and verify compares what is left
    cli("prune", "--keep-last", "1", "--yes", dsn=db_dsn)
    again = cli_json("import-official", dsn=db_dsn)
    assert again["saver"]["checkpoints"] == again["saver"]["threads"] == 0
    assert again["saver"]["already_imported"] == 16
    assert again["saver"]["unchanged_threads"] == 4
    assert again["verify"] == {"threads": 4, "checkpoints": 4, "different": []}
    assert len(stored(db_dsn)["checkpoints"]) == 4
    # deleted here: stays deleted, unless named
    cli("delete-thread", "o-0", "--yes", dsn=db_dsn)
    text = cli("import-official", "--no-verify", dsn=db_dsn).stdout
    assert "skipped 1 thread imported before and deleted here since" in text
    missing = cli("import-official", "--reimport", "nope", dsn=db_dsn, check=1)
    assert "--reimport names threads the source does not hold: nope" in missing.stderr
    back = cli_json("import-official", "--reimport", "o-0", dsn=db_dsn)
    assert (back["saver"]["threads"], back["saver"]["checkpoints"]) == (1, 4)
    assert back["verify"] == {"threads": 4, "checkpoints": 7, "different": []}
    # a thread that differs from the source (changed here after the import): verify names it
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            """UPDATE pgsaver_checkpoints SET metadata = metadata || '{"x": 1}'"""
            " WHERE thread_id = 'o-2'"
        )
    changed = cli("import-official", dsn=db_dsn, check=1)
    assert "1 differ: o-2" in changed.stdout


def test_import_official_verify_reads_the_deltachannel_history(db_dsn: str) -> None:
    """A checkpoint held here whose DeltaChannel ancestors are gone reads differently, though every
    row it has is the source's: verify names its thread."""
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver

    with OfficialSaver.from_conn_string(db_dsn) as official:
        official.setup()
        chat = delta_chat().compile(checkpointer=official)
        for thread in ("whole", "broken"):
            for i in range(2):
                chat.invoke({"messages": [f"hi{i}"]}, {"configurable": {"thread_id": thread}})
    done = cli_json("import-official", dsn=db_dsn)
    assert done["verify"]["different"] == []
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        # the newest checkpoint's parent, with its writes: what a wrong prune would leave
        conn.execute(
            "WITH head AS (SELECT parent_checkpoint_id AS id FROM pgsaver_checkpoints"
            " WHERE thread_id = 'broken' ORDER BY checkpoint_id DESC LIMIT 1),"
            " w AS (DELETE FROM pgsaver_writes WHERE thread_id = 'broken'"
            " AND checkpoint_id = (SELECT id FROM head))"
            " DELETE FROM pgsaver_checkpoints WHERE thread_id = 'broken'"
            " AND checkpoint_id = (SELECT id FROM head)"
        )
    again = cli_json("import-official", dsn=db_dsn, check=1)
    assert again["saver"]["checkpoints"] == 0
    assert again["verify"]["different"] == ["broken"]
