"""``threads``, ``history`` and ``show``: what a database holds, thread by thread."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import click

from langgraph_pg_saver import ops
from langgraph_pg_saver.cli._common import (
    SHOW_WIDTH,
    Ctx,
    Failure,
    emit_json,
    json_option,
    keys_options,
    load_serde,
    parse_duration,
    parse_filters,
    pass_ctx,
    short,
    short_json,
    table,
    thread_table,
)


@click.command()
@click.option(
    "--filter",
    "flt",
    multiple=True,
    callback=parse_filters,
    metavar="KEY=VALUE",
    help="Threads with a checkpoint whose metadata holds KEY=VALUE (VALUE as JSON, else text).",
)
@click.option(
    "--idle-for",
    callback=parse_duration,
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
    with c.saver(check=False) as saver:
        ops.schema_version(saver).require_tables()
        rows = ops.threads(saver, flt or None, idle_for, limit + 1 if limit else None, sort)
    more = bool(limit) and len(rows) > limit
    rows = rows[:limit] if limit else rows
    if as_json:
        emit_json([r.as_dict() for r in rows])
    else:
        table(None, *thread_table(rows))
        if more:
            click.echo(f"(more threads match: --limit {limit * 10} or --limit 0 for all)", err=True)


@click.command()
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
    with c.saver() as saver:
        rows = ops.history(saver, thread_id, checkpoint_ns, limit or None)
    if not rows:
        raise Failure(f"thread {thread_id!r} has no checkpoints")
    if as_json:
        emit_json([r.as_dict() for r in rows])
        return
    table(
        f"thread {thread_id!r}",
        ["checkpoint", "ns", "step", "source", "run", "next", "writes", "metadata"],
        [
            (
                r.checkpoint_id,
                r.checkpoint_ns,
                r.step,
                r.source,
                r.run_id or "",
                ", ".join(r.next),
                ", ".join(sorted({ch for _, ch in r.writes if not ch.startswith("branch:")})),
                short_json({k: v for k, v in r.metadata.items() if k != "parents"}, 80),
            )
            for r in rows
        ],
    )


@click.command()
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
    with c.saver() as saver:
        shown = ops.show(saver, thread_id, checkpoint_id, checkpoint_ns, show_all)
    if shown is None:
        where = f"checkpoint {checkpoint_id!r} of " if checkpoint_id else ""
        raise Failure(f"{where}thread {thread_id!r} (namespace {checkpoint_ns!r}) not found")
    if as_json:
        emit_json(shown.as_dict())
        return
    meta = shown.metadata or {}
    click.echo(
        f"thread {thread_id!r} checkpoint {shown.checkpoint_id} (step {meta.get('step')}, "
        f"{meta.get('source')}); next: {', '.join(shown.next) or '-'}"
    )
    rows = [(k, short(v, width)) for k, v in shown.values.items()]
    for k, d in shown.delta_channels.items():
        rows.append(
            (
                k,
                f"DeltaChannel, rebuilt by the graph's reducer from its seed "
                f"{short(d['seed'], width // 2)} and {len(d['writes'])} writes since",
            )
        )
    table(None, ["channel", "value"], rows)
    if shown.pending_writes:
        table(
            "pending writes",
            ["task", "channel", "value"],
            [(t, ch, short(v, width)) for t, ch, v in shown.pending_writes],
        )
