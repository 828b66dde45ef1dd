"""``RetryPolicy`` and which errors are transient (documented path); they live in ``db/retry.py``."""

from langgraph_pg_saver.db.retry import (
    DEFAULT_RETRY,
    NO_RETRY,
    RetryPolicy,
    is_transient,
    lost_connection,
    socket_readable,
)

__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "RetryPolicy",
    "is_transient",
    "lost_connection",
    "socket_readable",
]
