"""langgraph-pg-saver: a production Postgres checkpointer for LangGraph."""

from ._crypto import KeyringSerializer
from ._import import ImportReport
from ._lifecycle import Report
from .aio import AsyncPostgresSaver
from .errors import (
    ConcurrentUpdateError,
    ConnectionTimeoutError,
    CorruptValueError,
    DecryptionError,
    DeltaDependencyError,
    EncryptionKeyError,
    EntangledRunError,
    EventLoopError,
    InvalidInputError,
    InvalidSchemaNameError,
    ParentCheckpointMissingError,
    PgSaverError,
    PrivilegeError,
    SaverClosedError,
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
    StatementTimeoutError,
    ThreadNotEmptyError,
)
from .retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from .saver import PostgresSaver
from .store import PostgresStore
from .store_aio import AsyncPostgresStore

__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "AsyncPostgresSaver",
    "AsyncPostgresStore",
    "ConcurrentUpdateError",
    "ConnectionTimeoutError",
    "CorruptValueError",
    "DecryptionError",
    "DeltaDependencyError",
    "EncryptionKeyError",
    "EntangledRunError",
    "EventLoopError",
    "ImportReport",
    "InvalidInputError",
    "InvalidSchemaNameError",
    "KeyringSerializer",
    "ParentCheckpointMissingError",
    "PgSaverError",
    "PostgresSaver",
    "PostgresStore",
    "PrivilegeError",
    "Report",
    "RetryPolicy",
    "SaverClosedError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "StatementTimeoutError",
    "ThreadNotEmptyError",
]
