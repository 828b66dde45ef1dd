"""``AsyncPostgresStore`` under its earlier path (with the defaults it held); the class lives in
``store/store_async.py``."""

from langgraph_pg_saver.db.driver_async import CLOSE_TIMEOUT
from langgraph_pg_saver.store.base import SEARCH_PAGE
from langgraph_pg_saver.store.store_async import DEFAULT_EF_SEARCH, SWEEP_BATCH, AsyncPostgresStore

__all__ = ["CLOSE_TIMEOUT", "DEFAULT_EF_SEARCH", "SEARCH_PAGE", "SWEEP_BATCH", "AsyncPostgresStore"]
