"""setup(): apply pending migrations safely when many workers start at once.

Protocol (the same for the sync and async savers):

1. Fast path: one ``SELECT`` of the applied versions, no lock. If the schema is current, done.
2. Otherwise, in one transaction: take a transaction-scoped advisory lock keyed by the schema name,
   create the schema and the migrations table if needed, re-read the applied versions *under the lock*
   (another worker may have finished meanwhile), apply what is still missing, record it, commit.

Transaction-scoped locks are released by COMMIT/ROLLBACK, so they also work through a
transaction-mode pooler, and a crashed worker never leaves the lock behind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from ._sql import Migration, migrations
from .errors import SchemaOutdatedError, SchemaTooNewError


def lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory-lock key for one schema's migrations."""
    digest = hashlib.blake2b(
        f"langgraph_pg_saver:migrate:{schema}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def head() -> int:
    return len(migrations())


def pending(schema: str, applied: Sequence[int] | None) -> tuple[Migration, ...]:
    """The migrations still to apply; raises if the database is newer than this code."""
    done = set(applied or ())
    known = migrations()
    if done and max(done) > len(known):
        raise SchemaTooNewError(schema, sorted(done), len(known))
    return tuple(m for m in known if m.version not in done)


def check(schema: str, applied: Sequence[int] | None) -> None:
    """Raise unless every known migration is applied (check-only mode)."""
    todo = pending(schema, applied)
    if todo:
        raise SchemaOutdatedError(schema, sorted(applied or ()), [m.version for m in todo])
