"""The database's gauges in Prometheus's text format (``langgraph-pg-saver status --prometheus``),
for node_exporter's textfile collector or a scrape through a wrapper: what :func:`status` counts,
plus recent growth and the thread idle longest. Metric names and labels are documented in
docs/guide.md ("Monitoring")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from langgraph_pg_saver.ops.reports import Status, _queries, schema_version
from langgraph_pg_saver.saver import PostgresSaver

PREFIX = "langgraph_pg_saver_"
#: the migration that made the table of threads by status
THREAD_STATUS_MIGRATION = 14


@dataclass(frozen=True)
class Recent:
    checkpoints_last_hour: int
    checkpoints_last_day: int
    checkpoint_bytes_last_day: int
    oldest_thread_activity: datetime | None
    #: threads per status other than idle ("pending", "interrupted", "error"), as migration
    #: 0014's table records them; empty on a schema without it
    by_status: dict[str, int] = field(default_factory=dict)


def recent(saver: PostgresSaver) -> Recent:
    """Checkpoints made in the last hour and day, their rows' bytes over the day, and the last
    activity of the thread idle longest."""
    q = _queries(saver)
    row = saver._driver.fetch_one(q["ops_recent"], {})
    by_status: dict[str, int] = {}
    migration = schema_version(saver).migration or 0
    if migration >= THREAD_STATUS_MIGRATION:
        counted: dict[str, int] = dict(saver._driver.fetch_all(q["thread_status_counts"], {}))
        by_status = {k: int(counted.get(k, 0)) for k in ("pending", "interrupted", "error")}
    if row is None:  # an aggregate: always one row
        return Recent(0, 0, 0, None, by_status)
    return Recent(int(row[0]), int(row[1]), int(row[2]), row[3], by_status)


def _label(value: str) -> str:
    # the text format's escapes in a label value: backslash, double quote, newline
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def gauge(
        self, name: str, doc: str, samples: Iterable[tuple[dict[str, str], float | None]]
    ) -> None:
        rows = [(labels, value) for labels, value in samples if value is not None]
        if not rows:
            return  # a gauge with no value (no checkpoints yet) is left out, not written as 0
        self.lines.append(f"# HELP {PREFIX}{name} {doc}")
        self.lines.append(f"# TYPE {PREFIX}{name} gauge")
        for labels, value in rows:
            text = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            self.lines.append(f"{PREFIX}{name}{{{text}}} {_number(value)}")


def _seconds(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def render(status: Status, recent: Recent) -> str:
    """The text exposition of ``status`` and ``recent``: every metric is a gauge labelled with
    the schema (tables also with their name), ending with a newline."""
    out = _Out()
    s = {"schema": status.schema}
    out.gauge(
        "schema_migration", "Newest migration applied to the schema.", [(s, status.migration)]
    )
    out.gauge(
        "schema_migration_expected",
        "Newest migration this release knows (above schema_migration: run setup).",
        [(s, status.current_migration)],
    )
    out.gauge("threads", "Threads with at least one checkpoint.", [(s, status.threads)])
    out.gauge("checkpoints", "Checkpoints stored.", [(s, status.checkpoints)])
    out.gauge("writes", "Pending writes stored.", [(s, status.writes)])
    out.gauge("blobs", "Channel values stored.", [(s, status.blobs)])
    out.gauge(
        "checkpoints_last_hour",
        "Checkpoints made in the last hour.",
        [(s, recent.checkpoints_last_hour)],
    )
    out.gauge(
        "checkpoints_last_day",
        "Checkpoints made in the last 24 hours.",
        [(s, recent.checkpoints_last_day)],
    )
    out.gauge(
        "checkpoint_bytes_last_day",
        "Bytes of the checkpoint rows made in the last 24 hours (their channel values not included).",
        [(s, recent.checkpoint_bytes_last_day)],
    )
    out.gauge(
        "oldest_checkpoint_timestamp_seconds",
        "When the oldest stored checkpoint was made (Unix time).",
        [(s, _seconds(status.oldest_checkpoint))],
    )
    out.gauge(
        "newest_checkpoint_timestamp_seconds",
        "When the newest checkpoint was made (Unix time).",
        [(s, _seconds(status.newest_checkpoint))],
    )
    out.gauge(
        "oldest_thread_activity_timestamp_seconds",
        "Last activity of the thread idle longest (Unix time): what a retention job by idleness "
        "would remove first.",
        [(s, _seconds(recent.oldest_thread_activity))],
    )
    out.gauge(
        "threads_by_status",
        "Threads waiting on an interrupt (interrupted), whose last step raised (error), or with "
        "nodes scheduled and not finished (pending), as the saver recorded them.",
        [({**s, "status": k}, v) for k, v in recent.by_status.items()],
    )
    tables = [({**s, "table": t.table}, t) for t in status.tables]
    out.gauge("table_rows", "Rows of each table.", [(lb, t.rows) for lb, t in tables])
    out.gauge(
        "table_bytes",
        "Bytes of each table on disk, indexes and TOAST included.",
        [(lb, t.bytes) for lb, t in tables],
    )
    out.gauge(
        "table_dead_rows",
        "Dead rows of each table (space a VACUUM makes reusable).",
        [(lb, t.dead_rows) for lb, t in tables],
    )
    return "\n".join(out.lines) + "\n"
