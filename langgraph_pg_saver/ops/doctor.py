"""The doctor's checks: connection, server, schema, pooler, privileges, compression, jit, bloat."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.db.driver import Driver
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.errors import PgSaverError, PrivilegeError
from langgraph_pg_saver.ops.reports import (
    Record,
    _queries,
    _schema_version,
    human_bytes,
    one_line,
)


@dataclass(frozen=True)
class Check(Record):
    check: str
    status: str  # OK, WARN or FAIL
    detail: str
    fix: str = ""


@dataclass
class DoctorReport(Record):
    checks: list[Check] = field(default_factory=list)

    def add(self, check: str, status: str, detail: str, fix: str = "") -> None:
        self.checks.append(Check(check, status, detail, fix))

    @property
    def ok(self) -> bool:
        return not any(c.status == "FAIL" for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.as_dict() for c in self.checks]}


def _server_words(exc: BaseException) -> str:
    """The server's own words for an error the driver explained (a PrivilegeError's cause)."""
    cause = exc.__cause__
    return one_line(cause if isinstance(exc, PrivilegeError) and cause is not None else exc)


def doctor(saver: PostgresSaver, report: DoctorReport | None = None) -> DoctorReport:
    """The connection, server, schema, pooler, privileges, compression, jit and bloat, each OK,
    WARN or FAIL with what to do. A check that could not run is a FAIL; a connection lost on the
    way is reported as the connection's."""
    report = DoctorReport() if report is None else report
    try:
        _doctor_checks(report, saver)
    except psycopg.OperationalError as exc:
        report.add(
            "connection",
            "FAIL",
            one_line(exc),
            "check --dsn / $LANGGRAPH_PG_DSN, the server, the network and the password",
        )
    except (psycopg.Error, PrivilegeError) as exc:
        report.add("doctor", "FAIL", _server_words(exc), "run with the role the application uses")
    return report


def _doctor_checks(doc: DoctorReport, saver: PostgresSaver) -> None:
    driver = saver._driver
    q = driver.q
    schema = q.schema
    with driver.connection() as conn, driver.cursor_on(conn) as cur:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            cur.execute(q["ops_ping"])
            cur.fetchone()
            times.append(time.perf_counter() - t0)
        info = conn.info
        doc.add(
            "connection",
            "OK",
            f"{info.host}:{info.port}/{info.dbname} as {info.user}, round trip "
            f"{statistics.median(times) * 1000:.2f} ms",
        )
        cur.execute(q["backend_pid"], prepare=False)
        pid_row = cur.fetchone()
        direct = pid_row is not None and pid_row[0] == info.backend_pid
        works = direct or _prepared_probe(cur, q["ops_probe"])
    settings = driver.fetch_one(q["ops_settings"], {})
    assert settings is not None  # settings: one row
    version, version_num, jit, toast, has_lz4, role = settings
    doc.add(
        "server",
        "OK" if version_num >= 130000 else "WARN",
        f"PostgreSQL {version}",
        "" if version_num >= 130000 else "PostgreSQL 13 or newer is supported",
    )
    try:
        found = _schema_version(driver)
    except PrivilegeError as exc:
        doc.add(
            "schema",
            "FAIL",
            f"cannot read the schema's version: {_server_words(exc)}",
            "docs/guide.md 'Roles without DDL rights': GRANT SELECT ON pgsaver_migrations (and the tables)",
        )
        _privileges(doc, driver, role)
        return
    if not found.exists:
        doc.add(
            "schema",
            "FAIL",
            f"schema {schema!r} does not exist",
            f"langgraph-pg-saver --schema {schema} setup (or pass the right --schema)",
        )
        return
    applied = found.applied
    try:
        todo = found.pending()
    except PgSaverError as exc:
        doc.add("schema", "FAIL", one_line(exc), "upgrade langgraph-pg-saver")
    else:
        if not applied:
            doc.add(
                "schema",
                "FAIL",
                f"schema {schema!r} is not set up",
                f"langgraph-pg-saver --schema {schema} setup",
            )
        elif todo:
            doc.add(
                "schema",
                "FAIL",
                f"at migration {max(applied)}, missing {todo}",
                f"langgraph-pg-saver --schema {schema} setup (with a role that may create tables)",
            )
        else:
            doc.add(
                "schema", "OK", f"{schema!r} at migration {max(applied)} (current: {found.head})"
            )
    if direct:
        doc.add("pooler", "OK", "direct connection: hot-path statements are prepared after 5 uses")
    else:
        doc.add(
            "pooler",
            "OK",
            "a pooling proxy sits in between (the server's process id differs from the one the "
            "connection was given); prepared statements "
            + (
                "worked in this probe, but are not guaranteed across transactions there"
                if works
                else "do not work through it"
            )
            + ": the saver detects it and prepares nothing",
        )
    if not _privileges(doc, driver, role) or not applied:
        return
    _citus_check(doc, driver)
    # on Citus the tables' figures are their shards' (the coordinator's tables are shells)
    _table_checks(doc, driver, _queries(saver), jit, toast, has_lz4, role)


def _citus_check(doc: DoctorReport, driver: Driver) -> None:
    """Where the database has citus: how the schema is distributed (citus_distribution)."""
    q = driver.q
    row = driver.fetch_one(q["citus_installed"], {})
    if not (row and row[0]):
        return
    rows = driver.fetch_all(q["citus_distribution"], {})
    placed = {str(r[1]).split("(")[0]: (str(r[2]), r[3], r[4]) for r in rows}
    missing = [str(r[0]) for r in driver.fetch_all(q["citus_missing"], {})]
    tables = ", ".join(
        f"{name} {how}" + (f" by {by} ({shards} shards)" if by and shards and shards > 1 else "")
        for name, (how, by, shards) in sorted(placed.items())
        if how != "distributed" or by == "thread_id"
    )
    functions = sum(
        1 for how, by, _ in placed.values() if how == "distributed" and by == "p_thread"
    )
    if missing:
        doc.add(
            "citus",
            "FAIL",
            f"citus is installed; not distributed: {', '.join(missing)}",
            "langgraph-pg-saver setup (distributes them; docs/scaling.md)",
        )
        return
    doc.add(
        "citus",
        "OK",
        f"{tables}; {functions} functions distributed by p_thread; nothing is prepared on "
        "Citus (the savers send the calls and router statements it runs on a thread's worker)",
    )
    counted = driver.fetch_one(q["citus_shard_estimates"], {})
    lacking, shards = (int(counted[0]), int(counted[1])) if counted else (0, 0)
    if lacking:
        doc.add(
            "citus shards",
            "WARN",
            f"{lacking} of {shards} shards of pgsaver_writes lack migration 0003's estimate of "
            "checkpoint_id (a shard a rebalance moved comes without it): plans of pending-write "
            "lookups there follow ANALYZE's estimate",
            "langgraph-pg-saver setup (sets it on every shard; docs/scaling.md)",
        )


def _table_checks(
    doc: DoctorReport,
    driver: Driver,
    q: Queries,
    jit: str,
    toast: str,
    has_lz4: bool,
    role: str,
) -> None:
    tables = {r[0]: r for r in driver.fetch_all(q["ops_tables"], {"schema": q.schema})}
    if not has_lz4:
        doc.add("compression", "OK", "this server has no lz4; values are compressed with pglz")
    else:
        cols = driver.fetch_all(q["ops_compression"], {"schema": q.schema})
        pglz = [f"{t}.{a}" for t, a, m in cols if m == "p" or (m == "" and toast != "lz4")]
        if pglz:
            doc.add(
                "compression",
                "WARN",
                f"large values are compressed with pglz ({', '.join(pglz)}); lz4 is several "
                "times faster at a similar ratio",
                "ALTER SYSTEM SET default_toast_compression = 'lz4'; SELECT pg_reload_conf(); "
                "(new rows; or ALTER TABLE ... ALTER COLUMN ... SET COMPRESSION lz4)",
            )
        else:
            doc.add("compression", "OK", "lz4")
    rows = int(tables["pgsaver_checkpoints"][1]) if "pgsaver_checkpoints" in tables else 0
    if jit == "on" and rows >= 1_000_000:
        doc.add(
            "jit",
            "WARN",
            f"jit is on and pgsaver_checkpoints holds about {rows:,} rows: a generic plan's "
            "estimates can cross jit_above_cost and compile for tens of milliseconds",
            f"ALTER ROLE {role} SET jit = off",
        )
    else:
        doc.add("jit", "OK", f"jit = {jit}" + (f", {rows:,} checkpoints" if rows else ""))
    vacuum = driver.fetch_one(q["ops_autovacuum"], {"schema": q.schema})
    server_on, counts_on, tables_off = (
        (bool(vacuum[0]), bool(vacuum[1]), list(vacuum[2])) if vacuum else (True, True, [])
    )
    if not (server_on and counts_on) or tables_off:
        why = (
            "autovacuum is off on this server"
            if not server_on
            else "track_counts is off, so autovacuum never starts"
            if not counts_on
            else f"autovacuum is turned off for {', '.join(tables_off)}"
        )
        doc.add(
            "autovacuum",
            "WARN",
            f"{why}: the rows a prune or retention job deletes stay as dead rows, their space "
            "not reused, and statistics go stale (plans go wrong as the tables grow), until "
            "a VACUUM (ANALYZE) run by hand",
            "ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();"
            if not server_on
            else "ALTER SYSTEM SET track_counts = on; SELECT pg_reload_conf();"
            if not counts_on
            else "; ".join(f"ALTER TABLE {t} RESET (autovacuum_enabled)" for t in tables_off),
        )
    else:
        doc.add("autovacuum", "OK", "on, for every table")
    bloated = []
    for name, (_, _, total, _, live, dead, _) in tables.items():
        if dead > 10_000 and dead > 0.2 * (live + dead):
            bloated.append(f"{name}: {dead:,} dead of {live + dead:,} rows ({human_bytes(total)})")
    if bloated:
        doc.add(
            "bloat",
            "WARN",
            "; ".join(bloated)
            + ". A table keeps its size on disk after a prune: VACUUM makes the dead rows' "
            "space reusable by new rows, only VACUUM FULL (which locks the table while it "
            "rewrites it) or pg_repack returns it to the disk",
            "VACUUM (ANALYZE) the tables, and check that autovacuum keeps up after prune jobs",
        )
    elif tables:
        doc.add("bloat", "OK", "dead rows under 20% in every table")
    if "pgsaver_deleted_threads" in tables:
        _deleted_check(doc, driver, q, int(tables["pgsaver_deleted_threads"][1]))


#: a record of a deleted thread older than this says that no retention job forgets them
STALE_DELETED = timedelta(days=30)


def _deleted_check(doc: DoctorReport, driver: Driver, q: Queries, rows: int) -> None:
    """Migration 0018's records of deleted threads: only retention forgets them."""
    found = driver.fetch_one(q["ops_deleted_oldest"], {"stale": STALE_DELETED})
    oldest, stale = (found[0], bool(found[1])) if found else (None, False)
    about = f"about {rows:,} " if rows else ""
    if oldest is None:
        doc.add("deleted threads", "OK", "no delete recorded")
    elif stale:
        doc.add(
            "deleted threads",
            "WARN",
            f"{about}records of deleted threads, the oldest from {oldest:%Y-%m-%d}: no "
            "retention job forgets them (retention forgets those older than keep_deleted, 7 "
            "days by default), so the table keeps a row for every thread ever deleted; if they "
            "are kept on purpose (keep_deleted=None or longer), nothing is wrong",
            "schedule retention with your policy (saver.retention(...), or `langgraph-pg-saver "
            "prune --keep-last N` / `--idle-for D`); `--keep-deleted` sets how long a deleted "
            "thread refuses a late run's writes",
        )
    else:
        doc.add(
            "deleted threads",
            "OK",
            f"{about}records of deleted threads, the oldest from {oldest:%Y-%m-%d}",
        )


def _privileges(doc: DoctorReport, driver: Driver, role: str) -> bool:
    missing = driver.fetch_all(driver.q["missing_privileges"], {"schema": driver.q.schema})
    if missing:
        lacks = ", ".join(f"{p} on {t}" for t, p in missing)
        doc.add(
            "privileges",
            "FAIL",
            f"role {role!r} lacks {lacks}",
            "docs/guide.md 'Roles without DDL rights': GRANT SELECT, INSERT, UPDATE, DELETE ON the tables, "
            "SELECT ON pgsaver_migrations",
        )
        return False
    doc.add("privileges", "OK", f"role {role!r} has what the saver needs")
    return True


def _prepared_probe(cur: psycopg.Cursor[Any], probe: bytes) -> bool:
    """Whether protocol-level prepared statements survive from one transaction to the next."""
    try:
        for _ in range(3):
            cur.execute(probe, prepare=True)
        return True
    except psycopg.Error:
        return False
