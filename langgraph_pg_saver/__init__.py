"""langgraph-pg-saver: a production Postgres checkpointer for LangGraph."""

from ._lifecycle import Report
from .aio import AsyncPostgresSaver
from .errors import (
    DeltaDependencyError,
    InvalidInputError,
    InvalidSchemaNameError,
    ParentCheckpointMissingError,
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
    "ParentCheckpointMissingError",
    "PgSaverError",
    "PostgresSaver",
    "Report",
    "SaverClosedError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "ThreadNotEmptyError",
]
