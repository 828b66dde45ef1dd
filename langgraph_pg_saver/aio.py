"""``AsyncPostgresSaver`` under the path the official saver's users import it from
(``langgraph.checkpoint.postgres.aio``); the class lives in ``checkpoint/saver_async.py``."""

from langgraph_pg_saver.checkpoint.saver_async import AsyncPostgresSaver

__all__ = ["AsyncPostgresSaver"]
