"""The read-only reports: the schema's version, status, threads, a thread's history, a checkpoint's
state, and LangGraph's rule for the nodes a checkpoint schedules next."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.db import migrate as _migrate
from langgraph_pg_saver.db.driver import Driver
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.errors import SchemaMissingError


def _fields_of(obj: Any) -> dict[str, Any]:
    """A report's fields, in order, values as they are (``dataclasses.asdict`` would deep-copy
    decoded channel values)."""
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


class Record:
    """A report's row: :meth:`as_dict` is what ``--json`` prints of it."""

    def as_dict(self) -> dict[str, Any]:
        return _fields_of(self)


# --------------------------------------------------------------------------- the schema's version


@dataclass(frozen=True)
class SchemaVersion(Record):
    """Where a schema stands: whether it exists and holds our tables, the migrations applied
    (version: additive) and the newest this package knows (``head``)."""

    schema: str
    exists: bool
    tables: bool
    applied: dict[int, bool]
    head: int

    @property
    def migration(self) -> int | None:
        return max(self.applied) if self.applied else None

    def pending(self) -> list[int]:
        """The versions to apply; raises SchemaTooNewError when the schema is newer than this
        package knows."""
        return [m.version for m in _migrate.pending(self.schema, self.applied)]

    def require_tables(self) -> SchemaVersion:
        """Itself; raises :class:`SchemaMissingError` without our tables."""
        if not self.tables:
            raise SchemaMissingError(self.schema)
        return self


def _queries(saver: PostgresSaver) -> Queries:
    """The saver's statements for its database: on Citus their ``__citus`` forms (found once per
    saver, one catalog read), which the reports' scans across threads need."""
    saver._driver.find_citus()
    return saver._q


def schema_version(saver: PostgresSaver) -> SchemaVersion:
    """The one reading of a schema's version (status, threads, doctor). A role that may not read
    ``pgsaver_migrations`` gets the driver's PrivilegeError."""
    return _schema_version(saver._driver)


def _schema_version(driver: Driver) -> SchemaVersion:
    q = driver.q
    row = driver.fetch_one(q["ops_schema"], {"schema": q.schema})
    exists, tables = (bool(row[0]), bool(row[1])) if row is not None else (False, False)
    applied: dict[int, bool] = {}
    if tables:
        applied = _migrate.applied_from_rows(driver.fetch_all(q["migrations_applied"], {}))
    return SchemaVersion(q.schema, exists, tables, applied, _migrate.head())


# --------------------------------------------------------------------------- status, threads


@dataclass(frozen=True)
class TableRow(Record):
    table: str
    rows: int | None
    bytes: int
    dead_rows: int


@dataclass(frozen=True)
class ThreadRow(Record):
    thread_id: str
    checkpoints: int
    bytes: int
    last_activity: datetime | None


@dataclass(frozen=True)
class Status(Record):
    schema: str
    migration: int | None
    current_migration: int
    tables: list[TableRow]
    threads: int
    checkpoints: int
    writes: int
    blobs: int
    oldest_checkpoint: datetime | None
    newest_checkpoint: datetime | None
    top_by_bytes: list[ThreadRow]
    top_by_checkpoints: list[ThreadRow]

    def as_dict(self) -> dict[str, Any]:
        out = _fields_of(self)
        for key in ("tables", "top_by_bytes", "top_by_checkpoints"):
            out[key] = [_fields_of(r) for r in out[key]]
        return out


def status(saver: PostgresSaver, top: int = 10) -> Status:
    """The schema's version, its tables (rows counted exactly where cheap enough to), threads,
    the oldest and newest checkpoint, and the ``top`` largest and longest threads. Raises
    :class:`SchemaMissingError` without our tables."""
    version = schema_version(saver).require_tables()
    driver = saver._driver
    q = _queries(saver)
    tables = driver.fetch_all(q["ops_tables"], {"schema": q.schema})
    counts = driver.fetch_one(q["ops_counts"], {})
    assert counts is not None  # an aggregate: one row
    n_threads, checkpoints, writes, blobs, oldest, newest = counts
    items = None
    if any(t[0] == "pgsaver_store" for t in tables):
        row = driver.fetch_one(q["ops_store_count"], {})
        items = row[0] if row is not None else 0
    exact = {
        "pgsaver_checkpoints": checkpoints,
        "pgsaver_writes": writes,
        "pgsaver_blobs": blobs,
        "pgsaver_store": items,
        "pgsaver_migrations": len(version.applied),
    }
    return Status(
        schema=q.schema,
        migration=version.migration,
        current_migration=version.head,
        tables=[TableRow(t[0], exact.get(t[0], t[1]), t[2], t[5]) for t in tables],
        threads=n_threads,
        checkpoints=checkpoints,
        writes=writes,
        blobs=blobs,
        oldest_checkpoint=oldest,
        newest_checkpoint=newest,
        top_by_bytes=threads(saver, limit=top, order="bytes") if top else [],
        top_by_checkpoints=threads(saver, limit=top, order="checkpoints") if top else [],
    )


def threads(
    saver: PostgresSaver,
    flt: Mapping[str, Any] | None = None,
    idle_for: timedelta | None = None,
    limit: int | None = None,
    order: str = "activity",
) -> list[ThreadRow]:
    """Threads with their last activity, checkpoints and bytes (rows of all four tables, parts
    of lists stored as their elements included): newest activity first (``order="activity"``), or the largest (``"bytes"``) or longest
    (``"checkpoints"``) first; only those with a checkpoint whose metadata holds ``flt``, or idle
    longer than ``idle_for``."""
    driver, q = saver._driver, _queries(saver)
    rows = driver.fetch_all(
        q["ops_threads"],
        {
            "filter": json.dumps(flt) if flt else None,
            "idle_for": idle_for,
            "limit": limit,
            "order": order,
        },
    )
    return [ThreadRow(r[0], r[1], int(r[2]), r[3]) for r in rows]


def thread_count(saver: PostgresSaver, start_after: str = "") -> int:
    """How many threads sort after ``start_after`` (what a prune of them all walks)."""
    driver, q = saver._driver, _queries(saver)
    row = driver.fetch_one(q["ops_thread_count"], {"after": start_after})
    return int(row[0]) if row is not None else 0


# --------------------------------------------------------------------------- growth


@dataclass(frozen=True)
class GrowthRow(Record):
    #: the start of the hour or day (the server's time zone)
    at: datetime
    checkpoints: int
    #: bytes of the checkpoints' rows, of the pending writes after them and of the channel
    #: values they stored anew
    bytes: int


@dataclass(frozen=True)
class SizeRow(Record):
    #: the metadata key's value on the threads' newest checkpoint (None: not there)
    value: Any
    threads: int
    checkpoints: int
    bytes: int


def growth(saver: PostgresSaver, window: timedelta, unit: str = "day") -> list[GrowthRow]:
    """What was written in each ``unit`` ("hour" or "day") of the last ``window``, oldest first,
    every hour or day of it present (0 where nothing was written): checkpoints, and bytes as
    :class:`GrowthRow` counts them. Reads every checkpoint made in the window."""
    if unit not in ("hour", "day"):
        raise ValueError(f"unit must be 'hour' or 'day', not {unit!r}")
    driver, q = saver._driver, _queries(saver)
    buckets = [r[0] for r in driver.fetch_all(q["ops_buckets"], {"unit": unit, "window": window})]
    if not buckets:
        return []
    rows = driver.fetch_all(q["ops_growth"], {"unit": unit, "since": buckets[0]})

    def instant(at: datetime) -> datetime:
        # compared as instants: two hours of a night the clocks go back differ only in fold
        return at.astimezone(timezone.utc) if at.tzinfo is not None else at

    found = {instant(r[0]): GrowthRow(r[0], int(r[1]), int(r[2])) for r in rows}
    return [found.get(instant(at), GrowthRow(at, 0, 0)) for at in buckets]


def sizes_by(saver: PostgresSaver, key: str, limit: int | None = None) -> list[SizeRow]:
    """Threads, checkpoints and bytes (rows of all four tables, parts included) by the value of
    metadata ``key`` on each thread's newest checkpoint, the largest first: what each tenant (user,
    project...) holds."""
    driver, q = saver._driver, _queries(saver)
    rows = driver.fetch_all(q["ops_sizes_by"], {"key": key, "limit": limit})
    return [SizeRow(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]


# --------------------------------------------------------------------------- history, show


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


@dataclass(frozen=True)
class HistoryRow(Record):
    """One checkpoint of a thread: its run id as stored (the one delete_for_runs takes), the
    nodes it schedules next, its pending writes' (task, channel) and the rest of its metadata."""

    checkpoint_id: str
    checkpoint_ns: str
    run_id: str | None
    parent_checkpoint_id: str | None
    step: Any
    source: Any
    next: list[str]
    writes: list[list[str]]
    metadata: dict[str, Any]
    #: when LangGraph made it (the checkpoint's ``ts``, ISO 8601)
    ts: str | None = None


def history(
    saver: PostgresSaver, thread_id: str, checkpoint_ns: str | None = None, limit: int | None = None
) -> list[HistoryRow]:
    """A thread's newest ``limit`` checkpoints, newest first across namespaces: of every
    namespace (None), of the root (""), or of a namespace and those below it (a subgraph's
    node name: ``"research"`` is ``research:<task id>`` and its nested ones); [] for a thread
    without checkpoints."""
    driver, q = saver._driver, _queries(saver)
    ids = driver.fetch_all(
        q["ops_history_ids"], {"thread_id": thread_id, "ns": checkpoint_ns, "limit": limit}
    )
    found = []
    for ns, cid in ids:
        config = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}
        }
        tup = saver.get_tuple(config)  # type: ignore[arg-type]
        if tup is not None:  # (pruned since the ids were read)
            found.append(tup)
    if not found:
        return []
    # a top-level config run id is not in the metadata: the column is what delete_for_runs reads
    driver = saver._driver
    stored = driver.fetch_all(driver.q["ops_run_ids"], {"thread_id": thread_id})
    runs = {(ns, cid): run for ns, cid, run in stored}
    rows = []
    for t in found:
        meta = dict(t.metadata or {})
        conf = t.config["configurable"]
        rows.append(
            HistoryRow(
                checkpoint_id=conf["checkpoint_id"],
                checkpoint_ns=conf["checkpoint_ns"],
                run_id=runs.get((conf["checkpoint_ns"], conf["checkpoint_id"])),
                parent_checkpoint_id=(t.parent_config or {})
                .get("configurable", {})
                .get("checkpoint_id"),
                step=meta.pop("step", None),
                source=meta.pop("source", None),
                next=next_nodes(t.checkpoint),
                writes=[[task, channel] for task, channel, _ in t.pending_writes or ()],
                metadata=meta,
                ts=t.checkpoint.get("ts"),
            )
        )
    return rows


@dataclass(frozen=True)
class Shown(Record):
    """A checkpoint's state: its channel values as stored (LangGraph's internal channels only
    when asked), and for each DeltaChannel whose value is not stored at it, its seed and the
    writes since (``delta_channels``: the graph's reducer rebuilds the value)."""

    checkpoint_id: str
    metadata: dict[str, Any]
    next: list[str]
    values: dict[str, Any]
    delta_channels: dict[str, dict[str, Any]]
    pending_writes: list[tuple[str, str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = _fields_of(self)
        out["pending_writes"] = [list(w) for w in self.pending_writes]
        return out


def full_checkpoint_id(
    saver: PostgresSaver, thread_id: str, checkpoint_id: str, checkpoint_ns: str = ""
) -> str:
    """``checkpoint_id`` as given when a checkpoint has it, else the id of the one checkpoint
    of the namespace that ends with it (a short id); unchanged when none does. Raises
    ``ValueError`` when several do."""
    checkpoint_id = checkpoint_id.lstrip("…")  # pasted from history's short form
    driver, q = saver._driver, _queries(saver)
    found = [
        r[0]
        for r in driver.fetch_all(
            q["ops_checkpoint_suffix"],
            {"thread_id": thread_id, "ns": checkpoint_ns, "suffix": checkpoint_id},
        )
    ]
    if checkpoint_id in found or not found:
        return checkpoint_id
    if len(found) > 1:
        raise ValueError(
            f"{checkpoint_id!r} ends more than one checkpoint of thread {thread_id!r} "
            f"({', '.join(found)}, ...): give more of the id"
        )
    return str(found[0])


def show(
    saver: PostgresSaver,
    thread_id: str,
    checkpoint_id: str | None = None,
    checkpoint_ns: str = "",
    show_all: bool = False,
) -> Shown | None:
    """A checkpoint (the newest of the namespace without ``checkpoint_id``; an id's end, as
    ``history`` prints it short, names the one it ends), or None. Raises ``ValueError`` when
    the end of an id is that of more than one checkpoint."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = full_checkpoint_id(
            saver, thread_id, checkpoint_id, checkpoint_ns
        )
    tup = saver.get_tuple({"configurable": configurable})
    if tup is None:
        return None
    values: dict[str, Any] = {}
    for k, v in tup.checkpoint["channel_values"].items():
        if show_all or not (k.startswith("branch:") or k.startswith("__")):
            values[k] = getattr(v, "value", v) if type(v).__name__ == "_DeltaSnapshot" else v
    counters = (tup.metadata or {}).get("counters_since_delta_snapshot") or {}
    versions = tup.checkpoint.get("channel_versions") or {}
    rebuilt = [c for c in counters if c in versions and c not in values]
    delta: dict[str, dict[str, Any]] = {}
    if rebuilt:
        found = saver.get_delta_channel_history(config=tup.config, channels=rebuilt)
        for channel, entry in found.items():
            seed = entry.get("seed")
            delta[channel] = {
                "seed": getattr(seed, "value", seed),
                "writes": [value for _, _, value in entry["writes"]],
            }
    return Shown(
        checkpoint_id=tup.config["configurable"]["checkpoint_id"],
        metadata=tup.metadata,  # type: ignore[arg-type]
        next=next_nodes(tup.checkpoint),
        values=values,
        delta_channels=delta,
        pending_writes=list(tup.pending_writes or ()),
    )


def human_bytes(n: int | None) -> str:
    """``n`` bytes for people (``-`` when unknown): 1024-based, one decimal above bytes."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def one_line(exc: BaseException) -> str:
    """An error's message on one line (its type's name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())
