"""Errors raised by langgraph-pg-saver. All derive from :class:`PgSaverError`."""

from __future__ import annotations

from collections.abc import Sequence


class PgSaverError(Exception):
    """Base class of every error this package raises on its own account."""


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
            f"checkpoint schema {schema!r} {state}; missing migrations {list(self.missing)}. "
            "Run setup() (or `make`'s setup) with a role that may create tables in that schema."
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


class InvalidInputError(PgSaverError, ValueError):
    """An argument cannot be stored as given; nothing was written."""
