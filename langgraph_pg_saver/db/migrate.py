"""setup(): apply pending migrations safely when many workers start at once.

Protocol (the same for the sync and async savers):

1. Fast path: one ``SELECT`` of the applied versions, no lock. If the schema is current, done.
2. Otherwise, in one transaction: take a transaction-scoped advisory lock keyed by the schema name,
   create the schema and the migrations table if needed, re-read the applied versions *under the lock*
   (another worker may have finished meanwhile), apply what is still missing, record it, commit.

Transaction-scoped locks are released by COMMIT/ROLLBACK, so they also work through a
transaction-mode pooler, and a crashed worker never leaves the lock behind.

A database with migrations newer than the code is refused (SchemaTooNewError) unless every one of them
is additive: marked "-- additive" in its file and recorded with that flag when applied, it leaves the
tables in a shape older code understands.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_pg_saver.db.sql import Migration, migrations
from langgraph_pg_saver.errors import SchemaOutdatedError, SchemaTooNewError


def lock_key(schema: str) -> int:
    """A stable signed 64-bit advisory-lock key for one schema's migrations."""
    digest = hashlib.blake2b(
        f"langgraph_pg_saver:migrate:{schema}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def head() -> int:
    return len(migrations())


def applied_from_rows(rows: Sequence[Sequence[Any]]) -> dict[int, bool]:
    """The rows of the migrations_applied query: version -> additive."""
    return {int(r[0]): bool(r[1]) for r in rows}


def pending(schema: str, applied: Mapping[int, bool] | None) -> tuple[Migration, ...]:
    """The migrations still to apply, given the applied versions and whether each is additive.

    Raises if the database has a migration this code does not know that is not additive: a newer
    release changed the schema in a way this code may not understand. Additive ones (marked
    "-- additive" in their file, recorded when applied) leave the tables usable by older code, so a
    worker of an older release that restarts during a rolling deploy keeps working.
    """
    done = dict(applied or {})
    known = migrations()
    newer = [v for v in done if v > len(known)]
    if newer and not all(done[v] for v in newer):
        raise SchemaTooNewError(schema, sorted(done), len(known))
    return tuple(m for m in known if m.version not in done)


def check(schema: str, applied: Mapping[int, bool] | None) -> None:
    """Raise unless every known migration is applied (check-only mode)."""
    todo = pending(schema, applied)
    if todo:
        raise SchemaOutdatedError(schema, sorted(applied or {}), [m.version for m in todo])


def script(schema: str, *, after: int = 0, distribute: bool = True) -> str:
    """The SQL of ``setup()`` as one script for a DBA or a migration tool (``langgraph-pg-saver
    setup --sql``): the migrations after ``after`` (0: from an empty database), each recorded as
    setup() records it, in one transaction under setup()'s lock; then, with ``distribute``, the
    step that distributes the schema where the database has the citus extension (a no-op
    elsewhere: setup()'s default). No connection is made."""
    from langgraph_pg_saver.db.sql import queries_for

    q = queries_for(schema)
    known = migrations()
    if after < 0 or after > len(known):
        raise ValueError(f"--from must be between 0 and {len(known)}, not {after}")
    table = f"{q.schema_sql}.pgsaver_migrations"
    parts = [
        f"-- langgraph-pg-saver schema {schema!r}: migrations {after + 1}..{len(known)}",
        "BEGIN;",
        f"SELECT pg_advisory_xact_lock({lock_key(schema)});",
        q["schema_create"].decode() + ";",
        q["migrations_bootstrap"].decode() + ";",
        q["migrations_bootstrap_additive"].decode() + ";",
    ]
    for mig in known[after:]:
        parts.append(f"\n-- {mig.version:04d}_{mig.name}.sql")
        text = q.migration(mig).decode().strip()
        parts.append(text if text.endswith(";") else text + ";")
        parts.append(
            f"INSERT INTO {table} (version, name, additive) VALUES ({mig.version}, "
            f"'{mig.name}', {'true' if mig.additive else 'false'}) ON CONFLICT (version) DO NOTHING;"
        )
    if distribute:
        parts.append("\n-- Citus: distribute the schema where the citus extension is installed")
        parts.append(q["citus_distribute"].decode().strip() + ";")
    parts.append("COMMIT;")
    if distribute:
        parts.append(
            "-- Citus: the writes' estimate on each shard (after the commit that made them)"
        )
        parts.append(q["citus_shard_options"].decode().strip() + ";")
    return "\n".join(parts) + "\n"
