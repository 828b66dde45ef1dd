"""langgraph-pg-saver: a production Postgres checkpointer for LangGraph."""

from langgraph_pg_saver.cache import AsyncPostgresCache, PostgresCache
from langgraph_pg_saver.checkpoint.imports import ImportReport
from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.checkpoint.saver_async import AsyncPostgresSaver
from langgraph_pg_saver.codec.crypto import KeyringSerializer
from langgraph_pg_saver.db.retry import DEFAULT_RETRY, NO_RETRY, RetryPolicy
from langgraph_pg_saver.db.steps import Report
from langgraph_pg_saver.errors import (
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
    ReadOnlyError,
    SaverClosedError,
    SchemaError,
    SchemaMissingError,
    SchemaNotDistributedError,
    SchemaOutdatedError,
    SchemaTooNewError,
    StatementTimeoutError,
    ThreadDeletedError,
    ThreadNotEmptyError,
)
from langgraph_pg_saver.store.store import PostgresStore
from langgraph_pg_saver.store.store_async import AsyncPostgresStore

__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "AsyncPostgresCache",
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
    "PostgresCache",
    "PostgresSaver",
    "PostgresStore",
    "PrivilegeError",
    "ReadOnlyError",
    "Report",
    "RetryPolicy",
    "SaverClosedError",
    "SchemaError",
    "SchemaMissingError",
    "SchemaNotDistributedError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "StatementTimeoutError",
    "ThreadDeletedError",
    "ThreadNotEmptyError",
]
