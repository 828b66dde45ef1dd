"""Threads by status: what ``search_threads`` asks and what it returns. No I/O happens here.

A thread's status is read from its newest root checkpoint (migration 0014 says the rule):
``"error"`` (a task of its last superstep raised), ``"interrupted"`` (a node is waiting on an
interrupt), ``"pending"`` (nodes are scheduled and have not finished: a run in progress, or one
stopped before them by a breakpoint, a crash or a cancel) and ``"idle"`` (none of these).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint import metadata as _metadata
from langgraph_pg_saver.codec.values import open_exact, opener
from langgraph_pg_saver.errors import InvalidInputError

STATUSES = ("idle", "pending", "interrupted", "error")
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class ThreadInfo:
    """One thread as ``search_threads`` finds it."""

    thread_id: str
    #: "idle", "pending", "interrupted" or "error"
    status: str
    #: its newest root checkpoint, and when that was stored
    checkpoint_id: str
    updated_at: datetime
    #: that checkpoint's metadata
    metadata: dict[str, Any]
    #: since when the thread has had its status (None while idle)
    status_since: datetime | None
    #: the nodes that checkpoint schedules (a StateGraph's; [] when idle)
    next: list[str]
    #: the values of the interrupts it waits on (``Interrupt`` objects), for "interrupted"
    interrupts: list[Any] = field(default_factory=list)
    #: what the failed tasks raised, for "error"
    errors: list[Any] = field(default_factory=list)
    #: rows of all four tables, parts included (None when ``sizes=False``)
    checkpoints: int | None = None
    bytes: int | None = None
    #: pass as ``after`` for the next page
    cursor: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["interrupts"] = [_plain(i) for i in self.interrupts]
        out["errors"] = [e if isinstance(e, str) else repr(e) for e in self.errors]
        return out


def _plain(interrupt: Any) -> Any:
    """An Interrupt as a dict (its value and id), anything else as it is."""
    value = getattr(interrupt, "value", interrupt)
    ident = getattr(interrupt, "id", None)
    return {"value": value, "id": ident} if ident is not None else {"value": value}


@dataclass(frozen=True)
class Search:
    """A checked ``search_threads`` call: the statement's name, its parameters, and what the reader
    still checks in Python (a metadata filter the SQL containment selects a superset for)."""

    query: str
    params: dict[str, Any]
    filter: _metadata.FilterPlan | None
    limit: int
    sizes: bool


def search(
    *,
    status: str | None,
    metadata: Mapping[str, Any] | None,
    ns: str | None,
    idle_for: timedelta | None,
    active_within: timedelta | None,
    limit: int,
    after: str | None,
    sizes: bool,
) -> Search:
    """The search's statement and parameters; raises InvalidInputError naming a bad argument."""
    if status is not None and status not in STATUSES:
        raise InvalidInputError(
            f"status must be one of {', '.join(map(repr, STATUSES))} or None, not {status!r}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be an int from 1 to {MAX_LIMIT}, not {limit!r}")
    for name, value in (("idle_for", idle_for), ("active_within", active_within)):
        if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
            raise InvalidInputError(f"{name} must be a positive datetime.timedelta, not {value!r}")
    if ns is not None and (not isinstance(ns, str) or "\x00" in ns):
        raise InvalidInputError(f"ns must be a str (a namespace or its prefix), not {ns!r}")
    if not isinstance(sizes, bool):
        raise InvalidInputError(f"sizes must be a bool, not {sizes!r}")
    plan = None
    prefilter = None
    if metadata:
        if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
            raise InvalidInputError(f"metadata must be a dict with str keys, not {metadata!r}")
        plan = _metadata.plan_filter(metadata)
        prefilter = plan.prefilter
        if plan.exact:
            plan = None  # SQL selects exactly the matches
    after_id, after_thread = decode_cursor(after)
    params = {
        "status": status,
        "metadata": prefilter,
        # '' is the root, which every thread has: no filter
        "ns": ns or None,
        "idle_for": idle_for,
        "active_within": active_within,
        "after_id": after_id,
        "after_thread": after_thread,
        "limit": limit,
    }
    # the status table lists every thread; a metadata filter over all statuses (or the idle
    # ones, most threads) may find its few matches faster through the metadata's index
    if status in (None, "idle"):
        query = "threads_walk" if metadata else "threads_recent"
    else:
        query = "threads_by_status"
    return Search(query, params, plan, limit, sizes)


def encode_cursor(position: str, thread_id: str) -> str:
    raw = json.dumps([position, thread_id], ensure_ascii=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[str | None, str | None]:
    if cursor is None or cursor == "":
        return None, None
    try:
        if not isinstance(cursor, str):
            raise TypeError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position, thread_id = json.loads(raw)
        if not isinstance(position, str) or not isinstance(thread_id, str):
            raise TypeError
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"after must be the cursor of a ThreadInfo from search_threads, not {cursor!r}"
        ) from exc
    return position, thread_id


#: the columns of threads_by_status, threads_recent and threads_walk
THREAD_ID, STATUS, CHECKPOINT_ID, CREATED_AT, METADATA, METADATA_EXACT, SINCE, NEXT, POSITION = (
    range(9)
)


def page(
    serde: SerializerProtocol,
    found: Search,
    rows: Sequence[Sequence[Any]],
) -> tuple[list[ThreadInfo], str | None]:
    """The threads of one statement's rows that match the search (a metadata filter checked on
    the metadata as read back), and the cursor after the last row read (None: no more rows)."""
    out = []
    for r in rows:
        parts = ("metadata", r[THREAD_ID], "", r[CHECKPOINT_ID])
        meta = open_exact(serde, r[METADATA_EXACT], r[METADATA], parts)
        if found.filter is not None and not _metadata.matches(found.filter.filter, meta):
            continue
        out.append(
            ThreadInfo(
                thread_id=r[THREAD_ID],
                status=r[STATUS],
                checkpoint_id=r[CHECKPOINT_ID],
                updated_at=r[CREATED_AT],
                metadata=dict(meta),
                status_since=r[SINCE],
                next=list(r[NEXT] or ()),
                cursor=encode_cursor(r[POSITION], r[THREAD_ID]),
            )
        )
    more = len(rows) >= found.limit and rows
    last = encode_cursor(rows[-1][POSITION], rows[-1][THREAD_ID]) if more else None
    return out, last


def status_params(threads: Sequence[ThreadInfo]) -> dict[str, Any] | None:
    """thread_status_writes' parameters for the interrupted and failed threads of a page."""
    chosen = [t for t in threads if t.status in ("interrupted", "error")]
    if not chosen:
        return None
    return {
        "thread_ids": [t.thread_id for t in chosen],
        "checkpoint_ids": [t.checkpoint_id for t in chosen],
    }


def with_details(
    serde: SerializerProtocol,
    threads: list[ThreadInfo],
    writes: Sequence[Sequence[Any]],
    sizes: Sequence[Sequence[Any]] | None,
) -> list[ThreadInfo]:
    """The page's threads with their interrupts' values and errors (rows of
    thread_status_writes) and their sizes (rows of thread_sizes)."""
    from dataclasses import replace

    open_ = opener(serde)
    heads = {t.thread_id: t.checkpoint_id for t in threads}
    found: dict[str, dict[str, list[Any]]] = {}
    for thread_id, checkpoint_id, channel, task_id, idx, path, type_, blob in writes:
        if heads.get(thread_id) != checkpoint_id:
            continue
        place = ("write", thread_id, "", checkpoint_id, task_id, idx, channel, path)
        value = open_(type_, bytes(blob) if blob is not None else b"", place, channel)
        kind = "interrupts" if channel == "__interrupt__" else "errors"
        bucket = found.setdefault(thread_id, {"interrupts": [], "errors": []})[kind]
        # a task's __interrupt__ write holds a list of the interrupts it raised
        bucket.extend(value if kind == "interrupts" and isinstance(value, list) else [value])
    size = {r[0]: (int(r[1]), int(r[2])) for r in sizes or ()}
    out = []
    for t in threads:
        extra = found.get(t.thread_id, {"interrupts": [], "errors": []})
        n, b = size.get(t.thread_id, (None, None)) if sizes is not None else (None, None)
        out.append(
            replace(
                t,
                checkpoints=n,
                bytes=b,
                interrupts=extra["interrupts"],
                errors=extra["errors"],
            )
        )
    return out
