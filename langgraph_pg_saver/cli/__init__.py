"""``langgraph-pg-saver``: the ops command line (``pip install 'langgraph-pg-saver[cli]'``).

Built on the sync API (PostgresSaver) and a plain psycopg connection for the read-only reports.
Exit codes: 0 success, 1 failure (the error on one line; ``-v`` adds its causes), 2 usage error,
130 interrupted. ``--json`` on every reading command prints one JSON document on stdout.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

import click
import psycopg
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import sql

from langgraph_pg_saver.checkpoint.imports import ImportReport
from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.codec.crypto import KeyringSerializer
from langgraph_pg_saver.db import migrate as _migrate
from langgraph_pg_saver.db.pool import mask_dsn
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA, queries_for
from langgraph_pg_saver.db.steps import Report
from langgraph_pg_saver.errors import (
    InvalidSchemaNameError,
    PgSaverError,
    SchemaOutdatedError,
    ThreadNotEmptyError,
)

F = TypeVar("F", bound=Callable[..., Any])

#: how long a value ``show`` prints may be, in characters (``--width``)
SHOW_WIDTH = 160
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class Failure(Exception):
    """A failure to report on one line (exit code 1)."""


# --------------------------------------------------------------------------- options and context


class Ctx:
    def __init__(self, dsn: str | None, schema: str, verbose: bool) -> None:
        self.dsn = dsn if dsn is not None else os.environ.get("LANGGRAPH_PG_DSN", "")
        self.schema = schema
        self.verbose = verbose
        self.serde: SerializerProtocol | None = None

    @contextmanager
    def saver(self, *, check: bool = True, **kw: Any) -> Iterator[PostgresSaver]:
        # one plain connection first: a bad DSN or password fails at once, with the server's
        # words, rather than after the pool's timeout
        with self.connect():
            pass
        with PostgresSaver.from_conn_string(
            self.dsn, schema=self.schema, serde=self.serde, min_size=1, max_size=2, **kw
        ) as saver:
            if check:  # a missing or outdated schema, named, before anything else
                saver.setup(check=True)
            yield saver

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection[Any]]:
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self.dsn and "PGCONNECT_TIMEOUT" not in os.environ:
            kwargs["connect_timeout"] = 10
        with psycopg.connect(self.dsn, **kwargs) as conn:
            yield conn


def duration(value: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w``."""
    m = _DURATION_RE.match(value)
    if m is None:
        raise click.BadParameter(f"{value!r} is not a duration like 30d, 12h, 90m, 45s or 2w")
    return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> timedelta | None:
    return None if value is None else duration(value)


def _filters(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not key=value")
        if key in out:
            raise click.BadParameter(f"key {key!r} is given twice (each key takes one value)")
        try:
            out[key] = json.loads(raw)  # 3, true, null, "quoted", [..]
        except ValueError:
            out[key] = raw  # a bare word is a string
    return out


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(f)


def missing_ok_option(others: str) -> Callable[[F], F]:
    return click.option(
        "--missing-ok",
        is_flag=True,
        help="A given thread id that has no checkpoints is named in a warning and the command "
        f"goes on to {others}; without it, such an id fails the command (exit 1) and nothing "
        "changes.",
    )


def keys_options(f: F) -> F:
    """The KeyringSerializer of the commands that decode or reseal values."""
    f = click.option(
        "--keys-file",
        type=click.Path(exists=True, dir_okay=False),
        help="JSON {key_id: key} of a KeyringSerializer (keys as hex, or base64:...); "
        "else $LANGGRAPH_PG_KEYS holds the same JSON. The first is the current key.",
    )(f)
    f = click.option("--current", help="The key id new values are sealed with.")(f)
    f = click.option(
        "--no-strict", is_flag=True, help="Read values stored unencrypted (while converting)."
    )(f)
    return f


def _key_bytes(key_id: str, text: object) -> bytes:
    if not isinstance(text, str):
        raise Failure(f"key {key_id!r}: expected a string of hex or base64:..., not {text!r}")
    try:
        if text.startswith("base64:"):
            return base64.b64decode(text[7:], validate=True)
        return bytes.fromhex(text.removeprefix("hex:"))
    except (ValueError, binascii.Error):
        raise Failure(f"key {key_id!r} is neither hex nor base64:...") from None


def load_serde(
    keys_file: str | None, current: str | None, no_strict: bool
) -> KeyringSerializer | None:
    text: str | None
    if keys_file is not None:
        with open(keys_file, encoding="utf-8") as fh:
            text, where = fh.read(), keys_file
    else:
        text, where = os.environ.get("LANGGRAPH_PG_KEYS"), "$LANGGRAPH_PG_KEYS"
    if not text:
        return None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise Failure(f"{where} is not JSON ({exc})") from None
    if not isinstance(raw, dict) or not raw:
        raise Failure(f"{where} must be a JSON object of key ids to keys")
    keys = [(str(k), _key_bytes(str(k), v)) for k, v in raw.items()]
    try:
        return KeyringSerializer(keys, current=current, strict=not no_strict)
    except (TypeError, ValueError) as exc:
        raise Failure(f"{where}: {exc}") from None


# --------------------------------------------------------------------------- output


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=_json_default, ensure_ascii=False))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, (bytes, bytearray)):
        return {"bytes": len(obj)}
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    return repr(obj)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S%z")


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    for i, c in enumerate(columns):
        t.add_column(c, justify="right" if i and _numeric(rows, i) else "left", overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    # a terminal's width; piped or redirected, wide enough that ids do not wrap
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200).print(t)


def _numeric(rows: Sequence[Sequence[Any]], i: int) -> bool:
    return bool(rows) and all(isinstance(r[i], (int, float)) for r in rows if r[i] is not None)


def short_json(value: Any, width: int) -> str:
    text = json.dumps(value, default=_json_default, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def short(value: Any, width: int) -> str:
    text = repr(value)
    if width and len(text) > width:
        return text[: width - 1] + f"… ({len(text)} chars)"
    return text


# --------------------------------------------------------------------------- the group


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--dsn",
    help="Postgres connection string; default $LANGGRAPH_PG_DSN, else libpq's PG* variables.",
)
@click.option(
    "--schema",
    default=lambda: os.environ.get("LANGGRAPH_PG_SCHEMA", DEFAULT_SCHEMA),
    show_default="public, or $LANGGRAPH_PG_SCHEMA",
    help="The schema of the saver's tables.",
)
@click.option("-v", "--verbose", is_flag=True, help="On failure, print the chain of causes.")
@click.version_option(package_name="langgraph-pg-saver")
@click.pass_context
def main_group(ctx: click.Context, dsn: str | None, schema: str, verbose: bool) -> None:
    """Operate a langgraph-pg-saver database: schema, health, growth, threads, lifecycle.

    The options here (--dsn, --schema, -v) go before the command:
    langgraph-pg-saver --dsn postgresql://... status
    """
    ctx.obj = Ctx(dsn, schema, verbose)


pass_ctx = click.make_pass_decorator(Ctx)


# --------------------------------------------------------------------------- setup


@main_group.command()
@click.option("--check", is_flag=True, help="Change nothing; exit 1 naming what is missing.")
@click.option("--sql", "print_sql", is_flag=True, help="Print the DDL; connect to nothing.")
@click.option(
    "--from",
    "after",
    type=int,
    default=0,
    show_default=True,
    help="With --sql: only migrations after this version.",
)
@json_option
@pass_ctx
def setup(c: Ctx, check: bool, print_sql: bool, after: int, as_json: bool) -> None:
    """Apply the schema's migrations (safe from many workers at once)."""
    if print_sql:
        if check or as_json:
            raise click.UsageError("--sql prints the DDL; it does not go with --check or --json")
        try:
            queries_for(c.schema)
        except InvalidSchemaNameError as exc:
            raise click.BadParameter(str(exc), param_hint="--schema") from None
        try:
            click.echo(_migrate.script(c.schema, after=after), nl=False)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--from") from None
        return
    if after:
        raise click.UsageError("--from goes with --sql")
    head = _migrate.head()
    try:
        with c.saver(check=False) as saver:
            saver.setup(check=check)
    except SchemaOutdatedError as exc:
        if as_json:
            emit_json(
                {
                    "schema": c.schema,
                    "current": False,
                    "applied": list(exc.applied),
                    "missing": list(exc.missing),
                }
            )
            sys.exit(1)
        raise
    if as_json:
        emit_json(
            {
                "schema": c.schema,
                "current": True,
                "applied": list(range(1, head + 1)),
                "missing": [],
            }
        )
    else:
        click.echo(
            f"schema {c.schema!r} is current (migration {head})"
            if check
            else f"schema {c.schema!r} is set up (migration {head})"
        )


# --------------------------------------------------------------------------- doctor


class Doctor:
    def __init__(self) -> None:
        self.lines: list[dict[str, str]] = []

    def add(self, check: str, status: str, detail: str, fix: str = "") -> None:
        self.lines.append({"check": check, "status": status, "detail": detail, "fix": fix})

    @property
    def failed(self) -> bool:
        return any(line["status"] == "FAIL" for line in self.lines)


@main_group.command()
@json_option
@pass_ctx
def doctor(c: Ctx, as_json: bool) -> None:
    """Check the connection, server, schema, pooler, privileges and tables; exit 1 on a FAIL."""
    doc = Doctor()
    q = queries_for(c.schema)
    try:
        with c.connect() as conn:
            _doctor_checks(doc, conn, q, c.schema)
    except psycopg.OperationalError as exc:
        doc.add(
            "connection",
            "FAIL",
            one_line(exc),
            "check --dsn / $LANGGRAPH_PG_DSN, the server, the network and the password",
        )
    except InvalidSchemaNameError as exc:
        doc.add("schema", "FAIL", one_line(exc), "pass a plain schema name to --schema")
    except psycopg.Error as exc:  # a check that could not run is a failure, reported like one
        doc.add("doctor", "FAIL", one_line(exc), "run with the role the application uses")
    if as_json:
        emit_json({"ok": not doc.failed, "checks": doc.lines})
    else:
        colour = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
        for line in doc.lines:
            mark = click.style(f"{line['status']:<4}", fg=colour[line["status"]], bold=True)
            click.echo(f"{mark} {line['check']}: {line['detail']}")
            if line["fix"]:
                click.echo(f"     fix: {line['fix']}")
    if doc.failed:
        sys.exit(1)


def _doctor_checks(doc: Doctor, conn: psycopg.Connection[Any], q: Any, schema: str) -> None:
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        conn.execute("SELECT 1").fetchone()
        times.append(time.perf_counter() - t0)
    info = conn.info
    doc.add(
        "connection",
        "OK",
        f"{info.host}:{info.port}/{info.dbname} as {info.user}, round trip "
        f"{statistics.median(times) * 1000:.2f} ms",
    )
    version, version_num, jit, toast, has_lz4, role = one(conn, q["ops_settings"])
    doc.add(
        "server",
        "OK" if version_num >= 130000 else "WARN",
        f"PostgreSQL {version}",
        "" if version_num >= 130000 else "PostgreSQL 13 or newer is supported",
    )
    # schema
    applied: dict[int, bool] = {}
    schema_there = bool(one(conn, q["schema_exists"], {"schema": schema})[0])
    if not schema_there:
        doc.add(
            "schema",
            "FAIL",
            f"schema {schema!r} does not exist",
            f"langgraph-pg-saver --schema {schema} setup (or pass the right --schema)",
        )
        return
    try:
        if _has_tables(conn, q):
            applied = _migrate.applied_from_rows(conn.execute(q["migrations_applied"]).fetchall())
    except psycopg.errors.InsufficientPrivilege as exc:
        doc.add(
            "schema",
            "FAIL",
            f"cannot read the schema's version: {one_line(exc)}",
            "docs/guide.md 'Roles without DDL rights': GRANT SELECT ON pgsaver_migrations (and the tables)",
        )
        _privileges(doc, conn, q, schema, role)
        return
    head = _migrate.head()
    try:
        todo = _migrate.pending(schema, applied)
    except PgSaverError as exc:
        doc.add("schema", "FAIL", one_line(exc), "upgrade langgraph-pg-saver")
        todo = ()
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
                f"at migration {max(applied)}, missing {[m.version for m in todo]}",
                f"langgraph-pg-saver --schema {schema} setup (with a role that may create tables)",
            )
        else:
            doc.add("schema", "OK", f"{schema!r} at migration {max(applied)} (current: {head})")
    # pooler
    server_pid = one(conn, q["backend_pid"])[0]
    if server_pid == info.backend_pid:
        doc.add("pooler", "OK", "direct connection: hot-path statements are prepared after 5 uses")
    else:
        works = _prepared_probe(conn)
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
    if not _privileges(doc, conn, q, schema, role) or not applied:
        return
    tables = {r[0]: r for r in conn.execute(q["ops_tables"], {"schema": schema}).fetchall()}
    # lz4
    if not has_lz4:
        doc.add("compression", "OK", "this server has no lz4; values are compressed with pglz")
    else:
        cols = conn.execute(q["ops_compression"], {"schema": schema}).fetchall()
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
    # jit
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
    # bloat
    bloated = []
    for name, (_, _, total, _, live, dead, _) in tables.items():
        if dead > 10_000 and dead > 0.2 * (live + dead):
            bloated.append(f"{name}: {dead:,} dead of {live + dead:,} rows ({human_bytes(total)})")
    if bloated:
        doc.add(
            "bloat",
            "WARN",
            "; ".join(bloated),
            "VACUUM (ANALYZE) the tables, and check that autovacuum keeps up after prune jobs",
        )
    elif tables:
        doc.add("bloat", "OK", "dead rows under 20% in every table")


def _privileges(doc: Doctor, conn: psycopg.Connection[Any], q: Any, schema: str, role: str) -> bool:
    missing = conn.execute(q["missing_privileges"], {"schema": schema}).fetchall()
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


def _prepared_probe(conn: psycopg.Connection[Any]) -> bool:
    """Whether protocol-level prepared statements survive from one transaction to the next."""
    try:
        with conn.cursor() as cur:
            for _ in range(3):
                cur.execute("SELECT 1 AS lgps_probe", prepare=True)
        return True
    except psycopg.Error:
        return False


# --------------------------------------------------------------------------- status


@main_group.command()
@click.option(
    "--top",
    default=10,
    show_default=True,
    type=click.IntRange(min=0),
    help="Threads to list by bytes and by checkpoints (0: none).",
)
@json_option
@pass_ctx
def status(c: Ctx, top: int, as_json: bool) -> None:
    """Schema version, tables, threads, the oldest and newest checkpoint, the largest threads."""
    q = queries_for(c.schema)
    with c.connect() as conn:
        applied = _applied(conn, q, c.schema)
        tables = conn.execute(q["ops_tables"], {"schema": c.schema}).fetchall()
        threads, checkpoints, writes, blobs, oldest, newest = one(conn, q["ops_counts"])
        items = (
            one(conn, q["ops_store_count"])[0]
            if any(t[0] == "pgsaver_store" for t in tables)
            else None
        )
        by_bytes = _threads(conn, q, None, None, top, "bytes") if top else []
        by_count = _threads(conn, q, None, None, top, "checkpoints") if top else []
    exact = {
        "pgsaver_checkpoints": checkpoints,
        "pgsaver_writes": writes,
        "pgsaver_blobs": blobs,
        "pgsaver_store": items,
        "pgsaver_migrations": len(applied),
    }
    data = {
        "schema": c.schema,
        "migration": max(applied) if applied else None,
        "current_migration": _migrate.head(),
        "tables": [
            {
                "table": t[0],
                "rows": exact.get(t[0], t[1]),
                "bytes": t[2],
                "dead_rows": t[5],
            }
            for t in tables
        ],
        "threads": threads,
        "checkpoints": checkpoints,
        "writes": writes,
        "blobs": blobs,
        "oldest_checkpoint": oldest,
        "newest_checkpoint": newest,
        "top_by_bytes": by_bytes,
        "top_by_checkpoints": by_count,
    }
    if as_json:
        emit_json(data)
        return
    click.echo(
        f"schema {c.schema!r}: migration {data['migration']} (current {data['current_migration']})"
    )
    click.echo(
        f"{threads:,} threads, {checkpoints:,} checkpoints, {writes:,} writes, {blobs:,} blobs; "
        f"oldest {_when(oldest)}, newest {_when(newest)}"
    )
    table(
        "tables",
        ["table", "rows", "size", "dead rows"],
        [(t[0], exact.get(t[0], t[1]), human_bytes(t[2]), t[5]) for t in tables],
    )
    for title, rows in (("largest threads", by_bytes), ("longest threads", by_count)):
        if rows:
            table(title, *_thread_table(rows))


def _applied(conn: psycopg.Connection[Any], q: Any, schema: str) -> dict[int, bool]:
    if not _has_tables(conn, q):
        raise Failure(
            f"schema {schema!r} has no langgraph-pg-saver tables: run `langgraph-pg-saver "
            f"--schema {schema} setup`, or pass the right --schema / --dsn"
        )
    return _migrate.applied_from_rows(conn.execute(q["migrations_applied"]).fetchall())


def one(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> tuple[Any, ...]:
    row = conn.execute(query, params).fetchone()
    if row is None:  # every query given here returns one row
        raise Failure("the server returned no row")
    return tuple(row)


def _has_tables(conn: psycopg.Connection[Any], q: Any) -> bool:
    regclass = f"{q.schema_sql}.pgsaver_migrations"
    return bool(one(conn, "SELECT to_regclass(%s) IS NOT NULL", (regclass,))[0])


def _threads(
    conn: psycopg.Connection[Any],
    q: Any,
    flt: Mapping[str, Any] | None,
    idle_for: timedelta | None,
    limit: int | None,
    order: str,
) -> list[dict[str, Any]]:
    rows = conn.execute(
        q["ops_threads"],
        {
            "filter": json.dumps(flt) if flt else None,
            "idle_for": idle_for,
            "limit": limit,
            "order": order,
        },
    ).fetchall()
    return [
        {"thread_id": r[0], "checkpoints": r[1], "bytes": int(r[2]), "last_activity": r[3]}
        for r in rows
    ]


def _thread_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[tuple[Any, ...]]]:
    return (
        ["thread", "checkpoints", "size", "last activity"],
        [
            (r["thread_id"], r["checkpoints"], human_bytes(r["bytes"]), _when(r["last_activity"]))
            for r in rows
        ],
    )


# --------------------------------------------------------------------------- threads, history, show


@main_group.command()
@click.option(
    "--filter",
    "flt",
    multiple=True,
    callback=_filters,
    metavar="KEY=VALUE",
    help="Threads with a checkpoint whose metadata holds KEY=VALUE (VALUE as JSON, else text).",
)
@click.option(
    "--idle-for",
    callback=_duration,
    help="Only threads idle longer than this: a number and s, m, h, d or w (30d).",
)
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(min=0),
    help="At most this many threads (0: all).",
)
@click.option(
    "--sort",
    type=click.Choice(["activity", "bytes", "checkpoints"]),
    default="activity",
    show_default=True,
    help="Newest activity first, or the largest, or the longest threads first.",
)
@json_option
@pass_ctx
def threads(
    c: Ctx,
    flt: dict[str, Any],
    idle_for: timedelta | None,
    limit: int,
    sort: str,
    as_json: bool,
) -> None:
    """Threads with their last activity, checkpoints and bytes."""
    q = queries_for(c.schema)
    with c.connect() as conn:
        _applied(conn, q, c.schema)
        rows = _threads(conn, q, flt or None, idle_for, limit + 1 if limit else None, sort)
    more = bool(limit) and len(rows) > limit
    rows = rows[:limit] if limit else rows
    if as_json:
        emit_json(rows)
    else:
        table(None, *_thread_table(rows))
        if more:
            click.echo(f"(more threads match: --limit {limit * 10} or --limit 0 for all)", err=True)


def next_nodes(checkpoint: Mapping[str, Any]) -> list[str]:
    """The nodes a checkpoint schedules next, as LangGraph decides for a StateGraph: a trigger
    channel (``branch:to:<node>``, or ``__start__`` for the input) that holds a value newer than
    what its node has seen."""
    versions = checkpoint.get("channel_versions") or {}
    values = checkpoint.get("channel_values") or {}
    seen = checkpoint.get("versions_seen") or {}
    out = []
    for channel, version in versions.items():
        if channel == "__start__":
            node = channel
        elif isinstance(channel, str) and channel.startswith("branch:to:"):
            node = channel[len("branch:to:") :]
        else:
            continue
        if channel not in values:  # consumed
            continue
        before = (seen.get(node) or {}).get(channel)
        if before is None or _newer(version, before):
            out.append(node)
    return sorted(out)


def _newer(a: Any, b: Any) -> bool:
    try:
        return bool(a > b)
    except TypeError:
        return str(a) > str(b)


@main_group.command()
@click.argument("thread_id")
@click.option("--ns", "checkpoint_ns", default=None, help="Only this namespace ('' = the root).")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(min=0),
    help="Newest N checkpoints (0: all).",
)
@keys_options
@json_option
@pass_ctx
def history(
    c: Ctx,
    thread_id: str,
    checkpoint_ns: str | None,
    limit: int,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
    as_json: bool,
) -> None:
    """A thread's checkpoints, newest first: step, source, run id, next nodes, writes, metadata."""
    c.serde = load_serde(keys_file, current, no_strict)
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if checkpoint_ns is not None:
        configurable["checkpoint_ns"] = checkpoint_ns
    with c.saver() as saver:
        found = list(saver.list({"configurable": configurable}, limit=limit or None))
    if not found:
        raise Failure(f"thread {thread_id!r} has no checkpoints")
    # the run id delete-runs takes, as stored (a top-level config run id is not in the metadata)
    q = queries_for(c.schema)
    with c.connect() as conn:
        found_runs = conn.execute(q["ops_run_ids"], {"thread_id": thread_id}).fetchall()
    runs = {(ns, cid): run for ns, cid, run in found_runs}
    rows = []
    for t in found:
        meta = dict(t.metadata or {})
        key = (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"])
        rows.append(
            {
                "checkpoint_id": t.config["configurable"]["checkpoint_id"],
                "checkpoint_ns": t.config["configurable"]["checkpoint_ns"],
                "run_id": runs.get(key),
                "parent_checkpoint_id": (t.parent_config or {})
                .get("configurable", {})
                .get("checkpoint_id"),
                "step": meta.pop("step", None),
                "source": meta.pop("source", None),
                "next": next_nodes(t.checkpoint),
                "writes": [[task, channel] for task, channel, _ in t.pending_writes or ()],
                "metadata": meta,
            }
        )
    if as_json:
        emit_json(rows)
        return
    table(
        f"thread {thread_id!r}",
        ["checkpoint", "ns", "step", "source", "run", "next", "writes", "metadata"],
        [
            (
                r["checkpoint_id"],
                r["checkpoint_ns"],
                r["step"],
                r["source"],
                r["run_id"] or "",
                ", ".join(r["next"]),
                ", ".join(sorted({ch for _, ch in r["writes"] if not ch.startswith("branch:")})),
                short_json({k: v for k, v in r["metadata"].items() if k != "parents"}, 80),
            )
            for r in rows
        ],
    )


@main_group.command()
@click.argument("thread_id")
@click.option("--checkpoint", "checkpoint_id", help="This checkpoint (default: the newest).")
@click.option("--ns", "checkpoint_ns", default="", help="The namespace ('' = the root).")
@click.option("--all", "show_all", is_flag=True, help="Also LangGraph's internal channels.")
@click.option(
    "--width",
    default=SHOW_WIDTH,
    show_default=True,
    type=click.IntRange(min=0),
    help="Cut each value to this many characters (0: never).",
)
@keys_options
@json_option
@pass_ctx
def show(
    c: Ctx,
    thread_id: str,
    checkpoint_id: str | None,
    checkpoint_ns: str,
    show_all: bool,
    width: int,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
    as_json: bool,
) -> None:
    """A checkpoint's channel values, decoded with the serializer."""
    c.serde = load_serde(keys_file, current, no_strict)
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    with c.saver() as saver:
        tup = saver.get_tuple({"configurable": configurable})
        if tup is None:
            where = f"checkpoint {checkpoint_id!r} of " if checkpoint_id else ""
            raise Failure(f"{where}thread {thread_id!r} (namespace {checkpoint_ns!r}) not found")
        values, delta = _state_values(saver, tup, show_all)
    cid = tup.config["configurable"]["checkpoint_id"]
    if as_json:
        emit_json(
            {
                "checkpoint_id": cid,
                "metadata": tup.metadata,
                "next": next_nodes(tup.checkpoint),
                "values": values,
                "delta_channels": delta,
                "pending_writes": [list(w) for w in tup.pending_writes or ()],
            }
        )
        return
    meta = tup.metadata or {}
    click.echo(
        f"thread {thread_id!r} checkpoint {cid} (step {meta.get('step')}, "
        f"{meta.get('source')}); next: {', '.join(next_nodes(tup.checkpoint)) or '-'}"
    )
    rows = [(k, short(v, width)) for k, v in values.items()]
    for k, d in delta.items():
        rows.append(
            (
                k,
                f"DeltaChannel, rebuilt by the graph's reducer from its seed "
                f"{short(d['seed'], width // 2)} and {len(d['writes'])} writes since",
            )
        )
    table(None, ["channel", "value"], rows)
    if tup.pending_writes:
        table(
            "pending writes",
            ["task", "channel", "value"],
            [(t, ch, short(v, width)) for t, ch, v in tup.pending_writes],
        )


def _state_values(
    saver: PostgresSaver, tup: Any, show_all: bool
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A checkpoint's channel values as stored (a DeltaChannel snapshot unwrapped), and, for each
    DeltaChannel whose value is not stored at it, its seed and the writes since (LangGraph
    rebuilds the value with the channel's reducer, which lives in the graph's code)."""
    values: dict[str, Any] = {}
    for k, v in tup.checkpoint["channel_values"].items():
        if show_all or not (k.startswith("branch:") or k.startswith("__")):
            values[k] = getattr(v, "value", v) if type(v).__name__ == "_DeltaSnapshot" else v
    counters = (tup.metadata or {}).get("counters_since_delta_snapshot") or {}
    versions = tup.checkpoint.get("channel_versions") or {}
    rebuilt = [c for c in counters if c in versions and c not in values]
    delta: dict[str, dict[str, Any]] = {}
    if rebuilt:
        history = saver.get_delta_channel_history(config=tup.config, channels=rebuilt)
        for channel, entry in history.items():
            seed = entry.get("seed")
            delta[channel] = {
                "seed": getattr(seed, "value", seed),
                "writes": [value for _, _, value in entry["writes"]],
            }
    return values, delta


# --------------------------------------------------------------------------- prune


@main_group.command()
@click.option("--thread", "thread_ids", multiple=True, help="Only this thread (repeatable).")
@click.option(
    "--idle-for",
    callback=_duration,
    help="Delete threads idle longer than this, whole: a number and s, m, h, d or w (30d).",
)
@click.option("--keep-last", type=click.IntRange(min=1), help="Keep the newest N checkpoints.")
@click.option(
    "--strategy",
    type=click.Choice(["keep_latest", "delete"]),
    help="keep_latest: --keep-last 1; delete: the --thread threads, whole.",
)
@click.option(
    "--batch-size",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="At most this many checkpoints deleted per transaction.",
)
@click.option(
    "--thread-batch",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="Threads handled per step (the unit of progress and of resuming).",
)
@click.option("--start-after", default="", help="Resume after this thread id.")
@click.option("--dry-run", is_flag=True, help="Report what would go; delete nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@missing_ok_option("prune the others")
@json_option
@pass_ctx
def prune(
    c: Ctx,
    thread_ids: tuple[str, ...],
    idle_for: timedelta | None,
    keep_last: int | None,
    strategy: str | None,
    batch_size: int,
    thread_batch: int,
    start_after: str,
    dry_run: bool,
    yes: bool,
    missing_ok: bool,
    as_json: bool,
) -> None:
    """Bound growth: keep the newest N checkpoints (DeltaChannel ancestry kept) and/or delete
    idle threads, in short batches. Interrupted, it prints how to resume; rerunning continues.
    A --thread that has no checkpoints fails the command (exit 1) before anything is removed,
    unless --missing-ok."""
    if strategy == "keep_latest":
        if keep_last not in (None, 1):
            raise click.UsageError("--strategy keep_latest is --keep-last 1")
        keep_last = 1
    if strategy == "delete":
        if not thread_ids or keep_last or idle_for:
            raise click.UsageError(
                "--strategy delete deletes the --thread threads whole; use --idle-for to delete "
                "idle ones"
            )
    elif keep_last is None and idle_for is None:
        raise click.UsageError("say what to prune: --keep-last N, --idle-for 30d, or --strategy")
    if idle_for is not None and idle_for <= timedelta(0):
        raise click.BadParameter("must be longer than 0", param_hint="--idle-for")
    with c.saver() as saver:
        if strategy == "delete":

            def run(dry: bool, progress: Callable[[Report], None] | None) -> Report:
                return saver.prune(list(thread_ids), strategy="delete", dry_run=dry)

        else:

            def run(dry: bool, progress: Callable[[Report], None] | None) -> Report:
                return saver.retention(
                    keep_last=keep_last,
                    idle_for=idle_for,
                    thread_ids=list(thread_ids) or None,
                    dry_run=dry,
                    thread_batch=thread_batch,
                    batch=batch_size,
                    start_after=start_after,
                    progress=progress,
                )

        asks = _asks(yes)
        # with --thread, always: an unknown id is refused before anything is removed
        plan = run(True, None) if dry_run or asks or thread_ids else None
        if plan is not None and dry_run:
            _print_report(plan, as_json, "would remove")
            _name_missing(plan, missing_ok, _WOULD_REFUSE)
            return
        if plan is not None and plan.missing and not missing_ok:
            _refuse(plan, as_json, _NOTHING_DELETED.format("removed"))
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
        if plan is not None and asks:
            _show_plan(plan, "would remove")
            if not plan.checkpoints and not plan.threads:
                click.echo("nothing to remove", err=True)
                return
            click.confirm("Remove these?", abort=True, err=True)
        # the bar counts the threads the job walks: not the ids skipped as unknown
        known = [t for t in thread_ids if plan is None or t not in plan.missing]
        total = (
            _total_threads(c, known if thread_ids else None, start_after) if interactive else None
        )
        done = _Progress(interactive, total, thread_batch)
        try:
            report = run(False, done.update)
        except KeyboardInterrupt:
            done.close()
            last = done.last.last_thread_id if done.last else None
            hint = _resume_hint(last)
            click.echo(
                f"interrupted: {done.calls} thread batches committed, nothing half-done (values an "
                f"interrupted batch left unreferenced go with the next run). {hint}",
                err=True,
            )
            sys.exit(130)
        done.close()
        _print_report(report, as_json, "removed")
        _name_missing(report, missing_ok, "")


def _total_threads(c: Ctx, thread_ids: list[str] | None, start_after: str) -> int:
    """The threads a prune will walk (of ``thread_ids``, or of all): the progress bar's total."""
    if thread_ids is not None:
        return len([t for t in set(thread_ids) if t > start_after])
    q = queries_for(c.schema)
    with c.connect() as conn:
        return int(one(conn, q["ops_thread_count"], {"after": start_after})[0])


def _resume_hint(last: str | None) -> str:
    if last is None:
        return "Run the same command again."
    args = _masked(sys.argv[1:])
    for i, a in enumerate(args):
        if a == "--start-after" and i + 1 < len(args):
            del args[i : i + 2]
            break
        if a.startswith("--start-after="):
            del args[i]
            break
    quoted = " ".join(_shell_quote(a) for a in args)
    return (
        f"Resume with: langgraph-pg-saver {quoted} --start-after {_shell_quote(last)} "
        "(or run the same command again: what is done is found done)"
    )


def _masked(argv: Sequence[str]) -> list[str]:
    """The arguments with a --dsn's password hidden (the hint may go to a log)."""
    out = list(argv)
    for i, a in enumerate(out):
        if a == "--dsn" and i + 1 < len(out):
            out[i + 1] = _mask_dsn(out[i + 1])
        elif a.startswith("--dsn="):
            out[i] = "--dsn=" + _mask_dsn(a[6:])
    return out


def _mask_dsn(dsn: str) -> str:
    return mask_dsn(dsn, unreadable="'<the same DSN>'")


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


class _Progress:
    """A rich progress bar on a terminal; plain log lines on stderr otherwise."""

    def __init__(
        self,
        interactive: bool,
        total: int | None,
        thread_batch: int,
        label: str = "prune",
        verb: str = "removed",
    ) -> None:
        self.label, self.verb = label, verb
        self.last: Report | None = None
        self.thread_batch = thread_batch
        self.total = total
        self.calls = 0
        self.bar: Any = None
        if interactive:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn(f"[bold]{label}[/bold]"),
                BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} threads" if total else ""),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task("prune", total=total, info="")

    def update(self, report: Report) -> None:
        self.last = report
        self.calls += 1
        info = (
            f"so far {report.checkpoints:,} checkpoints, {report.writes:,} writes, "
            f"{report.blobs:,} blobs {self.verb}; last thread {report.last_thread_id!r}"
        )
        if self.bar is not None:
            walked = self.calls * self.thread_batch
            if self.total is not None:
                walked = min(walked, self.total)
            self.bar.update(self.task, completed=walked, info=info)
        else:
            click.echo(f"{self.label}: thread batch {self.calls} done; {info}", err=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _print_report(report: Report, as_json: bool, verb: str, *, err: bool = False) -> None:
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(
        f"{verb} {_plural(report.checkpoints, 'checkpoint')}, {_plural(report.writes, 'write')}, "
        f"{_plural(report.blobs, 'blob')}"
        + (f" ({human_bytes(report.bytes)})" if report.bytes else "")
        + f" of {_plural(report.threads, 'thread')}",
        err=err,
    )


# --------------------------------------------------------------------------- destructive commands
# Each shows its plan (a dry run's counts) and asks on a terminal (stdin) unless --yes, and has
# --dry-run. A thread id that has no checkpoints is named on stderr and fails the command (exit 1)
# before anything changes, unless --missing-ok (delete-thread, prune --thread): then the threads
# that exist are processed and the unknown ids named in a warning. --json output is the report
# (the plan's, with "dry_run": true, when nothing was done), "missing" included.

#: what a dry run adds after naming an unknown id (without --missing-ok, the run would refuse)
_WOULD_REFUSE = ": the command would change nothing (or pass --missing-ok)"


def _asks(yes: bool) -> bool:
    """Whether a destructive command asks before it acts: stdin is a terminal, and no --yes."""
    return not yes and sys.stdin.isatty()


def _no_checkpoints(ids: Sequence[str]) -> str:
    names = ", ".join(repr(t) for t in ids)
    return (
        f"thread {names} has no checkpoints"
        if len(ids) == 1
        else f"threads {names} have no checkpoints"
    )


def _name_missing(
    report: Report,
    missing_ok: bool,
    consequence: str,
    describe: Callable[[list[str]], str] = _no_checkpoints,
) -> None:
    """Name on stderr the ids of ``report.missing`` (thread ids; run ids with ``describe=
    _no_such_runs``): a warning with ``missing_ok``, else an error (exit 1) followed by
    ``consequence``."""
    if not report.missing:
        return
    if missing_ok:
        click.echo(f"warning: {describe(report.missing)} (skipped)", err=True)
        return
    click.echo(f"error: {describe(report.missing)}{consequence}", err=True)
    sys.exit(1)


def _refuse(plan: Report, as_json: bool, consequence: str) -> NoReturn:
    """Unknown ids, refused before anything changed: the plan (with --json), the ids named on
    stderr, exit 1."""
    if as_json:
        emit_json(plan.as_dict())
    click.echo(f"error: {_no_checkpoints(plan.missing)}{consequence}", err=True)
    sys.exit(1)


#: what a refusal says where --missing-ok would go on
_NOTHING_DELETED = ": nothing was {} (pass --missing-ok to go on with the others)"


def _show_plan(plan: Report, verb: str) -> None:
    """The plan on stderr, before the question."""
    _print_report(plan, False, verb, err=True)
    if plan.missing:
        click.echo(f"  {_no_checkpoints(plan.missing)}: skipped", err=True)


# --------------------------------------------------------------------------- copy, delete


@main_group.command("copy-thread")
@click.argument("source")
@click.argument("target")
@click.option(
    "--overwrite", is_flag=True, help="Replace the target's checkpoints (asks on a terminal)."
)
@click.option(
    "--dry-run", is_flag=True, help="Show what would be copied (and replaced); change nothing."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@json_option
@keys_options
@pass_ctx
def copy_thread(
    c: Ctx,
    source: str,
    target: str,
    overwrite: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
) -> None:
    """Copy a thread (every namespace, ids kept) into TARGET. A SOURCE that has no checkpoints
    fails the command (exit 1), changing nothing."""
    c.serde = load_serde(keys_file, current, no_strict)
    occupied = f"thread {target!r} already has checkpoints: pass --overwrite to replace them"
    with c.saver() as saver:
        # the plan: what the copy takes from SOURCE, and what --overwrite deletes of TARGET
        plan = saver.prune([source], strategy="delete", dry_run=True)
        replaced = saver.prune([target], strategy="delete", dry_run=True)
        replaced.missing = []  # an empty target is what a copy wants
        if plan.missing:
            if as_json:
                emit_json({**plan.as_dict(), "replaced": replaced.as_dict()})
            _refuse(plan, False, ": nothing was copied")
        if replaced.checkpoints and not overwrite:
            raise Failure(occupied)
        if dry_run:
            _print_copy(source, target, plan, replaced, as_json, err=False)
            return
        if replaced.checkpoints and _asks(yes):
            _print_copy(source, target, plan, replaced, False, err=True)
            click.confirm(f"Replace thread {target!r}?", abort=True, err=True)
        try:
            report = saver.copy_thread(source, target, overwrite=overwrite)
        except ThreadNotEmptyError:
            raise Failure(occupied) from None
    if as_json:
        emit_json(report.as_dict())
    else:
        click.echo(
            f"copied {source!r} to {target!r}: {report.checkpoints:,} checkpoints, "
            f"{report.writes:,} writes, {report.blobs:,} blobs"
        )
    # the source went between the plan and the copy
    _name_missing(report, False, ": nothing was copied")


def _print_copy(
    source: str, target: str, plan: Report, replaced: Report, as_json: bool, *, err: bool
) -> None:
    if as_json:
        emit_json({**plan.as_dict(), "replaced": replaced.as_dict()})
        return
    if replaced.checkpoints:
        _print_report(replaced, False, f"would replace {target!r}: delete", err=err)
    click.echo(
        f"would copy {source!r} to {target!r}: {plan.checkpoints:,} checkpoints, "
        f"{plan.writes:,} writes, {plan.blobs:,} blobs",
        err=err,
    )


@main_group.command("delete-thread")
@click.argument("thread_ids", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@missing_ok_option("delete the others")
@json_option
@pass_ctx
def delete_thread(
    c: Ctx, thread_ids: tuple[str, ...], dry_run: bool, yes: bool, missing_ok: bool, as_json: bool
) -> None:
    """Delete threads whole. An id that has no checkpoints fails the command (exit 1) and
    nothing is deleted, unless --missing-ok."""
    ids = list(thread_ids)
    with c.saver() as saver:
        plan = saver.prune(ids, strategy="delete", dry_run=True)
        if dry_run:
            _print_report(plan, as_json, "would delete")
            _name_missing(plan, missing_ok, _WOULD_REFUSE)
            return
        if plan.missing and not missing_ok:
            _refuse(plan, as_json, _NOTHING_DELETED.format("deleted"))
        if _asks(yes):
            _show_plan(plan, "would delete")
            if not plan.threads:
                click.echo("nothing to delete", err=True)
                return
            click.confirm("Delete these threads?", abort=True, err=True)
        report = saver.prune(ids, strategy="delete")
    _print_report(report, as_json, "deleted")
    _name_missing(report, missing_ok, "")


@main_group.command("delete-runs")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@click.option(
    "--missing-ok",
    is_flag=True,
    help="A given run id that matches no checkpoint and no write is named in a warning and the "
    "command goes on to delete the others; without it, such an id fails the command (exit 1) and "
    "nothing changes.",
)
@json_option
@pass_ctx
def delete_runs(
    c: Ctx, run_ids: tuple[str, ...], dry_run: bool, yes: bool, missing_ok: bool, as_json: bool
) -> None:
    """Delete every row these runs wrote: their checkpoints, their writes wherever LangGraph
    stored them, and the values only those checkpoints referenced. An id that matches nothing
    fails the command (exit 1) and nothing is deleted, unless --missing-ok; so does a delete that
    would change a checkpoint that stays (its DeltaChannels are rebuilt from these runs, or their
    rows cannot be told from another run's)."""
    ids = list(run_ids)
    with c.saver() as saver:
        # the plan first, always: it names the unknown ids, and raises the refusal the delete
        # would, before anything is deleted
        plan = saver.delete_for_runs(ids, dry_run=True)
        if dry_run:
            _print_report(plan, as_json, "would delete")
            _name_missing(plan, missing_ok, _WOULD_REFUSE, _no_such_runs)
            return
        if plan.missing and not missing_ok:
            if as_json:
                emit_json(plan.as_dict())
            _name_missing(plan, False, _NOTHING_DELETED.format("deleted"), _no_such_runs)
        if _asks(yes):
            _print_report(plan, False, "would delete", err=True)
            if plan.missing:
                click.echo(f"  {_no_such_runs(plan.missing)}: skipped", err=True)
            if not plan.checkpoints and not plan.writes:
                click.echo("nothing to delete", err=True)
                return
            found = len(set(ids)) - len(plan.missing)
            click.confirm(f"Delete what {_plural(found, 'run')} wrote?", abort=True, err=True)
        report = saver.delete_for_runs(ids)
    _print_report(report, as_json, "deleted")
    _name_missing(report, missing_ok, "", _no_such_runs)


def _no_such_runs(ids: Sequence[str]) -> str:
    names = ", ".join(repr(r) for r in ids)
    if len(ids) == 1:
        return f"no such run: {names} (no checkpoint or write carries this run id)"
    return f"no such runs: {names} (no checkpoint or write carries these run ids)"


# --------------------------------------------------------------------------- import


@main_group.command("import-official")
@click.option(
    "--source-schema",
    default=DEFAULT_SCHEMA,
    show_default=True,
    help="The schema of langgraph-checkpoint-postgres's tables (checkpoints, ...).",
)
@click.option(
    "--thread-batch",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="Threads copied per transaction.",
)
@click.option("--start-after", default="", help="Resume after this thread id.")
@click.option("--dry-run", is_flag=True, help="Count what it would copy; write nothing.")
@click.option(
    "--reimport",
    "reimport",
    multiple=True,
    metavar="THREAD",
    help="Import this thread again whole, as if never imported (repeatable): brings back what "
    "was deleted or pruned here.",
)
@click.option(
    "--verify/--no-verify",
    default=True,
    show_default=True,
    help="Afterwards, compare every imported checkpoint held here with what the official saver "
    "reads.",
)
@click.option("--store", "with_store", is_flag=True, help="Also the official store's items.")
@json_option
@pass_ctx
def import_official(
    c: Ctx,
    source_schema: str,
    thread_batch: int,
    start_after: str,
    dry_run: bool,
    reimport: tuple[str, ...],
    verify: bool,
    with_store: bool,
    as_json: bool,
) -> None:
    """Copy the history of langgraph-checkpoint-postgres (same database) into our tables; run
    again, it copies only what is new there since, never what was pruned or deleted here. Then
    verify it."""
    progress = _Progress(False, None, thread_batch, "import", "copied")
    out: dict[str, Any] = {}
    with c.saver() as saver:
        try:
            report = saver.import_official(
                source_schema=source_schema,
                thread_batch=thread_batch,
                dry_run=dry_run,
                start_after=start_after,
                progress=progress.update,
                reimport=list(reimport),
            )
        except KeyboardInterrupt:
            last = progress.last.last_thread_id if progress.last else None
            click.echo(f"interrupted: nothing half-done. {_resume_hint(last)}", err=True)
            sys.exit(130)
        out["saver"] = report.as_dict()
        if verify and not dry_run:
            out["verify"] = _verify_import(c, saver, source_schema, start_after)
    if with_store and not dry_run:
        from langgraph_pg_saver.store.store import PostgresStore

        with PostgresStore.from_conn_string(c.dsn, schema=c.schema) as store:
            store.setup(check=True)
            out["store"] = store.import_official(source_schema=source_schema)
    if as_json:
        emit_json(out)
    else:
        _print_report(report, False, "would import" if dry_run else "imported")
        for line in _import_notes(report):
            click.echo(line)
        if "store" in out:
            click.echo(
                f"store: {out['store']['imported']:,} of {out['store']['items']:,} items imported"
            )
        if "verify" in out:
            v = out["verify"]
            click.echo(
                f"verified {_plural(v['checkpoints'], 'imported checkpoint')} held here, of "
                f"{_plural(v['threads'], 'thread')}: "
                + (
                    "every one reads the same"
                    if not v["different"]
                    else f"{len(v['different'])} differ: {', '.join(v['different'][:10])}"
                )
            )
    if report.missing:
        raise Failure(
            f"--reimport names threads the source does not hold: {', '.join(report.missing)}"
        )
    if out.get("verify", {}).get("different"):
        sys.exit(1)


def _import_notes(report: ImportReport) -> list[str]:
    """What an import left out, and why, one line each (nothing when there is nothing to say)."""
    lines = []
    if report.already_imported or report.unchanged_threads:
        lines.append(
            f"skipped as already imported: {_plural(report.already_imported, 'checkpoint')}; "
            f"{_plural(report.unchanged_threads, 'thread')} with nothing new in the source"
        )
    if report.deleted_threads:
        lines.append(
            f"skipped {_plural(report.deleted_threads, 'thread')} imported before and deleted "
            "here since (--reimport THREAD imports one again)"
        )
    if report.diverged:
        shown = ", ".join(report.diverged[:10]) + (", ..." if len(report.diverged) > 10 else "")
        lines.append(
            f"not copied, {_plural(len(report.diverged), 'thread')} changed on both sides or no "
            f"longer extending what was imported: {shown} (to take the source's version of one: "
            "delete-thread THREAD, then import-official --reimport THREAD)"
        )
    if report.untimed:
        lines.append(
            f"{_plural(report.untimed, 'checkpoint')} without a usable ts: created_at is the "
            "import's time"
        )
    if report.missing:
        lines.append(
            f"--reimport names threads the source does not hold: {', '.join(report.missing)}"
        )
    return lines


def _verify_import(
    c: Ctx, saver: PostgresSaver, source_schema: str, start_after: str
) -> dict[str, Any]:
    """Every checkpoint imported and still held here, as the official saver reads it and as we
    do: the same checkpoint, metadata, parent and pending writes (writes added here since aside),
    and the same DeltaChannel history at the newest of them in each namespace. Checkpoints
    pruned or deleted here, or written here, are not compared."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver
    except ImportError:
        raise Failure(
            "--verify reads the source with langgraph-checkpoint-postgres, which is not "
            "installed: pip install langgraph-checkpoint-postgres, or pass --no-verify"
        ) from None
    different: list[str] = []
    threads = compared = 0
    with psycopg.connect(c.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(source_schema)))
        official = OfficialSaver(conn)  # type: ignore[arg-type]
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id > %s ORDER BY 1",
                (start_after,),
            )
        ]
        for thread in ids:
            threads += 1
            cfg: Any = {"configurable": {"thread_id": thread}}
            theirs = {_key(t): t for t in official.list(cfg)}
            ours = {_key(t): t for t in saver.list(cfg)}
            held = sorted(set(theirs) & set(ours))
            compared += len(held)
            same = all(_same_checkpoint(theirs[k], ours[k]) for k in held)
            newest: dict[str, str] = {}
            for ns, cid in held:
                newest[ns] = max(cid, newest.get(ns, cid))
            for ns, cid in newest.items() if same else ():
                channels = sorted(
                    {
                        ch
                        for (n, _), t in theirs.items()
                        if n == ns
                        for ch in t.metadata.get("counters_since_delta_snapshot") or {}
                    }
                )
                if channels:
                    at: Any = {
                        "configurable": {
                            "thread_id": thread,
                            "checkpoint_ns": ns,
                            "checkpoint_id": cid,
                        }
                    }
                    same = official.get_delta_channel_history(
                        config=at, channels=channels
                    ) == saver.get_delta_channel_history(config=at, channels=channels)
                if not same:
                    break
            if not same:
                different.append(thread)
    return {"threads": threads, "checkpoints": compared, "different": different}


def _key(t: Any) -> tuple[str, str]:
    c = t.config["configurable"]
    return (c.get("checkpoint_ns", ""), c["checkpoint_id"])


def _same_checkpoint(theirs: Any, ours: Any) -> bool:
    """One checkpoint as both savers read it; our pending writes may hold more (written here
    since), theirs in the same order among them."""
    if (theirs.config, theirs.checkpoint, theirs.metadata, theirs.parent_config) != (
        ours.config,
        ours.checkpoint,
        ours.metadata,
        ours.parent_config,
    ):
        return False
    mine = iter(ours.pending_writes or [])
    return all(any(w == m for m in mine) for w in theirs.pending_writes or [])


# --------------------------------------------------------------------------- reencrypt


@main_group.command()
@click.option("--thread", "thread_id", help="Only this thread.")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(min=1))
@click.option("--full", is_flag=True, help="Seal everything again (plaintext_metadata changed).")
@click.option("--dry-run", is_flag=True, help="Count what would be sealed again; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal.")
@keys_options
@json_option
@pass_ctx
def reencrypt(
    c: Ctx,
    thread_id: str | None,
    batch_size: int,
    full: bool,
    dry_run: bool,
    yes: bool,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
    as_json: bool,
) -> None:
    """Seal every stored value with the current key (rotation; --no-strict: encrypt plaintext).
    A --thread that has no checkpoints fails the command (exit 1), changing nothing."""
    c.serde = load_serde(keys_file, current, no_strict)
    if c.serde is None:
        raise click.UsageError("reencrypt needs keys: --keys-file or $LANGGRAPH_PG_KEYS")
    progress = _Progress(False, None, 1, "reencrypt", "sealed again")
    with c.saver() as saver:
        if dry_run or _asks(yes):
            plan = saver.reencrypt(thread_id, full=full, dry_run=True)
            if dry_run:
                _print_report(plan, as_json, "would seal again")
                _name_missing(plan, False, ": nothing would be sealed again")
                return
            if plan.missing:
                _refuse(plan, as_json, ": nothing was sealed again")
            _show_plan(plan, "would seal again")
            if not (plan.checkpoints or plan.writes or plan.blobs):
                click.echo("nothing to seal again", err=True)
                return
            click.confirm("Seal these again?", abort=True, err=True)
        try:
            report = saver.reencrypt(
                thread_id, batch=batch_size, full=full, progress=progress.update
            )
        except KeyboardInterrupt:
            click.echo("interrupted: run the same command again to go on", err=True)
            sys.exit(130)
    _print_report(report, as_json, "sealed again")
    _name_missing(report, False, ": nothing was sealed again")


# --------------------------------------------------------------------------- entry point


def one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


#: API wording in error messages, as the CLI's options say it
_CLI_WORDS = (
    ("pass strict=False", "pass --no-strict"),
    ("Pass overwrite=True", "pass --overwrite"),
    ("Run setup() (or `langgraph-pg-saver setup`)", "Run `langgraph-pg-saver setup`"),
)


def fail(exc: BaseException, verbose: bool) -> NoReturn:
    text = one_line(exc)
    for api, cli_words in _CLI_WORDS:
        text = text.replace(api, cli_words)
    click.echo(f"error: {text}", err=True)
    if verbose:
        cause = exc.__cause__ or exc.__context__
        while cause is not None:
            click.echo(f"  caused by {type(cause).__name__}: {one_line(cause)}", err=True)
            cause = cause.__cause__ or cause.__context__
    sys.exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args
    try:
        main_group.main(args=args, prog_name="langgraph-pg-saver", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except (Failure, PgSaverError, psycopg.Error, OSError) as exc:
        fail(exc, verbose)


if __name__ == "__main__":  # pragma: no cover
    main()
