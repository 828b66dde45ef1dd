"""``AsyncPostgresStore`` under its earlier path; the class lives in ``store/store_async.py``."""

from langgraph_pg_saver.store.store_async import AsyncPostgresStore

__all__ = ["AsyncPostgresStore"]
