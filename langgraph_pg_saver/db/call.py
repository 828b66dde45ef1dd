"""One statement as the driver runs it: :class:`Call`, decided whole by its caller.

A saver decides what an operation runs (the statement, the upsert to fall back to after a unique
violation, the call of a server-side function to send where nothing is prepared, what comes back)
and hands the driver one ``Call``. The driver keeps the policy of the connection: whether it
prepares, whether the functions are usable, the kept cursor; it chooses between the forms the
call carries, never which statement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from langgraph_pg_saver.db.policy import Params

#: what a call returns: nothing, its first row (or None), all its rows
NOTHING, ONE, ALL = 0, 1, 2

#: a statement to send instead on a connection that prepares nothing, and how to make its
#: parameters from the call's
Unprepared = tuple[bytes, Callable[[Params], Params]]


class Call(NamedTuple):
    """One statement and its variants (immutable: made per operation, handed to the driver)."""

    query: bytes
    params: Params
    #: ``NOTHING``, ``ONE`` or ``ALL``
    returns: int = NOTHING
    #: ``query`` is a plain INSERT that may hit a unique violation: this, its ``ON CONFLICT``
    #: twin, then runs instead. Only on a pooled connection in autocommit, where the failed
    #: statement ends only its own transaction; anywhere else (inside a caller's transaction,
    #: say) the upsert runs directly.
    upsert: bytes | None = None
    #: what ``query`` does as a call of our server-side function, sent instead on a connection
    #: that prepares nothing (behind a pooler), cheaper to parse and plan, and for a StatsPlan
    #: (get_tuple) on one that found the tables small (``policy.uses_function``): the
    #: function's plans are made under its own settings (migration 0011: enable_seqscan off), so
    #: they stay on the index whatever the statistics were when the session made them
    unprepared: Unprepared | None = None
    #: ``query`` and ``upsert`` calling none of our functions, sent instead once they cannot be
    #: called (a schema an older release migrated, a role without EXECUTE): put's statements
    #: call migration 0011's parent check
    plain: tuple[bytes, bytes | None] | None = None
    #: the result is small (one checkpoint's rows), so it may stay on the connection's kept
    #: cursor; the bytes in this column measure it, and a larger result closes the kept cursor
    size_column: int | None = None
