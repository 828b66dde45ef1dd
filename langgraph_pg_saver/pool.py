"""The LIFO connection pools (documented path); they live in ``db/pool.py``."""

from langgraph_pg_saver.db.pool import AsyncLifoConnectionPool, LifoConnectionPool

__all__ = ["AsyncLifoConnectionPool", "LifoConnectionPool"]
