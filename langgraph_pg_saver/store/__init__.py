"""The Store: LangGraph's ``BaseStore`` on Postgres (``PostgresStore``, ``AsyncPostgresStore``)."""

from langgraph_pg_saver.store.store import PostgresStore
from langgraph_pg_saver.store.store_async import AsyncPostgresStore

__all__ = ["AsyncPostgresStore", "PostgresStore"]
