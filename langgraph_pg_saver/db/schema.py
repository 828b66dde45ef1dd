# generated from langgraph_pg_saver/db/schema_async.py by tools/async_to_sync.py: do not edit
# (change langgraph_pg_saver/db/schema_async.py, then run `make generate`)
"""Migrations and health checks over a :class:`Driver`: what ``setup()`` and ``healthcheck()``
of the sync saver and store run. Generated from the async module of the same name
(``make generate``)."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from psycopg import Cursor, errors
from psycopg.rows import TupleRow

from langgraph_pg_saver.db import migrate as _migrate
from langgraph_pg_saver.db.driver import Driver
from langgraph_pg_saver.db.policy import IDLE, closed_error, in_pipeline, read_only_error
from langgraph_pg_saver.db.sql import Queries
from langgraph_pg_saver.errors import (
    InvalidInputError,
    PgSaverError,
    PrivilegeError,
    SchemaNotDistributedError,
)

logger = logging.getLogger(__name__)

_MISSING_SCHEMA = (errors.UndefinedTable, errors.InvalidSchemaName)
_monotonic = time.monotonic


#: healthcheck()'s bound, by default: a readiness probe answers within it whatever the pool does
HEALTHCHECK_TIMEOUT = 2.0


def healthcheck(driver: Driver, timeout: float = HEALTHCHECK_TIMEOUT) -> dict[str, Any]:
    """One round trip, no retry: whether the server answers and the schema is current. Waits at
    most ``timeout`` seconds for a connection (not the pool's own wait), so a probe answers
    within about that while the server is down."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds, not {timeout!r}")
    started = _monotonic()
    report: dict[str, Any] = {"ok": False, "reachable": False, "schema_current": False}
    try:
        with driver.connection(timeout) as conn, driver.cursor_on(conn) as cur:
            applied = _read_applied(cur, driver.q)
        report["reachable"] = True
        report["round_trip_ms"] = round((_monotonic() - started) * 1000, 3)
        report["schema_current"] = applied is not None and not _migrate.pending(
            driver.q.schema, applied
        )
        report["ok"] = report["schema_current"]
        if not report["schema_current"]:
            report["error"] = "the schema needs setup() (migrations are pending)"
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}".strip()
    report["stats"] = driver.stats()
    return report


def migrate(driver: Driver, *, check: bool, distribute: bool | None = None) -> None:
    """Apply the pending migrations under the migration lock (see ``db/migrate.py``); with
    ``check``, change nothing and raise unless the schema is current.

    Rerun after a transient error (a lost connection, a restart, a failover) per the driver's
    retry policy, as every other call is: the whole protocol is idempotent (the applied versions
    are read again under the lock, each migration is recorded in the transaction that applies
    it), so a rerun after a COMMIT whose outcome is unknown applies nothing twice."""
    if distribute is not None and not isinstance(distribute, bool):
        raise InvalidInputError(f"distribute must be True, False or None, not {distribute!r}")
    retry = 0
    while True:
        try:
            citus = _migrate_once(driver, check=check)
            if distribute is not False and citus is not False:
                _distribute(driver, check=check, required=distribute is True)
            elif distribute is True:
                raise _no_citus(driver)
            return
        except errors.InsufficientPrivilege as exc:
            raise _privilege_error(driver, exc, check=check) from exc
        except errors.ReadOnlySqlTransaction as exc:
            standby = driver._in_recovery()
            raise read_only_error(
                driver.owner, exc, driver.server(), "setup", standby=standby
            ) from exc
        except Exception as exc:
            retry += 1
            if not driver._may_retry(exc, retry):
                if driver.closed and not isinstance(exc, PgSaverError):
                    raise closed_error(driver.owner) from exc
                raise


def _privilege_error(
    driver: Driver, exc: errors.InsufficientPrivilege, *, check: bool
) -> PrivilegeError:
    schema = driver.q.schema
    if check:
        return PrivilegeError(
            f"{driver.owner}.setup(check=True): permission denied ({str(exc).strip()}): "
            "checking the schema needs SELECT on pgsaver_migrations and USAGE on schema "
            f"{schema} (docs/guide.md, 'Roles without DDL rights')"
        )
    return PrivilegeError(
        f"{driver.owner}.setup(): permission denied ({str(exc).strip()}): applying the "
        f"schema's migrations needs a role that may create tables in schema "
        f"{schema} (and the schema itself if it does not exist). Run setup() once "
        "with such a role (a deploy step), and setup(check=True) in the application "
        "(docs/guide.md, 'Roles without DDL rights')"
    )


def _migrate_once(driver: Driver, *, check: bool) -> bool | None:
    """Apply what is pending; returns whether citus is installed when the schema was current
    already (its fast path's one query says), else None."""
    q = driver.q
    with driver.cursor() as cur:
        rows = _applied_rows(cur, q)
        applied = None if rows is None else _migrate.applied_from_rows(rows)
        if not _migrate.pending(q.schema, applied):
            if rows:
                driver.state.citus = bool(rows[0][2])
                driver.state.lists = True  # migration 0015 is applied
                driver.state.deleted = True  # and 0018
            return bool(rows and rows[0][2])
        if check:
            _migrate.check(q.schema, applied)
        # a saver or store made with read_only=True: the schema is behind, and this one may not
        # change it (a standby whose primary has not been set up with this release)
        driver.refuse_write("setup")
        conn = cur.connection
        if in_pipeline(conn):
            raise PgSaverError(
                "setup() cannot apply migrations on a connection in pipeline mode (their DDL "
                "runs as several statements at once): call setup() before entering "
                "conn.pipeline(), or on another connection"
            )
        with conn.transaction():
            key = {"key": _migrate.lock_key(q.schema)}
            cur.execute(q["migrations_lock"], key, prepare=False)
            cur.execute(q["schema_exists"], {"schema": q.schema}, prepare=False)
            row = cur.fetchone()
            if not (row and row[0]):
                cur.execute(q["schema_create"], prepare=False)
            cur.execute(q["migrations_bootstrap"], prepare=False)
            cur.execute(q["migrations_bootstrap_additive"], prepare=False)
            cur.execute(q["migrations_applied"], prepare=False)
            applied = _migrate.applied_from_rows(cur.fetchall())
            for mig in _migrate.pending(q.schema, applied):
                logger.info(
                    "applying migration %04d_%s to schema %s", mig.version, mig.name, q.schema
                )
                # several statements: the simple query protocol of a text cursor
                with conn.cursor(binary=False) as ddl:
                    ddl.execute(q.migration(mig), prepare=False)
                cur.execute(
                    q["migrations_record"],
                    {"version": mig.version, "name": mig.name, "additive": mig.additive},
                    prepare=False,
                )
    driver.state.lists = True  # migration 0015 is applied (committed)
    driver.state.deleted = True  # and 0018
    return None


def _no_citus(driver: Driver) -> PgSaverError:
    return PgSaverError(
        f"{driver.owner}.setup(distribute=True): this database has no citus extension "
        "(CREATE EXTENSION citus, on a Citus coordinator): nothing was distributed"
    )


def _distribute(driver: Driver, *, check: bool, required: bool) -> None:
    """Where the database has the citus extension: distribute what of the schema is not yet
    (``citus_missing``; docs/scaling.md, "What setup() distributes"), in a transaction of its own
    under the migration lock; with ``check``, raise naming it instead. ``required``
    (``setup(distribute=True)``): a database without citus is an error."""
    q = driver.q
    with driver.cursor() as cur:
        cur.execute(q["citus_installed"], prepare=False)
        row = cur.fetchone()
        driver.state.citus = bool(row and row[0])
        driver.state.lists = bool(row and row[1])
        driver.state.deleted = bool(row and row[2])
        if not (row and row[0]):
            if required:
                raise _no_citus(driver)
            return
        cur.execute(q["citus_missing"], prepare=False)
        missing = [str(r[0]) for r in cur.fetchall()]
        if not missing:
            return
        if check:
            raise SchemaNotDistributedError(q.schema, missing)
        driver.refuse_write("setup")
        conn = cur.connection
        with conn.transaction():
            cur.execute(q["migrations_lock"], {"key": _migrate.lock_key(q.schema)}, prepare=False)
            logger.info("distributing schema %s on Citus: %s", q.schema, ", ".join(missing))
            with conn.cursor(binary=False) as ddl:
                ddl.execute(q["citus_distribute"], prepare=False)
        # the shards made above are visible to other connections only now
        with conn.cursor(binary=False) as ddl:
            ddl.execute(q["citus_shard_options"], prepare=False)


def _read_applied(cur: Cursor[TupleRow], q: Queries) -> dict[int, bool] | None:
    rows = _applied_rows(cur, q)
    return None if rows is None else _migrate.applied_from_rows(rows)


def _applied_rows(cur: Cursor[TupleRow], q: Queries) -> list[TupleRow] | None:
    """migrations_applied's rows (each also says whether citus is installed); None: no table."""
    conn = cur.connection
    # inside the caller's transaction, a savepoint keeps a missing table from aborting it
    guard = contextlib.nullcontext() if conn.info.transaction_status == IDLE else conn.transaction()
    try:
        with guard:
            cur.execute(q["migrations_applied"], prepare=False)
            rows = cur.fetchall()
    except _MISSING_SCHEMA:
        return None
    return rows
