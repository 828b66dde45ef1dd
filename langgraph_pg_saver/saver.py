"""``PostgresSaver`` under its earlier path (with the defaults this module held); the class lives
in ``checkpoint/saver.py``."""

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.db.driver import CLOSE_TIMEOUT
from langgraph_pg_saver.db.pool import DEFAULT_PREPARE_THRESHOLD
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA

__all__ = ["CLOSE_TIMEOUT", "DEFAULT_PREPARE_THRESHOLD", "DEFAULT_SCHEMA", "PostgresSaver"]
