"""langgraph-pg-saver: a production Postgres checkpointer for LangGraph."""

from .aio import AsyncPostgresSaver
from .errors import (
    InvalidInputError,
    InvalidSchemaNameError,
    PgSaverError,
    SaverClosedError,
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
)
from .saver import PostgresSaver

__all__ = [
    "AsyncPostgresSaver",
    "InvalidInputError",
    "InvalidSchemaNameError",
    "PgSaverError",
    "PostgresSaver",
    "SaverClosedError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
]
