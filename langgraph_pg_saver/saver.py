"""``PostgresSaver`` under its earlier path; the class lives in ``checkpoint/saver.py``."""

from langgraph_pg_saver.checkpoint.saver import PostgresSaver

__all__ = ["PostgresSaver"]
