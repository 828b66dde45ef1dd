"""The LIFO connection pools (documented path); they live in ``db/pool.py``."""

from langgraph_pg_saver.db.pool import AsyncLifoConnectionPool, LifoConnectionPool
from langgraph_pg_saver.db.retry import is_transient

__all__ = ["AsyncLifoConnectionPool", "LifoConnectionPool", "is_transient"]
