"""``AsyncPostgresStore`` under the path the official store's users import it from
(``langgraph.store.postgres.aio``)."""

from langgraph_pg_saver.store.store_async import AsyncPostgresStore

__all__ = ["AsyncPostgresStore"]
