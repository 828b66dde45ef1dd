"""The step protocol between I/O-free operations and the driver that runs them.

An operation (a lifecycle job, a store batch) is a generator that yields :class:`Step` objects
(statements to run in one transaction on one pooled connection) and receives the rows of each step's
last statement; the sync and async drivers run the same generators (``Driver.drive``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_pg_saver.db.policy import prepare_flag
from langgraph_pg_saver.db.sql import StatsPlan
from langgraph_pg_saver.errors import InvalidInputError

Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Stmt:
    """One statement. ``prepare=False``: never a server-side prepared statement (lifecycle work is rare
    and heavy, so planning costs little and a generic plan could cost a lot); ``None``: follow the
    connection's ``prepare_threshold`` (statements on an agent's hot path)."""

    query: bytes
    params: Mapping[str, Any] | None = None
    prepare: bool | None = False


@dataclass(frozen=True)
class Step:
    """Statements run in order in one transaction (a lone statement runs on its own, atomically).

    ``then``: called with the rows of the last statement; the Step it returns (or None) runs next
    in the same transaction, and so on; the rows of the last statement run go back to the
    generator. It must depend only on the rows: a step rerun after a transient error calls it
    again.
    """

    statements: tuple[Stmt, ...]
    lock_timeout: float | None = None
    then: Callable[[Rows], Step | None] | None = dataclasses.field(default=None, compare=False)

    @property
    def transactional(self) -> bool:
        return len(self.statements) > 1 or self.lock_timeout is not None or self.then is not None


Steps = Generator[Step, Rows, Any]


def first_query(step: Step) -> bytes:
    """The statement of ``step`` that decides its connection's first-use check: its first
    StatsPlan (a store batch's delete), else none."""
    return next((s.query for s in step.statements if isinstance(s.query, StatsPlan)), b"")


def prepare(stmt: Stmt, conn: Any) -> bool | None:
    """execute()'s ``prepare`` for ``stmt`` on ``conn``: its own, and for ``None`` what the
    driver's policy says for the statement (``policy.prepare_flag``)."""
    return stmt.prepare if stmt.prepare is not None else prepare_flag(stmt.query, conn)


def lock_timeout_param(seconds: float) -> str:
    return f"{max(1, int(seconds * 1000))}ms"


@dataclass
class Report:
    """What a lifecycle operation removed (or, in a dry run, would remove)."""

    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0
    bytes: int = 0
    dry_run: bool = False
    batches: int = 0
    #: the last thread id fully processed: pass it as ``start_after`` to resume an interrupted run
    last_thread_id: str | None = None
    #: the ids given that matched nothing (threads; run ids for ``delete_for_runs``), sorted: an
    #: unknown id is not an error (LangGraph's contract), but it is named here
    missing: list[str] = dataclasses.field(default_factory=list)

    def add(self, other: Report) -> None:
        for f in ("threads", "checkpoints", "writes", "blobs", "bytes", "batches"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.missing = sorted({*self.missing, *other.missing})

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def batch_size(batch: int) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidInputError(f"batch size must be a positive int, not {batch!r}")
    return batch
