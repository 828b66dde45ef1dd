"""Errors raised by langgraph-pg-saver. All derive from :class:`PgSaverError`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg_pool import PoolTimeout


@dataclass(frozen=True)
class Hint:
    """What an error's message tells the reader to do, in the API's words (``api``: an argument,
    a method) and in the command line's (``cli``: its option or command)."""

    api: str
    cli: str


#: setup() is ``langgraph-pg-saver setup`` on the command line
SETUP_HINT = Hint("Run setup() (or `langgraph-pg-saver setup`)", "Run `langgraph-pg-saver setup`")
#: a strict KeyringSerializer's way out, for the API and for the command line
NO_STRICT_HINT = Hint("pass strict=False", "pass --no-strict")
#: what a reader of a standby does, for the API and for the command line
READ_ONLY_HINT = Hint(
    "Readers of a standby: pass read_only=True (reads then skip the store's TTL refresh, and "
    "writes are refused at once)",
    "Pass the primary's --dsn to write; the reading commands work on a standby as they are",
)
#: the same for a saver or store made with read_only=True
FLAGGED_HINT = Hint(
    "Write through a saver or store made without read_only=True",
    "Pass the primary's --dsn to write",
)
#: copy_thread's way to replace a target
OVERWRITE_HINT = Hint("Pass overwrite=True", "pass --overwrite")


class PgSaverError(Exception):
    """Base class of every error this package raises on its own account.

    ``hint``: what the message says to do, where the command line says it in other words (set by
    the error that builds its message with :meth:`_hinted`); ``str(error)`` says it the API's way,
    :meth:`cli_message` the command line's.
    """

    hint: Hint | None = None
    _around: tuple[str, str] = ("", "")

    def _hinted(self, before: str, hint: Hint, after: str = "") -> str:
        """The message ``before + hint.api + after``, its parts kept for :meth:`cli_message`."""
        self.hint = hint
        self._around = (before, after)
        return before + hint.api + after

    def cli_message(self) -> str:
        """The message as the command line prints it: the hint in its words."""
        if self.hint is None:
            return str(self)
        before, after = self._around
        return before + self.hint.cli + after


class InvalidSchemaNameError(PgSaverError, ValueError):
    """The ``schema=`` option is not a plain Postgres identifier."""

    def __init__(self, schema: object) -> None:
        self.schema = schema
        super().__init__(
            f"invalid schema name {schema!r}: use letters, digits and underscores "
            "(not starting with a digit), at most 63 characters"
        )


class SchemaError(PgSaverError):
    """The database schema does not match what this version of the package expects."""


class SchemaOutdatedError(SchemaError):
    """Migrations are missing: run ``setup()`` with a role that may create tables."""

    def __init__(self, schema: str, applied: Sequence[int], missing: Sequence[int]) -> None:
        self.schema = schema
        self.applied = tuple(applied)
        self.missing = tuple(missing)
        state = (
            "is not set up (no migrations applied)"
            if not self.applied
            else f"is at migration {max(self.applied)}"
        )
        super().__init__(
            self._hinted(
                f"checkpoint schema {schema!r} {state}; missing migrations {list(self.missing)}. ",
                SETUP_HINT,
                " with a role that may create tables in that schema.",
            )
        )


class SchemaNotDistributedError(SchemaError):
    """The database has the citus extension and parts of the schema are not distributed yet
    (``setup(check=True)``): run ``setup()``, which distributes them, or
    ``setup(distribute=False)`` to keep them on the coordinator (docs/scaling.md)."""

    def __init__(self, schema: str, missing: Sequence[str]) -> None:
        self.schema = schema
        self.missing = tuple(missing)
        super().__init__(
            f"checkpoint schema {schema!r}: citus is installed and these are not distributed "
            f"yet: {', '.join(self.missing)}. setup() distributes them (tables by thread_id, "
            "the migrations table as a reference table, functions by p_thread); "
            "setup(distribute=False) leaves the schema as it is"
        )


def _no_tables_hint(schema: str) -> Hint:
    return Hint(
        f"run setup() with schema={schema!r}, or pass the right schema and connection string",
        f"run `langgraph-pg-saver --schema {schema} setup`, or pass the right --schema / --dsn",
    )


class SchemaMissingError(SchemaError):
    """The schema holds no tables of langgraph-pg-saver (never set up, or another schema): what
    the operators' reports (``langgraph_pg_saver.ops``) raise; the savers raise SchemaOutdatedError."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        super().__init__(
            self._hinted(
                f"schema {schema!r} has no langgraph-pg-saver tables: ", _no_tables_hint(schema)
            )
        )


class SchemaTooNewError(SchemaError):
    """The database has migrations this version of the package does not know."""

    def __init__(self, schema: str, applied: Sequence[int], known: int) -> None:
        self.schema = schema
        self.applied = tuple(applied)
        self.known = known
        super().__init__(
            f"checkpoint schema {schema!r} is at migration {max(self.applied)}, newer than this "
            f"version of langgraph-pg-saver knows (up to {known}). Upgrade the package."
        )


class SaverClosedError(PgSaverError, RuntimeError):
    """The saver was closed (or never opened) and cannot run queries."""


class ConnectionTimeoutError(PgSaverError, PoolTimeout):
    """No connection within the pool's timeout: names the server, the time waited and the last
    connection error. A ``psycopg_pool.PoolTimeout``, as before."""


class ConcurrentUpdateError(PgSaverError):
    """With ``single_writer=True``: another writer extended the thread first. This put (and its run)
    lost the race: nothing of it was stored. ``thread_id``, ``checkpoint_ns``, ``parent_checkpoint_id``
    (what this put extended), ``newest_checkpoint_id`` (what the thread holds now) and
    ``checkpoint_id`` (the checkpoint not stored). Rerun the input on the thread as it is now."""

    def __init__(
        self,
        message: str,
        thread_id: str = "",
        checkpoint_ns: str = "",
        parent_checkpoint_id: str | None = None,
        newest_checkpoint_id: str = "",
        checkpoint_id: str = "",
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.parent_checkpoint_id = parent_checkpoint_id
        self.newest_checkpoint_id = newest_checkpoint_id
        self.checkpoint_id = checkpoint_id


class StatementTimeoutError(PgSaverError, TimeoutError):
    """A hot-path call ran longer than the saver's ``statement_timeout``, or the server's own
    ``statement_timeout`` (a role's or database's setting) cancelled a statement: nothing of it
    was stored. The message says which, and what to do."""


class PrivilegeError(PgSaverError):
    """The saver's role lacks a privilege a call needs. ``missing`` lists (table, privilege)
    pairs the role lacks among those the runtime role needs (docs/guide.md, "Roles without DDL rights")."""

    def __init__(self, message: str, missing: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


class EventLoopError(PgSaverError, RuntimeError):
    """The async saver was used on an event loop psycopg cannot run on (Windows' default
    ProactorEventLoop)."""


class InvalidInputError(PgSaverError, ValueError):
    """An argument cannot be stored as given; nothing was written."""


class ThreadNotEmptyError(PgSaverError, ValueError):
    """copy_thread's target already holds checkpoints (pass ``overwrite=True`` to replace them)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            self._hinted(
                f"copy_thread: target thread {thread_id!r} already has checkpoints; nothing was "
                "copied. ",
                OVERWRITE_HINT,
                " to replace them.",
            )
        )


class DeltaDependencyError(PgSaverError):
    """delete_for_runs would break the DeltaChannel state of checkpoints that survive it: they
    rebuild a DeltaChannel from a checkpoint of these runs, or from writes of these runs stored on
    their parent checkpoint (or, of format below 4, read their parent's Send packets)."""

    def __init__(
        self, run_ids: Sequence[str], dependents: Sequence[tuple[str, str, str, str]]
    ) -> None:
        self.run_ids = tuple(run_ids)
        #: (thread_id, checkpoint_ns, checkpoint_id, id of the parent it needs: a checkpoint of
        #: these runs, or one holding writes of these runs)
        self.dependents = tuple(dependents)
        shown = ", ".join(
            f"{t}/{ns or '(root)'}/{cid} needs {parent}"
            for t, ns, cid, parent in self.dependents[:5]
        )
        more = f" and {len(self.dependents) - 5} more" if len(self.dependents) > 5 else ""
        super().__init__(
            f"delete_for_runs refused: surviving checkpoints rebuild DeltaChannel state from checkpoints "
            f"or writes of these runs ({shown}{more}); nothing was deleted. Delete the dependent runs "
            "too, or prune instead."
        )


class EntangledRunError(PgSaverError):
    """delete_for_runs cannot tell some rows of these runs from rows of runs that stay, so it
    cannot delete them and leave those runs' checkpoints as they were: a write to a special
    channel (an interrupt, a resume value) that replaced another run's (resuming an interrupt that
    then interrupts again), or a subgraph's checkpoints that carry no run id (a run id given as the
    config's top-level ``run_id`` reaches only the root graph) of a task other runs wrote to."""

    def __init__(
        self,
        run_ids: Sequence[str],
        rows: Sequence[tuple[str, str, str | None, str, str | None, str, tuple[str | None, ...]]],
    ) -> None:
        self.run_ids = tuple(run_ids)
        #: (thread_id, checkpoint_ns, checkpoint_id or None for a subgraph namespace, task_id,
        #: channel or None, run_id, the run ids of the rows its write replaced)
        self.rows = tuple(rows)
        shown = []
        for t, ns, cid, task, channel, run, replaced in self.rows[:5]:
            if cid is None:
                shown.append(
                    f"subgraph namespace {t}/{ns} of task {task}, which run {run!r} resumed, holds "
                    "checkpoints without a run id"
                )
            else:
                earlier = ", ".join(
                    "a run without an id" if r is None else repr(r) for r in replaced
                )
                shown.append(
                    f"{t}/{ns or '(root)'}/{cid}: run {run!r}'s {channel} write of task {task} "
                    f"replaced the write of {earlier}"
                )
        more = f" and {len(self.rows) - 5} more" if len(self.rows) > 5 else ""
        super().__init__(
            f"delete_for_runs refused: {'; '.join(shown)}{more}. These rows cannot be deleted without "
            "changing checkpoints that stay; nothing was deleted. Delete the runs named too, or "
            "delete the thread. Runs that pass their run id in the config's metadata tag every row."
        )


class ParentCheckpointMissingError(PgSaverError):
    """put() named a parent checkpoint that is not stored, and the new checkpoint's state is not
    whole without it: a channel it keeps unchanged has no stored value, or one of its channels is a
    DeltaChannel version to rebuild from ancestors. Nothing was written.

    The run read the parent before, so it was stored somewhere: either this server never
    received it (a failover to a standby that had not replayed it yet: with asynchronous
    replication a standby lags, and its promotion loses the last commits of the old primary),
    or the thread was deleted or pruned while the run went on (``delete_thread``, ``prune``,
    ``retention``, ``delete_for_runs``). ``thread_id``, ``checkpoint_ns``, ``parent_id``."""

    def __init__(self, thread_id: str, checkpoint_ns: str, parent_id: str) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.parent_id = parent_id
        super().__init__(
            f"put: parent checkpoint {parent_id!r} of thread {thread_id!r} (namespace "
            f"{checkpoint_ns!r}) is not stored on this server, and this checkpoint's state is not "
            "whole without it (a channel value it keeps unchanged, or a DeltaChannel's "
            "ancestry); nothing was written. Either the server never received the parent (after "
            "a failover to a standby that had not replayed it: asynchronous replication lags, "
            "and a promotion loses the old primary's last commits), or the thread was deleted "
            "or pruned meanwhile. Read the thread again (get_state) and rerun the input from "
            "the checkpoint it holds now; synchronous replication keeps a failover from losing "
            "acknowledged checkpoints"
        )


class ThreadDeletedError(ParentCheckpointMissingError):
    """A put or put_writes of a run that started before its thread was deleted
    (``delete_thread``, ``prune(strategy="delete")``, ``retention``, the CLI's ``delete``):
    refused, so that the deleted thread does not come back. Nothing was written (writes of the
    refused checkpoint that came first were deleted too).

    A subclass of :class:`ParentCheckpointMissingError` (the run's parent checkpoint is gone):
    code that handles that handles this. ``operation`` (``put`` or ``put_writes``),
    ``thread_id``, ``checkpoint_ns``, ``checkpoint_id`` (the checkpoint the put's parent or the
    writes belong to; also ``parent_id``), ``deleted_at`` (the delete's time, as the server
    said it). A new run on the same thread id (no parent: ``invoke`` with input) works."""

    def __init__(
        self,
        operation: str,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        deleted_at: str,
    ) -> None:
        self.operation = operation
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.parent_id = checkpoint_id
        self.checkpoint_id = checkpoint_id
        self.deleted_at = deleted_at
        PgSaverError.__init__(
            self,
            f"{operation}: thread {thread_id!r} was deleted at {deleted_at} while a run on it "
            f"went on: its checkpoint {checkpoint_id!r} (namespace {checkpoint_ns!r}) is not "
            "stored (deleted with the thread, or refused since), and this late write was "
            "refused so that the deleted thread does not come back; nothing was written. A new "
            "run on the thread id starts afresh (invoke with input)",
        )


class ReadOnlyError(PgSaverError):
    """A write on a read-only server (a hot standby, a read replica, a database or role with
    ``default_transaction_read_only``), or on a saver or store made with ``read_only=True``,
    which refuses writes without asking the server. Nothing was written.

    ``server``: ``host:port/dbname`` (never the password); ``operation``: what was refused
    (``put``, ``prune``, ``setup``, ...; empty when the server refused a statement of an
    operation the driver does not name); ``flagged``: True when ``read_only=True`` refused it;
    ``standby``: True when the server said it is a standby (in recovery), False when it is a
    primary whose database or role is read-only, None when unknown (or flagged).
    Point writers at the primary (or at a multi-host connection string with
    ``target_session_attrs=read-write``, which follows a failover); keep ``read_only=True`` for
    savers and stores that read from a standby."""

    def __init__(
        self,
        owner: str,
        operation: str,
        server: str,
        *,
        flagged: bool,
        cause: str = "",
        standby: bool | None = None,
    ) -> None:
        self.owner = owner
        self.operation = operation
        self.server = server
        self.flagged = flagged
        self.standby = standby
        what = f"{owner}.{operation}()" if operation else owner
        if flagged:
            why = (
                f"{what} refused: this {_noun_of(owner)} was made with read_only=True (server "
                f"{server}), so it only reads; nothing was sent."
            )
        else:
            detail = f" ({cause})" if cause else ""
            kind = {
                True: "a hot standby, which replays the primary's changes and serves only reads",
                False: "a primary whose database, role or session sets "
                "default_transaction_read_only",
                None: "a hot standby or read replica, a read-only transaction of the caller's "
                "(BEGIN READ ONLY, SET TRANSACTION READ ONLY), or a database or role with "
                "default_transaction_read_only",
            }[standby]
            why = f"{what}: {server} is read-only: {kind}{detail}; nothing was written."
        super().__init__(
            self._hinted(
                f"{why} Writes need the primary: point the writer's connection string at it, or "
                "name every server in a multi-host connection string with "
                "target_session_attrs=read-write (it connects to whichever is the primary, also "
                "after a failover). ",
                FLAGGED_HINT if flagged else READ_ONLY_HINT,
            )
        )


def _noun_of(owner: str) -> str:
    return "store" if "Store" in owner else "saver"


class EncryptionKeyError(PgSaverError):
    """A stored value is encrypted with a key id the :class:`KeyringSerializer` does not hold (a
    key removed before ``reencrypt`` moved every row to a newer one, or another deployment's
    keyring). ``key_id`` names it; ``where`` says which value (thread, namespace, checkpoint,
    channel)."""

    def __init__(self, message: str, *, key_id: str | None = None, where: str = "") -> None:
        super().__init__(message)
        self.key_id = key_id
        self.where = where


class DecryptionError(PgSaverError, ValueError):
    """A stored value failed authentication: it was changed, truncated, or moved from another
    place (another thread, checkpoint, channel or version), or it is plaintext and the
    :class:`KeyringSerializer` is strict. ``where`` says which value. (A ValueError, as the
    ``MAC check failed`` of LangGraph's EncryptedSerializer is.)"""

    def __init__(self, message: str, *, key_id: str | None = None, where: str = "") -> None:
        super().__init__(message)
        self.key_id = key_id
        self.where = where

    @classmethod
    def unsealed(cls, where: str, stored: str, what: str) -> DecryptionError:
        """A strict KeyringSerializer's refusal of a value ``where`` that it did not seal
        (``stored``: how it is stored); ``what``: what ``strict=False`` reads then."""
        err = cls("", where=where)
        err.args = (
            err._hinted(
                f"{where} is {stored}, and the KeyringSerializer is strict (",
                NO_STRICT_HINT,
                f" to read such {what} while reencrypt converts them)",
            ),
        )
        return err


class CorruptValueError(PgSaverError, ValueError):
    """A stored value marked as compressed (its type ends in ``/zstd``) does not decompress: its
    bytes were changed or truncated outside the saver. Nothing is returned for it."""
