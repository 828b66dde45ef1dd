"""Moving history over from ``langgraph-checkpoint-postgres``: its tables (``checkpoints``,
``checkpoint_blobs``, ``checkpoint_writes``, in a schema of the same database) into ours. No I/O
here: a step generator the savers drive, and the statements it runs.

Blobs and writes are the same bytes in both (the same serializer's ``(type, bytes)``), so they are
copied in SQL. A checkpoint is JSON there and serialized here: the body (everything but its
channel values and versions) is serialized with the saver's serde, its inline values (the official
saver keeps strings and numbers in the checkpoint JSON) become blobs, its metadata goes through the
rules of ``codec.jsonb``, its ``ts`` becomes ``created_at``. Threads go in id order, ``thread_batch``
at a time, one transaction each, under our per-thread locks.

What was imported is recorded in ``pgsaver_imports`` (migration 0010), per source schema, thread
and namespace: the newest checkpoint id imported (``last_id``) and the keys of the source's writes
at it then (``head_writes``). So running the import again copies only what is new in the source
since (checkpoints newer than ``last_id``; writes at ``last_id`` that were not there), and nothing
that was imported before and then pruned or deleted here. The rules, per thread of the source:

- ``full``: never imported from this source and holding nothing here (or named in ``reimport``):
  everything, merged with what is here (a row already here is left as it is);
- ``recorded``: imported before and holding checkpoints here: what is new in the source, provided
  it extends what was imported (each new checkpoint's parent is the namespace's ``last_id``, still
  here, or another new checkpoint; a new namespace starts from no parent) and the thread was not
  also written here since (a checkpoint here newer than its namespace's ``last_id``). Otherwise
  nothing of it, and the thread is listed in ``diverged``;
- ``deleted``: imported before and holding nothing here (deleted here): nothing;
- ``legacy``: not recorded but holding checkpoints here (imported by a release without the record,
  or written here under the same id): as ``recorded``, with each namespace's newest checkpoint here
  as its ``last_id`` (the thread's newest for a namespace not here), and no recorded writes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint.lifecycle import locked, names_param, refreshed
from langgraph_pg_saver.checkpoint.official import Source
from langgraph_pg_saver.codec import jsonb as _jsonb
from langgraph_pg_saver.codec import values as _values
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.db.steps import Report, Rows, Step, Steps, Stmt, batch_size
from langgraph_pg_saver.errors import InvalidInputError, PgSaverError


@dataclass
class ImportReport(Report):
    """What ``import_official`` copied (or, in a dry run, would copy), and what it left out.

    ``threads``, ``checkpoints``, ``writes`` and ``blobs`` count what was copied: the threads that
    received anything, and the rows inserted (inline values become blobs here).
    """

    #: threads of the source looked at
    source_threads: int = 0
    #: source checkpoints not copied because they were imported before (held here, or pruned or
    #: deleted here since)
    already_imported: int = 0
    #: threads imported before in which the source has nothing new
    unchanged_threads: int = 0
    #: threads imported before that hold nothing here any more (deleted here): left out whole;
    #: ``reimport=[thread_id]`` imports one again
    deleted_threads: int = 0
    #: threads whose new source checkpoints and writes were not copied: the thread was written here
    #: since it was imported, or a new checkpoint does not extend what was imported (its parent was
    #: pruned here, or the source forked from an older checkpoint); sorted
    diverged: list[str] = dataclasses.field(default_factory=list)
    #: checkpoints copied without a usable ``ts`` (missing or not ISO 8601): their ``created_at`` is
    #: the import's time
    untimed: int = 0

    def add(self, other: Report) -> None:
        super().add(other)
        if isinstance(other, ImportReport):
            for f in (
                "source_threads",
                "already_imported",
                "unchanged_threads",
                "deleted_threads",
                "untimed",
            ):
                setattr(self, f, getattr(self, f) + getattr(other, f))
            self.diverged = sorted({*self.diverged, *other.diverged})


def created_at(checkpoint: dict[str, Any]) -> datetime | None:
    """The checkpoint's ``ts`` (ISO 8601, as LangGraph writes it) as an aware datetime; one without
    an offset is taken as UTC. None when it is missing or unparsable: the import's time is used."""
    ts = checkpoint.get("ts")
    if not isinstance(ts, str) or not ts:
        return None
    text = ts[:-1] + "+00:00" if ts.endswith(("Z", "z")) else ts
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _body(checkpoint: Any) -> dict[str, Any]:
    return dict(checkpoint if isinstance(checkpoint, dict) else json.loads(checkpoint))


def keys(rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The ``k_*`` parameters of the source checkpoints ``rows``: their keys and timestamps."""
    p: dict[str, list[Any]] = {"k_threads": [], "k_nss": [], "k_ids": [], "k_created": []}
    for thread, ns, checkpoint_id, _parent, checkpoint, _meta in rows:
        p["k_threads"].append(thread)
        p["k_nss"].append(ns)
        p["k_ids"].append(checkpoint_id)
        p["k_created"].append(created_at(_body(checkpoint)))
    return p


def convert(serde: SerializerProtocol, rows: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The ``apply`` parameters of the official checkpoints ``rows``: each body serialized, its
    inline values as blobs, its metadata as we store it."""
    p: dict[str, list[Any]] = {
        k: []
        for k in [
            "i_threads",
            "i_nss",
            "i_ids",
            "i_channels",
            "i_versions",
            "i_types",
            "i_blobs",
            "c_threads",
            "c_nss",
            "c_ids",
            "c_parents",
            "c_runs",
            "c_types",
            "c_bodies",
            "c_versions",
            "c_metadata",
            "c_exacts",
        ]
    }
    for thread, ns, checkpoint_id, parent, checkpoint, metadata in rows:
        cp = _body(checkpoint)
        inline = cp.pop("channel_values", None) or {}
        versions = cp.pop("channel_versions", None) or {}
        for channel, value in inline.items():
            if channel not in versions:
                continue
            type_, data = _values.dump(serde, value, "the inline value of channel", channel)
            for key, v in (
                ("i_threads", thread),
                ("i_nss", ns),
                ("i_ids", checkpoint_id),
                ("i_channels", channel),
                ("i_versions", _keys.version_key(versions[channel])),
                ("i_types", type_),
                ("i_blobs", data),
            ):
                p[key].append(v)
        body_type, body = _values.dump(serde, cp, "the checkpoint body")
        meta = dict(metadata or {})
        text, lossy = _jsonb.encode(meta)
        run_id = meta.get("run_id")
        for key, v in (
            ("c_threads", thread),
            ("c_nss", ns),
            ("c_ids", checkpoint_id),
            ("c_parents", parent),
            (
                "c_runs",
                str(run_id)
                if isinstance(run_id, (str, int)) and not isinstance(run_id, bool)
                else None,
            ),
            ("c_types", body_type),
            ("c_bodies", body),
            ("c_versions", json.dumps(versions)),
            ("c_metadata", text),
            ("c_exacts", _values.pack_typed(serde, meta) if lossy else None),
        ):
            p[key].append(v)
    return p


def import_official(
    q: Queries,
    serde: SerializerProtocol,
    *,
    source_schema: str,
    thread_batch: int,
    dry_run: bool,
    start_after: str,
    progress: Callable[[Report], None] | None,
    reimport: Sequence[str] = (),
) -> Steps:
    source = Source(source_schema, citus=q.citus)
    batch_size(thread_batch)
    again = names_param(reimport, "reimport", "thread id") if reimport else []
    early = [t for t in again if t <= start_after]
    if early:
        raise InvalidInputError(
            f"reimport names {early[0]!r}, which is not after start_after={start_after!r}: "
            "this run would not reach it"
        )
    rows = yield Step((source.exists(),))
    if not rows or not rows[0][0]:
        raise PgSaverError(
            f"no tables of langgraph-checkpoint-postgres (checkpoints, checkpoint_blobs, "
            f"checkpoint_writes) in schema {source_schema!r} of this database: pass "
            "source_schema= (the schema they are in)"
        )
    total = ImportReport(dry_run=dry_run, last_thread_id=start_after or None)
    if again:
        rows = yield Step((Stmt(source.absent(), {"thread_ids": again}),))
        total.missing = [r[0] for r in rows]
    after = start_after
    while True:
        rows = yield Step((Stmt(source.threads_after(), {"after": after, "limit": thread_batch}),))
        ids = [r[0] for r in rows]
        if not ids:
            break
        # on Citus a thread at a time (official.py): each statement then reads one thread of ours
        for part in [[t] for t in ids] if q.citus else [ids]:
            report = yield from _import_threads(q, serde, source, part, again, dry_run)
            total.add(report)
        after = ids[-1]
        total.last_thread_id = after
        if progress is not None:
            progress(dataclasses.replace(total, diverged=list(total.diverged)))
        if len(ids) < thread_batch:
            break
    return total


def _import_threads(
    q: Queries,
    serde: SerializerProtocol,
    source: Source,
    ids: list[str],
    again: list[str],
    dry_run: bool,
) -> Steps:
    """One batch of threads (on Citus one thread): what of them is new, converted, then counted
    or copied under their locks, in one transaction."""
    common: dict[str, Any] = {"thread_ids": ids, "reimport": again, "source": source.schema}
    if source.citus:
        read = []
        for statement in source.source_rows():
            read.append((yield Step((Stmt(statement, common),))))
        common.update(source.source_params(*read))
    found = list((yield Step((Stmt(source.candidates(q, dry_run=dry_run), common),))))
    params = {**common, **keys(found)}
    if dry_run:
        rows = yield Step((Stmt(source.count(q), params),))
    else:
        params.update(convert(serde, found))
        if source.citus:
            # the plan, then the copy it chose: a copy with a recursive CTE Citus refuses
            params["thread_id"] = ids[0]

            def copy(decided: Rows) -> Step:
                chosen = dict(zip(Source.DECIDED, decided[0], strict=True))
                return Step((Stmt(source.write(q), {**params, **chosen}),))

            step = Step(locked(q, ids, Stmt(source.decide(q), params)), 30.0, then=copy)
        else:
            step = Step(locked(q, ids, Stmt(source.apply(q), params)), 30.0)
        # the threads' status rows in the import's transaction
        kept: list[Rows] = []
        yield refreshed(q, step, lambda rows: ids, kept)
        rows = kept[0]
    threads, checkpoints, writes, blobs, untimed, already, unchanged, deleted, bad = rows[0][:9]
    return ImportReport(
        threads=int(threads),
        checkpoints=int(checkpoints),
        writes=int(writes),
        blobs=int(blobs),
        batches=0 if dry_run else 1,
        source_threads=len(ids),
        already_imported=int(already),
        unchanged_threads=int(unchanged),
        deleted_threads=int(deleted),
        diverged=list(bad),
        untimed=int(untimed),
    )
