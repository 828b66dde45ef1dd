# generated from langgraph_pg_saver/db/owner_async.py by tools/async_to_sync.py: do not edit
# (change langgraph_pg_saver/db/owner_async.py, then run `make generate`)
"""PoolOwner: what the sync saver and store share as owners of a connection pool.

Generated from the async module of the same name (``make generate``)."""

from __future__ import annotations

import types
from types import TracebackType
from typing import Any, ClassVar

from psycopg_pool import ConnectionPool
from typing_extensions import Self

from langgraph_pg_saver.db import pool as _pool
from langgraph_pg_saver.db.driver import CLOSE_TIMEOUT, Driver


class PoolOwner:
    """A class whose instances run their statements through a driver (``_driver``), and may own
    its pool (made by their ``from_conn_string``).

    ``_noun`` ("saver", "store") is the word the docstrings of ``open`` and ``close`` use: each
    subclass gets its own copy of them, worded for it.
    """

    _driver: Driver
    _noun: ClassVar[str] = "owner"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("open", "close"):
            method = vars(PoolOwner)[name]
            if getattr(cls, name) is not method:  # its own, or a subclass's copy already
                continue
            worded = types.FunctionType(
                method.__code__,
                method.__globals__,
                name,
                method.__defaults__,
                method.__closure__,
            )
            worded.__kwdefaults__ = method.__kwdefaults__
            worded.__annotations__ = dict(method.__annotations__)
            worded.__doc__ = (method.__doc__ or "").format(noun=cls._noun)
            worded.__qualname__ = f"{cls.__qualname__}.{name}"
            worded.__module__ = cls.__module__
            setattr(cls, name, worded)

    @staticmethod
    def _owned_pool(
        conn_string: str,
        *,
        name: str,
        min_size: int,
        max_size: int,
        prepare_threshold: int | None,
        connect_kwargs: dict[str, Any] | None,
        timeout: float,
        pool_kwargs: dict[str, Any] | None = None,
    ) -> ConnectionPool[Any]:
        """The pool ``from_conn_string`` makes (closed until :meth:`open`): LIFO, with the
        connection settings and pool options of ``db/pool.py``."""
        kwargs = _pool.connect_kwargs(conn_string, prepare_threshold, connect_kwargs)
        pool: ConnectionPool[Any] = _pool.LifoConnectionPool(
            conn_string,
            min_size=min_size,
            max_size=max_size,
            kwargs=kwargs,
            open=False,
            name=name,
            **_pool.pool_options(timeout, pool_kwargs),
        )
        return pool

    def _own_pool(self) -> Self:
        """This instance owns its pool (from_conn_string): open and close open and close it."""
        self._driver.own_pool()
        return self

    def open(self, *, wait: bool = True, timeout: float | None = None) -> Self:
        """Open the pool this {noun} owns (a no-op for a pool or connection you passed in),
        waiting up to ``timeout`` seconds (None: from_conn_string's ``timeout=``) for its first
        connections; ``ConnectionTimeoutError``, naming the server and the last connection error,
        when they do not come (the pool is then closed: make a new {noun} to try again)."""
        self._driver.open(wait=wait, timeout=timeout)
        return self

    def close(self, timeout: float | None = CLOSE_TIMEOUT) -> None:
        """Close the {noun}: new calls raise ``SaverClosedError`` at once; calls still running get
        up to ``timeout`` seconds (None: as long as they take), then are cancelled on the server,
        and close returns only once they have ended, so nothing of this {noun} commits after it
        (they raise ``SaverClosedError``). Closes the pool only if ``from_conn_string`` created
        it."""
        self._driver.close(timeout)

    def __enter__(self) -> Self:
        if self._driver.closed:
            self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
