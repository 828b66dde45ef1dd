"""``AsyncPostgresSaver`` under the path the official saver's users import it from
(``langgraph.checkpoint.postgres.aio``), with the defaults this module held; the class lives in
``checkpoint/saver_async.py``."""

from langgraph_pg_saver.checkpoint.saver_async import AsyncPostgresSaver
from langgraph_pg_saver.db.driver_async import CLOSE_TIMEOUT
from langgraph_pg_saver.db.pool import DEFAULT_PREPARE_THRESHOLD
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA

__all__ = ["CLOSE_TIMEOUT", "DEFAULT_PREPARE_THRESHOLD", "DEFAULT_SCHEMA", "AsyncPostgresSaver"]
