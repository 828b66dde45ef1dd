"""The Store: LangGraph's ``BaseStore`` on Postgres (``PostgresStore``, ``AsyncPostgresStore``), and
the defaults the earlier ``store`` module held."""

from langgraph_pg_saver.db.driver import CLOSE_TIMEOUT
from langgraph_pg_saver.store.base import SEARCH_PAGE
from langgraph_pg_saver.store.store import DEFAULT_EF_SEARCH, SWEEP_BATCH, PostgresStore
from langgraph_pg_saver.store.store_async import AsyncPostgresStore

__all__ = [
    "CLOSE_TIMEOUT",
    "DEFAULT_EF_SEARCH",
    "SEARCH_PAGE",
    "SWEEP_BATCH",
    "AsyncPostgresStore",
    "PostgresStore",
]
