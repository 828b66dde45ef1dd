"""The commands that change what is stored: ``prune`` (retention), ``copy-thread``,
``delete-thread``, ``delete-runs`` and ``reencrypt``.

Each shows its plan (a dry run's counts) and asks on a terminal (stdin) unless --yes, and has
--dry-run. A thread id that has no checkpoints is named on stderr and fails the command (exit 1)
before anything changes, unless --missing-ok (delete-thread, prune --thread): then the threads that
exist are processed and the unknown ids named in a warning. --json output is the report (the
plan's, with "dry_run": true, when nothing was done), "missing" included.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import timedelta

import click

from langgraph_pg_saver import ops
from langgraph_pg_saver.checkpoint.lifecycle import DEFAULT_KEEP_DELETED
from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.cli._common import (
    NOTHING_DELETED,
    WOULD_REFUSE,
    Ctx,
    Failure,
    Progress,
    asks,
    emit_json,
    json_option,
    keys_options,
    load_serde,
    missing_ok_option,
    name_missing,
    parse_duration,
    pass_ctx,
    plural,
    print_report,
    refuse,
    resume_hint,
    show_plan,
    stop_code,
    yes_option,
)
from langgraph_pg_saver.db.steps import Report
from langgraph_pg_saver.errors import ThreadNotEmptyError


@click.command()
@click.option("--thread", "thread_ids", multiple=True, help="Only this thread (repeatable).")
@click.option(
    "--idle-for",
    callback=parse_duration,
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
@click.option(
    "--keep-deleted",
    callback=parse_duration,
    help="Then forget the records of threads deleted longer ago than this, every thread's "
    "(until then a late run's writes to a deleted thread are refused)  [default: 7d]",
)
@click.option("--dry-run", is_flag=True, help="Report what would go; delete nothing.")
@yes_option
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
    keep_deleted: timedelta | None,
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
        if keep_deleted is not None:
            raise click.UsageError(
                "--keep-deleted goes with --keep-last or --idle-for (retention forgets the "
                "records); --strategy delete only deletes the --thread threads"
            )
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
                    keep_deleted=(DEFAULT_KEEP_DELETED if keep_deleted is None else keep_deleted),
                )

        asking = asks(yes)
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
        plan = None
        # with --thread, always: an unknown id is refused before anything is removed
        if dry_run or asking or thread_ids:
            # on a terminal, the plan's walk shows as it goes (it reads every thread)
            planning = Progress(
                interactive and not thread_ids,
                _total_threads(saver, None, start_after)
                if interactive and not thread_ids
                else None,
                thread_batch,
                "plan",
                "to remove",
            )
            try:
                plan = run(True, planning.update if planning.bar is not None else None)
            finally:
                planning.close()
        if plan is not None and dry_run:
            print_report(plan, as_json, "would remove")
            name_missing(plan, missing_ok, WOULD_REFUSE)
            return
        if plan is not None and plan.missing and not missing_ok:
            refuse(plan, as_json, NOTHING_DELETED.format("removed"))
        if plan is not None and asking:
            show_plan(plan, "would remove")
            if not plan.checkpoints and not plan.threads:
                click.echo("nothing to remove", err=True)
                return
            click.confirm("Remove these?", abort=True, err=True)
        # the bar counts the threads the job walks: not the ids skipped as unknown
        known = [t for t in thread_ids if plan is None or t not in plan.missing]
        total = (
            _total_threads(saver, known if thread_ids else None, start_after)
            if interactive
            else None
        )
        done = Progress(interactive, total, thread_batch)
        try:
            report = run(False, done.update)
        except KeyboardInterrupt as exc:
            done.close()
            last = done.last.last_thread_id if done.last else None
            hint = resume_hint(last)
            click.echo(
                f"interrupted: {done.calls} thread batches committed, nothing half-done (values an "
                f"interrupted batch left unreferenced go with the next run). {hint}",
                err=True,
            )
            sys.exit(stop_code(exc))
        done.close()
        print_report(report, as_json, "removed")
        name_missing(report, missing_ok, "")


def _total_threads(saver: PostgresSaver, thread_ids: list[str] | None, start_after: str) -> int:
    """The threads a prune will walk (of ``thread_ids``, or of all): the progress bar's total."""
    if thread_ids is not None:
        return len([t for t in set(thread_ids) if t > start_after])
    return ops.thread_count(saver, start_after)


@click.command("copy-thread")
@click.argument("source")
@click.argument("target")
@click.option(
    "--overwrite", is_flag=True, help="Replace the target's checkpoints (asks on a terminal)."
)
@click.option(
    "--dry-run", is_flag=True, help="Show what would be copied (and replaced); change nothing."
)
@yes_option
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
            refuse(plan, False, ": nothing was copied")
        if replaced.checkpoints and not overwrite:
            raise Failure(occupied)
        if dry_run:
            _print_copy(source, target, plan, replaced, as_json, err=False)
            return
        if replaced.checkpoints and asks(yes):
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
    name_missing(report, False, ": nothing was copied")


def _print_copy(
    source: str, target: str, plan: Report, replaced: Report, as_json: bool, *, err: bool
) -> None:
    if as_json:
        emit_json({**plan.as_dict(), "replaced": replaced.as_dict()})
        return
    if replaced.checkpoints:
        print_report(replaced, False, f"would replace {target!r}: delete", err=err)
    click.echo(
        f"would copy {source!r} to {target!r}: {plan.checkpoints:,} checkpoints, "
        f"{plan.writes:,} writes, {plan.blobs:,} blobs",
        err=err,
    )


@click.command("delete-thread")
@click.argument("thread_ids", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@yes_option
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
            print_report(plan, as_json, "would delete")
            name_missing(plan, missing_ok, WOULD_REFUSE)
            return
        if plan.missing and not missing_ok:
            refuse(plan, as_json, NOTHING_DELETED.format("deleted"))
        if asks(yes):
            show_plan(plan, "would delete")
            if not plan.threads:
                click.echo("nothing to delete", err=True)
                return
            click.confirm("Delete these threads?", abort=True, err=True)
        report = saver.prune(ids, strategy="delete")
    print_report(report, as_json, "deleted")
    name_missing(report, missing_ok, "")


@click.command("delete-runs")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Report what would be deleted; delete nothing.")
@yes_option
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
            print_report(plan, as_json, "would delete")
            name_missing(plan, missing_ok, WOULD_REFUSE, _no_such_runs)
            return
        if plan.missing and not missing_ok:
            if as_json:
                emit_json(plan.as_dict())
            name_missing(plan, False, NOTHING_DELETED.format("deleted"), _no_such_runs)
        if asks(yes):
            print_report(plan, False, "would delete", err=True)
            if plan.missing:
                click.echo(f"  {_no_such_runs(plan.missing)}: skipped", err=True)
            if not plan.checkpoints and not plan.writes:
                click.echo("nothing to delete", err=True)
                return
            found = len(set(ids)) - len(plan.missing)
            click.confirm(f"Delete what {plural(found, 'run')} wrote?", abort=True, err=True)
        report = saver.delete_for_runs(ids)
    print_report(report, as_json, "deleted")
    name_missing(report, missing_ok, "", _no_such_runs)


class PassProgress:
    """reencrypt's progress on stderr, a line per batch: its pass over the tables (channel
    values, then writes, then checkpoints), the rows of that pass sealed again so far, out of
    the plan's count when there is one."""

    PASSES = (
        ("channel values", "blobs"),
        ("pending writes", "writes"),
        ("checkpoints", "checkpoints"),
    )

    def __init__(self, plan: Report | None) -> None:
        self.plan = plan
        self.before: dict[str, int] = {field: 0 for _, field in self.PASSES}

    def update(self, report: Report) -> None:
        for n, (name, field) in enumerate(self.PASSES, 1):
            done = int(getattr(report, field))
            if done == self.before[field]:
                continue
            self.before[field] = done
            of = f"/{int(getattr(self.plan, field)):,}" if self.plan is not None else ""
            click.echo(
                f"reencrypt pass {n}/3, {name}: {done:,}{of} sealed again; "
                f"last thread {report.last_thread_id!r}",
                err=True,
            )


def _no_such_runs(ids: Sequence[str]) -> str:
    names = ", ".join(repr(r) for r in ids)
    if len(ids) == 1:
        return f"no such run: {names} (no checkpoint or write carries this run id)"
    return f"no such runs: {names} (no checkpoint or write carries these run ids)"


@click.command()
@click.option("--thread", "thread_id", help="Only this thread.")
@click.option("--batch-size", default=1000, show_default=True, type=click.IntRange(min=1))
@click.option("--full", is_flag=True, help="Seal everything again (plaintext_metadata changed).")
@click.option("--dry-run", is_flag=True, help="Count what would be sealed again; change nothing.")
@yes_option
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
    plan: Report | None = None
    with c.saver() as saver:
        if dry_run or asks(yes):
            plan = saver.reencrypt(thread_id, full=full, dry_run=True)
            if dry_run:
                print_report(plan, as_json, "would seal again")
                name_missing(plan, False, ": nothing would be sealed again")
                return
            if plan.missing:
                refuse(plan, as_json, ": nothing was sealed again")
            show_plan(plan, "would seal again")
            if not (plan.checkpoints or plan.writes or plan.blobs):
                click.echo("nothing to seal again", err=True)
                return
            click.confirm("Seal these again?", abort=True, err=True)
        progress = PassProgress(plan)
        try:
            report = saver.reencrypt(
                thread_id, batch=batch_size, full=full, progress=progress.update
            )
        except KeyboardInterrupt as exc:
            click.echo("interrupted: run the same command again to go on", err=True)
            sys.exit(stop_code(exc))
    print_report(report, as_json, "sealed again")
    name_missing(report, False, ": nothing was sealed again")
