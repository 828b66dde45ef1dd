"""langgraph-pg-saver: a production Postgres checkpointer for LangGraph."""

from ._lifecycle import Report
from .aio import AsyncPostgresSaver
from .errors import (
    DeltaDependencyError,
    InvalidInputError,
    InvalidSchemaNameError,
    PgSaverError,
    SaverClosedError,
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
    ThreadNotEmptyError,
)
from .saver import PostgresSaver

__all__ = [
    "AsyncPostgresSaver",
    "DeltaDependencyError",
    "InvalidInputError",
    "InvalidSchemaNameError",
    "PgSaverError",
    "PostgresSaver",
    "Report",
    "SaverClosedError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "ThreadNotEmptyError",
]
