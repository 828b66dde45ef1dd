"""``setup``, ``status`` and ``doctor``: the schema, what the tables hold, and the checks."""

from __future__ import annotations

import sys
from datetime import timedelta

import click
import psycopg

from langgraph_pg_saver import ops
from langgraph_pg_saver.cli._common import (
    Ctx,
    emit_json,
    json_option,
    parse_duration,
    pass_ctx,
    short_json,
    table,
    thread_table,
    when,
)
from langgraph_pg_saver.db import migrate as _migrate
from langgraph_pg_saver.db.sql import queries_for
from langgraph_pg_saver.errors import InvalidSchemaNameError, SchemaOutdatedError
from langgraph_pg_saver.ops.reports import human_bytes


@click.command()
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
@click.option(
    "--local",
    is_flag=True,
    help="Leave the tables undistributed on a Citus database (setup(distribute=False)).",
)
@json_option
@pass_ctx
def setup(c: Ctx, check: bool, print_sql: bool, after: int, local: bool, as_json: bool) -> None:
    """Apply the schema's migrations (safe from many workers at once)."""
    if print_sql:
        if check or as_json:
            raise click.UsageError("--sql prints the DDL; it does not go with --check or --json")
        try:
            queries_for(c.schema)
        except InvalidSchemaNameError as exc:
            raise click.BadParameter(str(exc), param_hint="--schema") from None
        try:
            click.echo(_migrate.script(c.schema, after=after, distribute=not local), nl=False)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--from") from None
        return
    if after:
        raise click.UsageError("--from goes with --sql")
    head = _migrate.head()
    try:
        with c.saver(check=False) as saver:
            saver.setup(check=check, distribute=False if local else None)
            if not check and not local and saver._driver.find_citus():
                # the writes' estimate on every shard, also those a rebalance moved since
                # setup() distributed the schema (citus_shard_options; doctor's "citus shards")
                saver._driver.execute(saver._q["citus_shard_options"], {})
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


@click.command()
@json_option
@pass_ctx
def doctor(c: Ctx, as_json: bool) -> None:
    """Check the connection, server, schema, pooler, privileges and tables; exit 1 on a FAIL."""
    queries_for(c.schema)  # a name that is not a schema's fails the command before any check
    report = ops.DoctorReport()
    try:
        with c.saver(check=False) as saver:
            ops.doctor(saver, report)
    except psycopg.OperationalError as exc:
        report.add(
            "connection",
            "FAIL",
            ops.one_line(exc),
            "check --dsn / $LANGGRAPH_PG_DSN, the server, the network and the password",
        )
    except psycopg.Error as exc:  # a check that could not run is a failure, reported like one
        report.add("doctor", "FAIL", ops.one_line(exc), "run with the role the application uses")
    if as_json:
        emit_json(report.as_dict())
    else:
        colour = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
        for line in report.checks:
            mark = click.style(f"{line.status:<4}", fg=colour[line.status], bold=True)
            click.echo(f"{mark} {line.check}: {line.detail}")
            if line.fix:
                click.echo(f"     fix: {line.fix}")
    if not report.ok:
        sys.exit(1)


@click.command()
@click.option(
    "--top",
    default=10,
    show_default=True,
    type=click.IntRange(min=0),
    help="Threads to list by bytes and by checkpoints (0: none).",
)
@click.option(
    "--window",
    callback=parse_duration,
    default="14d",
    show_default=True,
    help="Growth over this last span (per hour up to 2d, else per day); 0s: none.",
)
@click.option(
    "--by",
    "by_key",
    metavar="KEY",
    help="Threads, checkpoints and bytes by the value of this metadata key (a tenant, a user).",
)
@click.option(
    "--prometheus",
    is_flag=True,
    help="Print the gauges in Prometheus's text format (for a textfile collector or a scrape).",
)
@json_option
@pass_ctx
def status(
    c: Ctx,
    top: int,
    window: timedelta,
    by_key: str | None,
    prometheus: bool,
    as_json: bool,
) -> None:
    """Schema version, tables, threads, the oldest and newest checkpoint, what was written per
    day (or hour), the largest threads; --by KEY: sizes by a metadata key."""
    if prometheus and as_json:
        raise click.UsageError("--prometheus and --json: give one")
    unit = "hour" if window <= timedelta(days=2) else "day"
    with c.saver(check=False) as saver:
        st = ops.status(saver, 0 if prometheus else top)
        if prometheus:
            from langgraph_pg_saver.ops import prometheus as exposition

            click.echo(exposition.render(st, exposition.recent(saver)), nl=False)
            return
        grown = ops.growth(saver, window, unit) if window > timedelta(0) else []
        sizes = ops.sizes_by(saver, by_key, None) if by_key else None
    if as_json:
        out = st.as_dict()
        out["growth"] = {"unit": unit, "rows": [r.as_dict() for r in grown]}
        if sizes is not None:
            out["by"] = {"key": by_key, "rows": [r.as_dict() for r in sizes]}
        emit_json(out)
        return
    click.echo(f"schema {c.schema!r}: migration {st.migration} (current {st.current_migration})")
    click.echo(
        f"{st.threads:,} threads, {st.checkpoints:,} checkpoints, {st.writes:,} writes, "
        f"{st.blobs:,} blobs; oldest {when(st.oldest_checkpoint)}, "
        f"newest {when(st.newest_checkpoint)}"
    )
    table(
        "tables",
        ["table", "rows", "size", "dead rows"],
        [(t.table, t.rows, human_bytes(t.bytes), t.dead_rows) for t in st.tables],
    )
    if grown:
        growth_chart(grown, unit)
    if sizes is not None:
        table(
            f"by {by_key}",
            [by_key or "", "threads", "checkpoints", "size"],
            [
                (
                    "(none)" if r.value is None else short_json(r.value, 40),
                    r.threads,
                    r.checkpoints,
                    human_bytes(r.bytes),
                )
                for r in sizes
            ],
        )
    for title, rows in (
        ("largest threads", st.top_by_bytes),
        ("longest threads", st.top_by_checkpoints),
    ):
        if rows:
            table(title, *thread_table(rows))


#: the eighths of a block, for bars of a fraction of a character
_EIGHTHS = " ▏▎▍▌▋▊▉"


def _bar(value: int, top: int, width: int) -> str:
    if top <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value / top * width * 8))
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def growth_chart(rows: list[ops.GrowthRow], unit: str) -> None:
    """What was written per hour or day, a bar of bytes each (the longest: the most written)."""
    top = max(r.bytes for r in rows)
    total = sum(r.bytes for r in rows)
    click.echo(
        f"\nwritten per {unit}, last {len(rows)} {unit}s: {sum(r.checkpoints for r in rows):,} "
        f"checkpoints, {human_bytes(total)}"
    )
    for r in rows:
        label = r.at.strftime("%Y-%m-%d %H:00" if unit == "hour" else "%Y-%m-%d %a")
        click.echo(
            f"  {label}  {r.checkpoints:>9,} ckpt  {human_bytes(r.bytes):>9}  "
            f"{_bar(r.bytes, top, 30)}"
        )
