"""``import-official``: the history of langgraph-checkpoint-postgres copied into our tables, then
verified."""

from __future__ import annotations

import sys
from typing import Any

import click

from langgraph_pg_saver import ops
from langgraph_pg_saver.checkpoint.imports import ImportReport
from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.cli._common import (
    Ctx,
    Failure,
    Progress,
    emit_json,
    json_option,
    pass_ctx,
    plural,
    print_report,
    resume_hint,
    stop_code,
)
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA


@click.command("import-official")
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
    progress = Progress(False, None, thread_batch, "import", "copied")
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
        except KeyboardInterrupt as exc:
            last = progress.last.last_thread_id if progress.last else None
            click.echo(f"interrupted: nothing half-done. {resume_hint(last)}", err=True)
            sys.exit(stop_code(exc))
        out["saver"] = report.as_dict()
        if verify and not dry_run:
            out["verify"] = _verify(saver, source_schema, start_after)
    if with_store and not dry_run:
        from langgraph_pg_saver.store.store import PostgresStore

        with PostgresStore.from_conn_string(c.dsn, schema=c.schema) as store:
            store.setup(check=True)
            out["store"] = store.import_official(source_schema=source_schema)
    if as_json:
        emit_json(out)
    else:
        print_report(report, False, "would import" if dry_run else "imported")
        for line in _import_notes(report):
            click.echo(line)
        if "store" in out:
            click.echo(
                f"store: {out['store']['imported']:,} of {out['store']['items']:,} items imported"
            )
        if "verify" in out:
            v = out["verify"]
            click.echo(
                f"verified {plural(v['checkpoints'], 'imported checkpoint')} held here, of "
                f"{plural(v['threads'], 'thread')}: "
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
            f"skipped as already imported: {plural(report.already_imported, 'checkpoint')}; "
            f"{plural(report.unchanged_threads, 'thread')} with nothing new in the source"
        )
    if report.deleted_threads:
        lines.append(
            f"skipped {plural(report.deleted_threads, 'thread')} imported before and deleted "
            "here since (--reimport THREAD imports one again)"
        )
    if report.diverged:
        shown = ", ".join(report.diverged[:10]) + (", ..." if len(report.diverged) > 10 else "")
        lines.append(
            f"not copied, {plural(len(report.diverged), 'thread')} changed on both sides or no "
            f"longer extending what was imported: {shown} (to take the source's version of one: "
            "delete-thread THREAD, then import-official --reimport THREAD)"
        )
    if report.untimed:
        lines.append(
            f"{plural(report.untimed, 'checkpoint')} without a usable ts: created_at is the "
            "import's time"
        )
    if report.missing:
        lines.append(
            f"--reimport names threads the source does not hold: {', '.join(report.missing)}"
        )
    return lines


def _verify(saver: PostgresSaver, source_schema: str, start_after: str) -> dict[str, Any]:
    try:
        return ops.verify_import(saver, source_schema, start_after).as_dict()
    except ImportError:
        raise Failure(
            "--verify reads the source with langgraph-checkpoint-postgres, which is not "
            "installed: pip install langgraph-checkpoint-postgres, or pass --no-verify"
        ) from None
