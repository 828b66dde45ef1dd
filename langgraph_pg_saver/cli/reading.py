"""``threads``, ``history`` and ``show``: what a database holds, thread by thread."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
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
    when,
)
from langgraph_pg_saver.ops.reports import human_bytes

#: the least of an id's end shown, more while two listed ids share it
SHORT_ID = 12


def short_ids(ids: list[str]) -> Callable[[str], str]:
    """A function giving each of ``ids`` by its end: SHORT_ID characters, or as many more as
    tell the listed ids apart (uuid6 checkpoint ids share their start within a thread)."""
    distinct = {i for i in ids if i}
    width = SHORT_ID
    longest = max((len(i) for i in distinct), default=0)
    while width < longest and len({i[-width:] for i in distinct}) < len(distinct):
        width += 4
    return lambda i: i if len(i) <= width else "…" + i[-width:]


def _message(item: Any) -> tuple[str, str] | None:
    """(role, text) of a chat message as LangGraph stores it: a LangChain message (``type``
    and ``content``), a dict with ``role`` (or ``type``) and ``content``, a (role, text) pair."""
    if isinstance(item, dict):
        role, content = item.get("role", item.get("type")), item.get("content")
    elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        role, content = item
    else:
        role, content = getattr(item, "type", None), getattr(item, "content", None)
    if not isinstance(role, str) or content is None:
        return None
    if isinstance(content, list):  # content blocks: their text
        content = " ".join(
            str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content
        ).strip()
    text = str(content).replace("\n", " ")
    calls = getattr(item, "tool_calls", None) or (
        item.get("tool_calls") if isinstance(item, dict) else None
    )
    if calls:
        names = ", ".join(str(c.get("name", "?")) for c in calls if isinstance(c, dict))
        text = f"{text} [calls {names}]".strip()
    return role, text


def message_lines(value: Any) -> list[tuple[str, str]] | None:
    """A non-empty list of chat messages as (role, text) pairs; None for anything else."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    for item in value:
        found = _message(item)
        if found is None:
            return None
        out.append(found)
    return out


def clock(ts: str | None) -> str:
    """A checkpoint's ``ts`` as ``MM-DD HH:MM:SS`` in UTC ("" when it has none)."""
    if not ts:
        return ""
    try:
        at = datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if at.tzinfo is not None:
        at = at.astimezone(timezone.utc)
    return at.strftime("%m-%d %H:%M:%S")


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
@click.option(
    "--status",
    type=click.Choice(["idle", "pending", "interrupted", "error", "any"]),
    default=None,
    help="Threads by status, read from each one's newest checkpoint: interrupted (waiting on an "
    "interrupt: its value is shown), error (its last step raised), pending (nodes scheduled, "
    "not finished), idle; 'any' lists every thread with its status. Newest first.",
)
@click.option(
    "--ns",
    "namespace",
    default=None,
    help="Only threads with checkpoints in this namespace or below it ('research' for "
    "'research:<task id>'); lists with statuses, as --status any.",
)
@click.option(
    "--after",
    default=None,
    metavar="CURSOR",
    help="The next page of a --status listing: the cursor it printed.",
)
@keys_options
@json_option
@pass_ctx
def threads(
    c: Ctx,
    flt: dict[str, Any],
    idle_for: timedelta | None,
    limit: int,
    sort: str,
    status: str | None,
    namespace: str | None,
    after: str | None,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
    as_json: bool,
) -> None:
    """Threads with their last activity, checkpoints and bytes; with --status (or --ns), with
    their status, newest first, a page at a time."""
    c.serde = load_serde(keys_file, current, no_strict)
    if status is not None or namespace is not None or after is not None:
        if sort != "activity":
            raise click.UsageError("--sort applies without --status, --ns and --after")
        _threads_by_status(c, flt, idle_for, limit, status, namespace, after, as_json)
        return
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


def _threads_by_status(
    c: Ctx,
    flt: dict[str, Any],
    idle_for: timedelta | None,
    limit: int,
    status: str | None,
    namespace: str | None,
    after: str | None,
    as_json: bool,
) -> None:
    """threads --status: a page of search_threads."""
    page = min(limit or 1000, 1000)
    with c.saver(check=False) as saver:
        ops.schema_version(saver).require_tables()
        found = saver.search_threads(
            status=None if status in (None, "any") else status,
            metadata=flt or None,
            ns=namespace,
            idle_for=idle_for,
            limit=page,
            after=after,
        )
    if as_json:
        emit_json([t.as_dict() for t in found])
    else:
        table(
            None,
            ["thread", "status", "since", "next", "waiting on", "checkpoints", "size", "updated"],
            [
                (
                    t.thread_id,
                    t.status,
                    when(t.status_since) if t.status_since else "",
                    ", ".join(t.next),
                    waiting_on(t),
                    t.checkpoints,
                    human_bytes(t.bytes),
                    when(t.updated_at),
                )
                for t in found
            ],
        )
    if len(found) == page:
        click.echo(f"(next page: --after {found[-1].cursor})", err=True)


def waiting_on(t: Any, width: int = 60) -> str:
    """What an interrupted thread waits on (its interrupts' values), or what a failed one raised,
    on one line."""
    items = [getattr(i, "value", i) for i in t.interrupts] or list(t.errors)
    text = "; ".join(v if isinstance(v, str) else repr(v) for v in items)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@click.command()
@click.argument("thread_id")
@click.option(
    "--ns",
    "checkpoint_ns",
    default=None,
    help="Only this namespace and those below it: '' = the root, 'research' = that subgraph's "
    "'research:<task id>' (default: all).",
)
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(min=0),
    help="Newest N checkpoints (0: all).",
)
@click.option(
    "--full-ids", is_flag=True, help="Whole checkpoint and run ids (default: their last 12 chars)."
)
@keys_options
@json_option
@pass_ctx
def history(
    c: Ctx,
    thread_id: str,
    checkpoint_ns: str | None,
    limit: int,
    full_ids: bool,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
    as_json: bool,
) -> None:
    """A thread's checkpoints, newest first across namespaces: time, id, namespace, step,
    source, run id, next nodes, writes, metadata. Ids are shown by their end (unique among
    those listed; show --checkpoint takes it); --full-ids or --json for whole ones."""
    c.serde = load_serde(keys_file, current, no_strict)
    with c.saver() as saver:
        rows = ops.history(saver, thread_id, checkpoint_ns, limit or None)
    if not rows:
        where = "" if checkpoint_ns is None else f" in namespace {checkpoint_ns!r} or below it"
        raise Failure(f"thread {thread_id!r} has no checkpoints{where}")
    if as_json:
        emit_json([r.as_dict() for r in rows])
        return
    ids = (lambda s: s) if full_ids else short_ids([r.checkpoint_id for r in rows])
    runs = (lambda s: s) if full_ids else short_ids([r.run_id or "" for r in rows])
    table(
        f"thread {thread_id!r}",
        ["time (UTC)", "checkpoint", "ns", "step", "source", "run", "next", "writes", "metadata"],
        [
            (
                clock(r.ts),
                ids(r.checkpoint_id),
                short(r.checkpoint_ns, 24) if not full_ids else r.checkpoint_ns,
                r.step,
                r.source,
                runs(r.run_id or ""),
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
    "--messages",
    "last_messages",
    default=5,
    show_default=True,
    type=click.IntRange(min=0),
    help="A list of messages as 'role: text' lines, its last N (0: all of them).",
)
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
    last_messages: int,
    width: int,
    keys_file: str | None,
    current: str | None,
    no_strict: bool,
    as_json: bool,
) -> None:
    """A checkpoint's channel values, decoded with the serializer."""
    c.serde = load_serde(keys_file, current, no_strict)
    with c.saver() as saver:
        try:
            shown = ops.show(saver, thread_id, checkpoint_id, checkpoint_ns, show_all)
        except ValueError as exc:  # the end of an id that more than one checkpoint has
            raise Failure(str(exc)) from exc
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
    rows = []
    conversations = []
    for k, v in shown.values.items():
        lines = message_lines(v)
        if lines is None:
            rows.append((k, short(v, width)))
        else:
            rows.append((k, f"{len(lines)} messages (below)"))
            conversations.append((k, lines))
    for k, d in shown.delta_channels.items():
        rows.append(
            (
                k,
                f"DeltaChannel, rebuilt by the graph's reducer from its seed "
                f"{short(d['seed'], width // 2)} and {len(d['writes'])} writes since",
            )
        )
    table(None, ["channel", "value"], rows)
    for k, lines in conversations:
        kept = lines[-last_messages:] if last_messages else lines
        left = len(lines) - len(kept)
        click.echo(
            f"\n{k}: {len(lines)} messages"
            + (f", the last {len(kept)} (--messages 0 for all)" if left else "")
        )
        for role, text in kept:
            cut = width and len(text) > width
            click.echo(f"  {role}: {text[: width - 1] + '…' if cut else text}")
    if shown.pending_writes:
        table(
            "pending writes",
            ["task", "channel", "value"],
            [(t, ch, short(v, width)) for t, ch, v in shown.pending_writes],
        )
