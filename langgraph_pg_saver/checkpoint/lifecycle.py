"""Lifecycle operations (prune, copy, delete-for-runs, reencrypt, retention) as I/O-free step generators.

Each operation is a generator that yields :class:`Step` objects (statements to run in one transaction
on one pooled connection) and receives the rows of the step's last statement. The sync and async savers
drive the same generators, so the logic exists once and is tested once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import keys as _keys
from langgraph_pg_saver.checkpoint import writing as _writing
from langgraph_pg_saver.checkpoint.rows import ResealRow, RunsRow
from langgraph_pg_saver.codec import compress as _compress
from langgraph_pg_saver.codec import crypto as _crypto
from langgraph_pg_saver.codec import values as _values
from langgraph_pg_saver.codec.crypto import KeyringSerializer, Place
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.db.steps import (
    Report,
    Rows,
    Step,
    Steps,
    Stmt,
    batch_size,
)
from langgraph_pg_saver.errors import (
    DecryptionError,
    DeltaDependencyError,
    EntangledRunError,
    InvalidInputError,
    ThreadNotEmptyError,
)

DEFAULT_BATCH = 1000
DEFAULT_THREAD_BATCH = 100
DEFAULT_LOCK_TIMEOUT = 5.0
#: how long retention keeps the record of a delete (migration 0018): a run still going when its
#: thread was deleted is refused for this long; after it, a late write may recreate the thread
DEFAULT_KEEP_DELETED = timedelta(days=7)
PRUNE_STRATEGIES = ("keep_latest", "delete")


# --------------------------------------------------------------------------- input checks


def names_param(
    values: Sequence[str], what: str = "thread_ids", item: str = "thread id"
) -> list[str]:
    """A list of ids or names as distinct, sorted text; a lone string or a non-list is an error."""
    if isinstance(values, (str, bytes)):
        raise InvalidInputError(
            f"{what} must be a list of {item}s, not a single string {values!r}: write [{values!r}]"
        )
    try:
        items = list(values)
    except TypeError:
        raise InvalidInputError(
            f"{what} must be a list of {item}s, not {type(values).__name__}"
        ) from None
    out = set()
    for v in items:
        if v is None:
            raise InvalidInputError(f"{what} contains None instead of a {item}")
        out.add(_keys.name_param(v, item))
    return sorted(out)


def thread_ids_param(thread_ids: Sequence[str], what: str = "thread_ids") -> list[str]:
    return names_param(thread_ids, what, "thread id")


def locked(q: Queries, ids: list[str], *statements: Stmt) -> tuple[Stmt, ...]:
    """The statements after the exclusive per-thread locks of ``ids`` (one transaction); on
    Citus one lock statement per thread, each run on the thread's worker (citus_lock_thread)."""
    if q.citus:
        return (*citus_locks(q, {t: True for t in ids}), *statements)
    return (Stmt(q["lock_threads"], {"thread_ids": ids}), *statements)


def citus_locks(q: Queries, threads: dict[str, bool]) -> tuple[Stmt, ...]:
    """On Citus, the locks of ``threads`` (thread -> exclusive), in thread id order."""
    return tuple(
        Stmt(q["citus_lock_thread"], {"thread_id": t, "exclusive": threads[t]})
        for t in sorted(threads)
    )


def refresh_status(q: Queries, ids: Sequence[str]) -> Step:
    """The status rows of threads whose checkpoints a job changed, set again from what is stored
    (migration 0014's pgsaver_refresh_status; on Citus, each call runs on its thread's worker),
    each after the thread's parts that no stored value names any more are deleted (gc_elements):
    a job that deletes or copies values leaves no part behind that nothing reads."""
    return Step(
        tuple(
            stmt
            for t in ids
            for stmt in (
                Stmt(q["gc_elements"], {"thread_id": t}),
                Stmt(q["refresh_status"], {"thread_id": t}),
            )
        )
    )


def gc_elements(q: Queries, ids: Sequence[str]) -> Step:
    """The threads' parts that no stored value names any more, deleted (migration 0015)."""
    return Step(tuple(Stmt(q["gc_elements"], {"thread_id": t}) for t in ids))


def refreshed(
    q: Queries, step: Step, threads: Callable[[Rows], Sequence[str]], kept: list[Rows]
) -> Step:
    """``step`` (and the steps its ``then`` chain runs), then, in the same transaction, the status
    rows of the threads ``threads`` finds in the chain's last rows: a job stopped anywhere never
    commits rows it changed without their status (a deleted thread's row left behind, a copy
    without one). The chain's last rows are kept in ``kept[0]`` (the generator receives the
    refresh's)."""
    inner = step.then

    def then(rows: Rows) -> Step | None:
        following = inner(rows) if inner is not None else None
        if following is not None:
            return refreshed(q, following, threads, kept)
        kept[:] = [rows]
        ids = threads(rows)
        return refresh_status(q, ids) if ids else None

    return dataclasses.replace(step, then=then)


def _deleted_ids(rows: Rows) -> list[str]:
    """The threads delete_threads deleted (its sixth column)."""
    return list(rows[0][5] or ())


def missing_threads(q: Queries, ids: list[str]) -> Steps:
    """Of ``ids``, those that hold no checkpoint, sorted (one statement): what a report names in
    ``missing``. A thread exists while it holds a checkpoint."""
    if not ids:
        return []
    rows = yield Step((Stmt(q["missing_threads"], {"thread_ids": ids}),))
    return sorted(r[0] for r in rows)


# --------------------------------------------------------------------------- prune


def _counts(row: tuple[Any, ...], *, dry_run: bool = False) -> Report:
    threads, checkpoints, writes, blobs, size = row[:5]
    return Report(
        threads=int(threads),
        checkpoints=int(checkpoints),
        writes=int(writes),
        blobs=int(blobs),
        bytes=int(size or 0),
        dry_run=dry_run,
    )


def delete_threads(
    q: Queries, ids: list[str], *, dry_run: bool, lock_timeout: float | None
) -> Steps:
    if not ids:
        return Report(dry_run=dry_run)
    params: dict[str, Any] = {"thread_ids": ids, "idle_for": None}
    if dry_run:
        rows = yield Step((Stmt(q["threads_size"], params),))
        return _counts(rows[0], dry_run=True)
    kept: list[Rows] = []
    deleted = Step(locked(q, ids, Stmt(q["delete_threads"], params)), lock_timeout)
    yield refreshed(q, deleted, _deleted_ids, kept)
    rows = kept[0]
    report = _counts(rows[0])
    report.batches = 1
    # the threads deleted, under their locks: every other id held no checkpoint
    report.missing = sorted(set(ids) - set(rows[0][5] or ()))
    return report


def _keep_last(
    q: Queries,
    ids: list[str],
    n: int,
    *,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
) -> Steps:
    """Keep a thread's newest ``n`` root checkpoints, the subgraph checkpoints they own (the newest
    ``n`` of each such namespace), and what their DeltaChannels need (``_keep_last_set``)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"keep_last must be a positive int, not {n!r}")
    batch = batch_size(batch)
    if not ids:
        return Report(dry_run=dry_run)
    if q.citus and len(ids) > 1:
        # on Citus a thread at a time: each statement then names one thread in every table
        # reference, and Citus runs it on that thread's worker (docs/scaling.md)
        total = Report(dry_run=dry_run)
        for tid in ids:
            total.add(
                (
                    yield from _keep_last(
                        q, [tid], n, dry_run=dry_run, batch=batch, lock_timeout=lock_timeout
                    )
                )
            )
        return total
    params: dict[str, Any] = {"thread_ids": ids, "keep_last": n}
    if dry_run:
        rows = yield Step((Stmt(q["prune_keep_last_plan"], params),))
        threads, checkpoints, writes, blobs, size = rows[0]
        return Report(
            int(threads), int(checkpoints), int(writes), int(blobs), int(size or 0), dry_run=True
        )
    report = Report()
    touched: set[str] = set()
    params["batch"] = batch
    while True:
        # each batch commits a state in which every checkpoint still stored reads as before the
        # job (the order is prune_keep_last_batch's): a job stopped between batches, or a reader
        # between them, sees no survivor changed
        if q.citus:
            rows = yield _citus_prune_batch(q, ids, params, lock_timeout)
        else:
            rows = yield Step(
                locked(q, ids, Stmt(q["prune_keep_last_batch"], params)), lock_timeout
            )
        thread_list, checkpoints, writes, size, left = rows[0]
        touched.update(thread_list or ())
        report.checkpoints += int(checkpoints)
        report.writes += int(writes)
        report.bytes += int(size or 0)
        report.batches += 1
        # done when nothing doomed is left; a batch that deleted nothing (only rows a survivor
        # still needs were left in it, which ids out of time order can cause) ends the job too
        if not int(left) or not int(checkpoints):
            break
    pruned: list[Rows] = []

    def collect(rows: Rows) -> Step:
        # then, in the same transaction, the parts the deleted values alone named
        pruned[:] = [rows]
        return gc_elements(q, ids)

    yield Step(
        locked(q, ids, Stmt(q["prune_blobs"], {"thread_ids": ids})), lock_timeout, then=collect
    )
    rows = pruned[0]
    report.blobs += int(rows[0][0])
    report.bytes += int(rows[0][1] or 0)
    report.threads = len(touched)
    return report


def _citus_prune_batch(
    q: Queries, ids: list[str], params: dict[str, Any], lock_timeout: float | None
) -> Step:
    """On Citus, one batch of prune_keep_last_batch as two statements of one transaction (one
    thread, ``ids``): the batch picked, then deleted; the same row as prune_keep_last_batch."""

    def delete(rows: Rows) -> Step:
        nss, cids, doomed = rows[0]
        keys = {"thread_ids": ids, "nss": list(nss or ()), "ids": list(cids or ())}
        return Step((Stmt(q["citus_prune_delete"], {**keys, "doomed": int(doomed)}),))

    return Step(locked(q, ids, Stmt(q["citus_prune_pick"], params)), lock_timeout, then=delete)


def prune(q: Queries, thread_ids: Sequence[str], strategy: str, **options: Any) -> Steps:
    ids = thread_ids_param(thread_ids)
    if strategy not in PRUNE_STRATEGIES:
        raise InvalidInputError(
            f"unknown prune strategy {strategy!r}; use one of {list(PRUNE_STRATEGIES)}"
        )
    # an id that matches no thread is no error (LangGraph's contract): the report names it
    if strategy == "delete":
        dry_run = options.get("dry_run", False)
        # a real run finds them in its own locked statement (the threads it did not delete)
        missing = (yield from missing_threads(q, ids)) if dry_run else None
        report = yield from delete_threads(
            q,
            ids,
            dry_run=dry_run,
            lock_timeout=options.get("lock_timeout", DEFAULT_LOCK_TIMEOUT),
        )
        if missing is not None:
            report.missing = missing
        return report
    batch_size(options.get("batch", DEFAULT_BATCH))  # checked before anything runs
    missing = yield from missing_threads(q, ids)
    known = sorted(set(ids) - set(missing))
    report = yield from _keep_last(q, known, 1, **options)
    report.missing = missing
    return report


# --------------------------------------------------------------------------- copy and delete_for_runs


#: rows a copy_thread statement copies (or, with overwrite, deletes from each table of the target);
#: 2,000 rows of a chat thread take 15-40 ms here (the whole 50,000-checkpoint thread: 2.7 s in one
#: statement), well within a role's statement_timeout of 250 ms
COPY_BATCH = 2000
#: the tables copy_thread copies (and clears, but for the parts, which gc_elements deletes with
#: the values that named them), in this order: checkpoints first (queries.sql says why)
COPY_TABLES = ("checkpoints", "writes", "blobs", "elements")


def _batch_queries(q: Queries) -> dict[str, tuple[bytes, ...]]:
    """copy_thread's batch statements per table of COPY_TABLES: clearing the target, copying."""
    return {
        "clear": (q["clear_checkpoints_batch"], q["clear_writes_batch"], q["clear_blobs_batch"]),
        "copy": (
            q["copy_checkpoints_batch"],
            q["copy_writes_batch"],
            q["copy_blobs_batch"],
            q["copy_elements_batch"],
        ),
    }


def _in_batches(
    queries: tuple[bytes, ...],
    params: dict[str, Any],
    batch: int,
    counts: list[int],
    last: Callable[[], Step | None],
) -> Step:
    """The first of a chain of batch statements (``queries``: one per table of COPY_TABLES, each
    returning rows changed, rows read, last key read), run in one transaction: each table's next
    ``batch`` rows after the last key until a batch reads fewer, then the next table; the rows
    changed added up in ``counts``; then the Step ``last()`` returns (or None: the end)."""

    def step(table: int, after: list[str] | None) -> Step:
        stmt = Stmt(queries[table], {**params, "batch": batch, "after": after})
        return Step((stmt,), then=lambda rows: done(table, after, rows))

    def done(table: int, after: list[str] | None, rows: Rows) -> Step | None:
        if table == 0 and after is None:  # the chain starts (again, after a transient error)
            counts[:] = [0] * len(counts)
        changed, read, key = rows[0]
        counts[table] += int(changed)
        if int(read) >= batch:
            return step(table, list(key))
        if table + 1 < len(queries):
            return step(table + 1, None)
        return last()

    return step(0, None)


def delete_thread(q: Queries, thread_id: str, batch: int = COPY_BATCH) -> Steps:
    """delete_thread in short statements, in one transaction (what the saver runs when the
    server's statement_timeout cancelled its one statement), after the thread's exclusive lock,
    as migration 0016's pgsaver_delete_thread takes it: a put still running commits first, and
    the deletes remove what it wrote."""
    tid = _keys.thread_id_param(thread_id)
    counts = [0, 0, 0]
    # the thread's status row goes in the same transaction
    last = lambda: refresh_status(q, [tid])  # noqa: E731

    def deletes(rows: Rows) -> Step:
        return _in_batches(_batch_queries(q)["clear"], {"target": tid}, batch, counts, last)

    # the delete recorded first (migration 0018), from the checkpoints it is about to remove
    record = (Stmt(q["record_deleted"], {"thread_id": tid}),) if q.deleted else ()
    yield Step((*locked(q, [tid]), *record), then=deletes)
    checkpoints, writes, blobs = counts
    return Report(
        threads=1 if checkpoints else 0, checkpoints=checkpoints, writes=writes, blobs=blobs
    )


def refuse_checkpoint(q: Queries, params: Mapping[str, Any]) -> Steps:
    """After put_orphan stored nothing (put's parent is missing): under the thread's exclusive
    lock, whether a delete recorded since the parent was stored explains it (migration 0018).
    If so, the refused checkpoint's id joins the record's ``refused`` (its writes are refused
    too) and the writes that came before it are deleted; returns the delete's time. None: no delete
    explains it (a prune, a failover) and nothing changed."""
    keys = ("thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id")
    args = {k: params[k] for k in keys}
    found: list[Rows] = []

    def refused(rows: Rows) -> Step | None:
        found[:] = [rows]
        return Step((Stmt(q["refused_writes"], args),)) if rows else None

    yield Step(locked(q, [args["thread_id"]], Stmt(q["refuse_checkpoint"], args)), then=refused)
    rows = found[0] if found else []
    return rows[0][0] if rows else None


def drop_late_subgraphs(
    q: Queries, thread_id: str, lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT
) -> Steps:
    """After a refusal (ThreadDeletedError), in a transaction of its own under the thread's
    exclusive lock: the namespaces a late run's subgraphs stored since the delete (their first
    checkpoint has no parent to check), deleted (``late_subgraphs``); then, if any went, the
    thread's parts no value names any more and its status row (refresh_status). Returns how many
    checkpoints went."""
    gone: list[int] = []

    def cleaned(rows: Rows) -> Step | None:
        gone[:] = [int(rows[0][0]) if rows else 0]
        return refresh_status(q, [thread_id]) if gone[0] else None

    late = Stmt(q["late_subgraphs"], {"thread_id": thread_id})
    yield Step(locked(q, [thread_id], late), lock_timeout, then=cleaned)
    return gone[0] if gone else 0


def deleted_time(at: object) -> str:
    """A delete's time as ThreadDeletedError gives it: ISO 8601, as the server's JSON has it."""
    return at.isoformat() if isinstance(at, datetime) else str(at)


def forget_deleted(q: Queries, keep: timedelta, batch: int = DEFAULT_BATCH) -> Steps:
    """Retention's last step: the records of deletes (migration 0018) older than ``keep``,
    ``batch`` per statement; returns how many went."""
    forgotten = 0
    params = {"keep": keep, "batch": batch}
    while True:
        rows = yield Step((Stmt(q["forget_deleted"], params),))
        n = int(rows[0][0]) if rows else 0
        forgotten += n
        if q.citus or n < batch:
            return forgotten


def copy_thread(
    q: Queries,
    source: str,
    target: str,
    *,
    overwrite: bool,
    serde: SerializerProtocol | None = None,
    batch: int = COPY_BATCH,
) -> Steps:
    """Copy a thread in one transaction, ``batch`` rows per statement (statement_timeout is per
    statement: a long thread copies in many short statements, and no half-copied thread is ever
    visible). Under a KeyringSerializer the copied values are sealed again for the target's place
    in that transaction (they were bound to the source's)."""
    src = _keys.thread_id_param(source)
    dst = _keys.thread_id_param(target)
    if src == dst:
        raise InvalidInputError(f"copy_thread: source and target are the same thread {src!r}")
    batch = batch_size(batch)
    params: dict[str, Any] = {"source": src, "target": dst}
    # first whether the source holds a checkpoint: a missing one copies nothing and, with
    # overwrite, leaves the target as it is
    exists: tuple[Stmt, ...] = (Stmt(q["missing_threads"], {"thread_ids": [src]}),)
    crypt = None if serde is None else _values.sealer(serde)
    batches = _batch_queries(q)
    #: free (the target held no checkpoint), then the rows copied per table
    counts: dict[str, int] = {}
    cleared, copied = [0, 0, 0], [0, 0, 0, 0]

    def checked(rows: Rows) -> Step | None:
        counts.clear()  # a rerun after a transient error starts again here
        if rows:  # the source is missing
            return None
        if overwrite:  # the target's rows go first (batched as the copy), then the copy
            return _in_batches(batches["clear"], params, batch, cleared, used)
        return used()

    def used() -> Step:
        return Step((Stmt(q["copy_target_used"], params),), then=free)

    def free(rows: Rows) -> Step | None:
        counts["free"] = int(not rows[0][0])
        if not counts["free"]:
            return None
        return _in_batches(batches["copy"], params, batch, copied, reseal)

    def reseal() -> Step | None:
        counts.update(zip(COPY_TABLES, copied, strict=True))
        if crypt is None:
            return None
        return Step((Stmt(q["copied_sealed_rows"], params),), then=sealed)

    def sealed(rows: Rows) -> Step | None:
        if crypt is None or not rows:
            return None
        resealed = reseal_params(crypt, rows, source=src)
        resealed["thread_ids"] = [dst]  # the rows are the target's (on Citus: its worker)
        return Step((Stmt(q["reseal"], resealed),))

    # the target is locked (concurrent copies into it, or puts to it, wait for this one) and the
    # source shared (its puts go on, its prunes wait); the metadata index merges its pending
    # entries in small steps (no batch waits for a large merge)
    # (on Citus each on its thread's worker)
    locks = citus_locks(q, {dst: True, src: False}) if q.citus else (Stmt(q["lock_copy"], params),)
    gin = Stmt(q["gin_pending_list_small"])
    # the target's status row in the copy's transaction
    copy = Step((*locks, gin, *exists), DEFAULT_LOCK_TIMEOUT, then=checked)
    yield refreshed(q, copy, lambda rows: [dst] if counts.get("free") else [], [])
    if not counts:
        return Report(missing=[src])
    if not counts["free"]:
        raise ThreadNotEmptyError(dst)
    checkpoints = counts.get("checkpoints", 0)
    return Report(
        threads=1 if checkpoints else 0,
        checkpoints=checkpoints,
        writes=counts.get("writes", 0),
        blobs=counts.get("blobs", 0),
    )


def delete_for_runs(q: Queries, run_ids: Sequence[str], *, dry_run: bool = False) -> Steps:
    """Every row the runs wrote (their checkpoints, their writes wherever they sit, the values only
    those checkpoints referenced), in one transaction after the exclusive locks of the runs'
    threads; ``dry_run``: what would go, nothing locked or deleted. Raises, deleting nothing,
    where a surviving checkpoint would change (DeltaDependencyError) or rows of these runs cannot
    be told apart from those of runs that stay (EntangledRunError); the rules are in
    ``_runs_doomed`` (queries.sql). Run ids that matched no row are ``Report.missing``."""
    ids = names_param(run_ids, "run_ids", "run id")
    if not isinstance(dry_run, bool):
        raise InvalidInputError(f"dry_run must be a bool, not {dry_run!r}")
    if not ids:
        return Report(dry_run=dry_run)
    if q.citus:
        return (yield from _citus_delete_for_runs(q, ids, dry_run))
    found: list[list[str]] = []

    def then(rows: Rows) -> Step | None:
        threads = list(rows[0][0] or ())
        found[:] = [threads]
        if not threads:
            return None
        query = q["delete_for_runs_plan"] if dry_run else q["delete_for_runs"]
        return Step((Stmt(query, {"run_ids": ids, "thread_ids": threads}),))

    if dry_run:
        rows = yield Step((Stmt(q["runs_threads"], {"run_ids": ids}),), then=then)
    else:
        kept: list[Rows] = []
        locked_runs = Step(
            (Stmt(q["lock_threads_of_runs"], {"run_ids": ids}),), DEFAULT_LOCK_TIMEOUT, then=then
        )
        # the threads' status rows in the delete's transaction
        yield refreshed(q, locked_runs, lambda rows: found[0], kept)
        rows = kept[0] if kept else []
    if not found[0]:
        return Report(dry_run=dry_run, missing=ids)
    return _runs_report(ids, rows, dry_run)


def _runs_report(ids: list[str], rows: Rows, dry_run: bool) -> Report:
    """delete_for_runs' report from the rows of _runs_result, or its refusal."""
    R = RunsRow
    dependents = [
        (r[R.THREAD_ID], r[R.CHECKPOINT_NS], r[R.CHECKPOINT_ID], r[R.A])
        for r in rows
        if r[R.KIND] == 1
    ]
    if dependents:
        raise DeltaDependencyError(run_ids=ids, dependents=dependents)
    entangled = [
        (
            r[R.THREAD_ID],
            r[R.CHECKPOINT_NS],
            r[R.CHECKPOINT_ID],
            r[R.A],
            r[R.CHANNEL],
            r[R.RUN_ID],
            tuple(r[R.REPLACED] or ()),
        )
        for r in rows
        if r[R.KIND] == 2
    ]
    if entangled:
        raise EntangledRunError(run_ids=ids, rows=entangled)
    summary = next(r for r in rows if r[R.KIND] == 0)
    # the counts, from CHECKPOINTS to the row's end
    checkpoints, writes, blobs, threads, size, missing = summary[R.CHECKPOINTS : R.WIDTH]
    return Report(
        threads=int(threads),
        checkpoints=int(checkpoints),
        writes=int(writes),
        blobs=int(blobs),
        bytes=int(size or 0),
        dry_run=dry_run,
        batches=0 if dry_run else 1,
        missing=list(missing or ()),
    )


def _citus_delete_for_runs(q: Queries, ids: list[str], dry_run: bool) -> Steps:
    """delete_for_runs on Citus, in one transaction as on one server: the runs' threads found
    (across the shards), then each thread locked on its worker and planned there; only when no
    thread refuses, each thread's rows deleted (a router statement per thread). The report
    sums the plans, read under the locks that the deletes then hold."""
    found: list[list[str]] = []
    plans: list[Rows] = []

    def threads_found(rows: Rows) -> Step | None:
        threads = list(rows[0][0] or ())
        found[:] = [threads]
        plans.clear()  # a step rerun after a transient error starts again here
        return plan(threads, 0) if threads else None

    def plan(threads: list[str], i: int) -> Step:
        t = threads[i]
        locks = () if dry_run else citus_locks(q, {t: True})
        statement = Stmt(q["delete_for_runs_plan"], {"run_ids": ids, "thread_ids": [t]})

        def planned(rows: Rows) -> Step | None:
            plans.append(rows)
            if i + 1 < len(threads):
                return plan(threads, i + 1)
            if dry_run or any(r[RunsRow.KIND] != 0 for p in plans for r in p):
                return None  # a refusal: nothing is deleted
            return Step(
                tuple(
                    Stmt(q["delete_for_runs"], {"run_ids": ids, "thread_ids": [u]}) for u in threads
                )
            )

        return Step((*locks, statement), then=planned)

    runs = Step(
        (Stmt(q["runs_threads"], {"run_ids": ids}),), DEFAULT_LOCK_TIMEOUT, then=threads_found
    )
    # the threads' status rows in the delete's transaction
    yield runs if dry_run else refreshed(q, runs, lambda rows: found[0], [])
    if not found[0]:
        return Report(dry_run=dry_run, missing=ids)
    R = RunsRow
    merged: list[Any] = [r for p in plans for r in p if r[R.KIND] != 0]
    heads = [r for p in plans for r in p if r[R.KIND] == 0]
    total = list(heads[0])
    for r in heads[1:]:
        for col in range(R.CHECKPOINTS, R.CHECKPOINTS + 5):
            total[col] = (total[col] or 0) + (r[col] or 0)
    # a run id matched nothing when it matched nothing in any of the threads
    missing = set(ids)
    for r in heads:
        missing &= set(r[R.WIDTH - 1] or ())
    total[R.WIDTH - 1] = sorted(missing)
    return _runs_report(ids, [tuple(total), *merged], dry_run)


# --------------------------------------------------------------------------- encryption


def _reseal_one(
    crypt: KeyringSerializer, type_: str, data: bytes, old: Place, new: Place
) -> tuple[str, bytes]:
    """A stored value sealed for ``new`` with the current key: opened at ``old`` (checked, as a
    read is), never deserialized unless another serializer (the fallback) wrote it."""
    if type_ == _compress.LIST_TYPE:
        if data[2:6] == _crypto.MAGIC:  # sealed: its seal made again, its parts as they are
            return type_, crypt.reseal_list(data, old, new)
        # unsealed (came assembled, _reseal_blob_value): sealed whole; its parts, named by no
        # value any more, go at the thread's next prune or refresh
        return crypt.seal(*_compress.pack("msgpack", crypt.open_list(data, old)), new)
    inner = crypt.unseal(type_, data, old)
    if inner is None:
        if crypt.fallback is None and "+" not in type_:
            inner = (type_, data)  # the inner serializer's own plaintext
        else:
            value = crypt.open(type_, data, old)
            inner = _values.dump(crypt.serde, value, "a value read by the fallback serializer")
    return crypt.seal(inner[0], inner[1], new)


#: the ``reseal`` array parameters, per kind of row: the key columns, then type and value
_RESEAL_COLUMNS = (
    ("b_threads", "b_nss", "b_channels", "b_versions", "b_types", "b_blobs"),
    ("w_threads", "w_nss", "w_ids", "w_tasks", "w_idxs", "w_types", "w_blobs"),
    ("c_threads", "c_nss", "c_ids", "c_types", "c_bodies", "c_metadata", "c_exact"),
)


def reseal_params(
    crypt: KeyringSerializer, rows: Rows, *, source: str | None = None
) -> dict[str, Any]:
    """The ``reseal`` parameters for rows of ``copied_sealed_rows`` / ``reencrypt_*``: each
    value sealed again with the current key, for its place; with ``source``, the rows are a copy
    whose values are still bound to that thread. Metadata is split again by plaintext_metadata
    and always sealed (a row written before the KeyringSerializer keeps only those keys in
    clear)."""
    columns: list[list[list[Any]]] = [[[] for _ in names] for names in _RESEAL_COLUMNS]
    R = ResealRow
    for row in rows:
        kind, thread, ns, a, b = (
            row[R.KIND],
            row[R.THREAD_ID],
            row[R.CHECKPOINT_NS],
            row[R.A],
            row[R.B],
        )
        channel, idx, path = row[R.CHANNEL], row[R.IDX], row[R.TASK_PATH]
        type_, data, parent, versions = (
            row[R.TYPE],
            row[R.BLOB],
            row[R.PARENT],
            row[R.CHANNEL_VERSIONS],
        )
        was = thread if source is None else source
        if kind == 0:
            key: tuple[Any, ...] = (ns, a, b)
            old: Place = ("blob", was, *key)
            new: Place = ("blob", thread, *key)
        elif kind == 1:
            key = (ns, a, b, idx)
            old = ("write", was, *key, channel, path)
            new = ("write", thread, *key, channel, path)
        else:
            key = (ns, a)
            old = _keys.body_place(was, ns, a, parent, versions)
            new = _keys.body_place(thread, ns, a, parent, versions)
        values: list[Any] = [thread, *key, *_reseal_one(crypt, type_, data or b"", old, new)]
        if kind == 2:
            metadata, exact = row[R.METADATA], row[R.METADATA_EXACT]
            if exact:
                full = _values.unpack_typed(crypt, exact, ("metadata", was, ns, a))
            else:
                full = _values.open_exact(crypt, None, metadata, ("metadata", was, ns, a))
            text, _, _ = _writing.metadata_columns(crypt, full)
            values.append(text)
            values.append(_values.pack_typed(crypt, full, "metadata", ("metadata", thread, ns, a)))
        for column, value in zip(columns[kind], values, strict=True):
            column.append(value)
    return {
        name: column
        for names, kind_columns in zip(_RESEAL_COLUMNS, columns, strict=True)
        for name, column in zip(names, kind_columns, strict=True)
    }


def reencrypt(
    q: Queries,
    crypt: KeyringSerializer,
    *,
    thread_id: str | None = None,
    batch: int = DEFAULT_BATCH,
    full: bool = False,
    dry_run: bool = False,
    progress: Callable[[Report], None] | None = None,
) -> Steps:
    """Seal every stored value not sealed with the current key again (rotation), and plaintext
    ones for the first time (strict=False), ``batch`` rows per transaction, in primary-key order;
    ``full``: every value, also those under the current key (after plaintext_metadata grew).
    Rows are locked while their batch runs; an interrupted run is resumed by running it again
    (what is done is found done). ``dry_run``: count what would be sealed again, in one statement
    that locks nothing. A ``thread_id`` that holds no checkpoint is named in ``missing``."""
    batch = batch_size(batch)
    thread = None if thread_id is None else _keys.thread_id_param(thread_id)
    total = Report(dry_run=dry_run)
    for name, flag in (("full", full), ("dry_run", dry_run)):
        if not isinstance(flag, bool):
            raise InvalidInputError(f"{name} must be a bool, not {flag!r}")
    if thread is not None:
        total.missing = yield from missing_threads(q, [thread])
        if total.missing:
            return total
    due = {
        "full": full,
        "thread_id": thread,
        "header": crypt.keyring.header(),
        "plaintext": sorted(crypt.plaintext_metadata),
    }
    if dry_run:
        rows = yield Step((Stmt(q["reencrypt_plan"], due),))
        threads, checkpoints, writes, blobs = rows[0]
        total.threads, total.checkpoints = int(threads), int(checkpoints)
        total.writes, total.blobs = int(writes), int(blobs)
        if q.lists:
            parts = yield Step((Stmt(q["reencrypt_elements_plan"], due),))
            total.blobs += int(parts[0][0])
        return total
    base = {**due, "limit": batch}
    counted: list[str | None] = [None]  # the thread last counted in total.threads
    if not q.citus:
        yield from _reseal_batches(q, crypt, base, batch, total, counted, progress)
        return total
    # on Citus a thread at a time: each batch then names one thread, which Citus locks and
    # seals again on its worker
    if thread is not None:
        yield from _reseal_batches(
            q, crypt, {**base, "thread_ids": [thread]}, batch, total, counted, progress
        )
        return total
    after: str | None = None
    while True:
        walk = {"after": after or "", "first": after is None, "limit": DEFAULT_THREAD_BATCH}
        rows = yield Step((Stmt(q["reencrypt_threads"], walk),))
        ids = [r[0] for r in rows]
        for t in ids:
            params = {**base, "thread_id": t, "thread_ids": [t]}
            yield from _reseal_batches(q, crypt, params, batch, total, counted, progress)
        if len(ids) < DEFAULT_THREAD_BATCH:
            return total
        after = ids[-1]


def _reseal_batches(
    q: Queries,
    crypt: KeyringSerializer,
    base: dict[str, Any],
    batch: int,
    total: Report,
    counted: list[str | None],
    progress: Callable[[Report], None] | None,
) -> Steps:
    """reencrypt's batches over the three tables (of ``base``'s thread, or all), each batch read
    and locked, then sealed again, in one transaction; ``total`` counts them."""
    R = ResealRow
    converted: set[str] = set()  # threads of lists stored as elements unsealed, sealed whole
    # per table: its batch query, and the row columns of its primary key (after thread, namespace)
    tables = (
        (q["reencrypt_blobs"], 0, (R.A, R.B)),
        (q["reencrypt_writes"], 1, (R.A, R.B, R.IDX)),
        (q["reencrypt_checkpoints"], 2, (R.A,)),
    )
    for query, kind, key_columns in tables:
        after: tuple[Any, ...] | None = None
        while True:
            keys = (*(after or ()), None, None, None, None, None)[:5]
            params = {
                **base,
                **dict(zip(("k1", "k2", "k3", "k4", "k5"), keys, strict=True)),
                "first": after is None,
            }
            found: list[tuple[Any, ...]] = []

            def chosen(rows: Rows, found: list[tuple[Any, ...]] = found) -> Step | None:
                found[:] = rows
                if not rows:
                    return None
                converted.update(
                    r[R.THREAD_ID]
                    for r in rows
                    if r[R.KIND] == 0
                    and r[R.TYPE] == _compress.LIST_TYPE
                    and bytes(r[R.BLOB][2:6]) != _crypto.MAGIC
                )
                resealed = reseal_params(crypt, rows)
                if "thread_ids" in base:
                    resealed["thread_ids"] = base["thread_ids"]
                return Step((Stmt(q["reseal"], resealed),))

            yield Step((Stmt(query, params),), then=chosen)
            if not found:
                break
            last = found[-1]
            after = (last[R.THREAD_ID], last[R.CHECKPOINT_NS], *(last[i] for i in key_columns))
            n = len(found)
            if kind == 0:
                total.blobs += n
            elif kind == 1:
                total.writes += n
            else:
                total.checkpoints += n
                # threads whose checkpoints were sealed again (rows come in thread order)
                for r in found:
                    if r[R.THREAD_ID] != counted[0]:
                        total.threads += 1
                        counted[0] = r[R.THREAD_ID]
            total.batches += 1
            total.last_thread_id = last[R.THREAD_ID]
            if progress is not None:
                progress(dataclasses.replace(total))
            if len(found) < batch:
                break
    # the parts of the lists sealed whole above, named by nothing now: deleted under each thread's
    # lock (as every job collects parts), so that no element stays stored in clear
    for thread in sorted(converted):
        yield Step(locked(q, [thread], Stmt(q["gc_elements"], {"thread_id": thread})))
    if q.lists:
        yield from _reseal_parts(q, crypt, base, batch, total, progress)


def _reseal_parts(
    q: Queries,
    crypt: KeyringSerializer,
    base: dict[str, Any],
    batch: int,
    total: Report,
    progress: Callable[[Report], None] | None,
) -> Steps:
    """reencrypt's batches over the parts of lists sealed as their elements: each opened and
    sealed again with the current key (bound to its key as before); counted in ``blobs``."""
    after: tuple[Any, ...] | None = None
    while True:
        k1, k2 = after or (None, None)
        params = {**base, "k1": k1, "k2": k2, "first": after is None}
        found: list[tuple[Any, ...]] = []

        def chosen(rows: Rows, found: list[tuple[Any, ...]] = found) -> Step | None:
            found[:] = rows
            if not rows:
                return None
            blobs = []
            for thread, key, blob in rows:
                where = f"a part of a list stored as its elements in thread {thread!r}"
                held, stored = crypt.open_part(blob, where)
                if held != bytes(key):
                    raise DecryptionError(
                        f"{where} holds another part's key: it was moved within the table",
                        where=where,
                    )
                blobs.append(crypt.seal_part(held, stored))
            sealed: dict[str, Any] = {
                "e_threads": [r[0] for r in rows],
                "e_keys": [bytes(r[1]) for r in rows],
                "e_blobs": blobs,
            }
            if "thread_ids" in base:
                sealed["thread_ids"] = base["thread_ids"]
            return Step((Stmt(q["reseal_elements"], sealed),))

        yield Step((Stmt(q["reencrypt_elements"], params),), then=chosen)
        if not found:
            return
        after = (found[-1][0], bytes(found[-1][1]))
        total.blobs += len(found)
        total.batches += 1
        if progress is not None:
            progress(dataclasses.replace(total))
        if len(found) < batch:
            return


# --------------------------------------------------------------------------- retention


def retention(
    q: Queries,
    *,
    keep_last: int | None = None,
    idle_for: timedelta | None = None,
    thread_ids: Sequence[str] | None = None,
    dry_run: bool = False,
    thread_batch: int = DEFAULT_THREAD_BATCH,
    batch: int = DEFAULT_BATCH,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    start_after: str = "",
    progress: Callable[[Report], None] | None = None,
    keep_deleted: timedelta | None = None,
) -> Steps:
    """Walk every thread in id order, in batches: delete threads idle longer than ``idle_for``, and keep
    the newest ``keep_last`` checkpoints (plus DeltaChannel ancestry) of the others. Last (not in
    a dry run), forget the records of deletes older than ``keep_deleted`` (None: keep them)."""
    if keep_last is None and idle_for is None:
        raise InvalidInputError("retention needs keep_last=N, idle_for=timedelta(...), or both")
    if idle_for is not None and (not isinstance(idle_for, timedelta) or idle_for <= timedelta(0)):
        raise InvalidInputError(f"idle_for must be a positive datetime.timedelta, not {idle_for!r}")
    if keep_last is not None and (
        isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
    ):
        raise InvalidInputError(f"keep_last must be a positive int, not {keep_last!r}")
    if keep_deleted is not None and (
        not isinstance(keep_deleted, timedelta) or keep_deleted < timedelta(0)
    ):
        raise InvalidInputError(
            f"keep_deleted must be a datetime.timedelta of zero or more, or None, not {keep_deleted!r}"
        )
    thread_batch = batch_size(thread_batch)
    batch_size(batch)  # checked before anything runs, not only when keep_last first needs it
    total = Report(dry_run=dry_run, last_thread_id=start_after or None)
    after = _keys.thread_id_param(start_after)
    chosen = None if thread_ids is None else [t for t in thread_ids_param(thread_ids) if t > after]
    if chosen:
        # the given ids that hold no checkpoint, as the job starts: named, and left alone
        total.missing = yield from missing_threads(q, chosen)
        chosen = sorted(set(chosen) - set(total.missing))
    while True:
        if chosen is None:
            rows = yield Step((Stmt(q["threads_after"], {"after": after, "limit": thread_batch}),))
            ids = [r[0] for r in rows]
        else:
            ids, chosen = chosen[:thread_batch], chosen[thread_batch:]
        if not ids:
            break
        idle: list[str] = []
        if idle_for is not None:
            rows = yield Step((Stmt(q["idle_threads"], {"thread_ids": ids, "idle_for": idle_for}),))
            idle = [r[0] for r in rows]
            if dry_run:
                total.add(
                    (yield from delete_threads(q, idle, dry_run=True, lock_timeout=lock_timeout))
                )
            elif idle:
                # idleness is checked again under the locks: a thread written meanwhile stays
                params = {"thread_ids": idle, "idle_for": idle_for}
                kept: list[Rows] = []
                deleted = Step(locked(q, idle, Stmt(q["delete_threads"], params)), lock_timeout)
                yield refreshed(q, deleted, _deleted_ids, kept)
                rows = kept[0]
                done = _counts(rows[0])
                done.batches = 1
                total.add(done)
                # a thread written between the idle check and the locks was not deleted: it is
                # pruned to keep_last like the others, not skipped in this pass
                idle = list(rows[0][5] or ())
        if keep_last is not None:
            rest = sorted(set(ids) - set(idle))
            total.add(
                (
                    yield from _keep_last(
                        q, rest, keep_last, dry_run=dry_run, batch=batch, lock_timeout=lock_timeout
                    )
                )
            )
        after = ids[-1]
        total.last_thread_id = after
        if progress is not None:
            progress(dataclasses.replace(total))
    if keep_deleted is not None and not dry_run and q.deleted:
        yield from forget_deleted(q, keep_deleted, batch)
    return total
