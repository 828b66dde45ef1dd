"""Operators' reports over a saver: the schema's version, what the tables hold, a thread's history
and state, the doctor's checks, the verification of an import. No click or rich: the command line
(``cli/``) only formats what these return.

Every statement is a named query of ``sql/queries.sql`` (``ops_*``) sent through the saver's driver,
so a report gets the saver's retries on transient errors and its diagnosis of a missing privilege
(:class:`~langgraph_pg_saver.errors.PrivilegeError`). They scan whole tables where they must: an
operator's command, never the agents' hot path.
"""

from langgraph_pg_saver.errors import SchemaMissingError
from langgraph_pg_saver.ops.doctor import Check, DoctorReport, doctor
from langgraph_pg_saver.ops.reports import (
    GrowthRow,
    HistoryRow,
    Record,
    SchemaVersion,
    Shown,
    SizeRow,
    Status,
    TableRow,
    ThreadRow,
    growth,
    history,
    next_nodes,
    one_line,
    schema_version,
    show,
    sizes_by,
    status,
    thread_count,
    threads,
)
from langgraph_pg_saver.ops.verify import ImportVerification, verify_import

__all__ = [
    "Check",
    "DoctorReport",
    "GrowthRow",
    "HistoryRow",
    "ImportVerification",
    "Record",
    "SchemaMissingError",
    "SchemaVersion",
    "Shown",
    "SizeRow",
    "Status",
    "TableRow",
    "ThreadRow",
    "doctor",
    "growth",
    "history",
    "next_nodes",
    "one_line",
    "schema_version",
    "show",
    "sizes_by",
    "status",
    "thread_count",
    "threads",
    "verify_import",
]
