"""The async saver's sync methods, made from its coroutine methods.

LangGraph calls a checkpointer's sync methods (``get_tuple``, ``put``, ...) from threads other than
the event loop's; the async saver answers them by running its coroutine twin (``a<name>``) on its
loop (``_run_sync``). Which methods get a bridge is derived from the classes, never listed: every
public ``a<name>`` coroutine (or async generator) method the async class defines whose ``<name>`` the
sync class has. ``tools/async_to_sync.py`` renames the same methods when it writes the sync saver.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Coroutine
from typing import Any, TypeVar

from langgraph_pg_saver.errors import PgSaverError

T = TypeVar("T")


def run_sync(
    loop: asyncio.AbstractEventLoop | None, coro: Coroutine[Any, Any, T], owner: str, inside: str
) -> T:
    """``coro`` run on ``loop`` (the async saver's or cache's) from another thread, its result
    waited for: what their sync methods do. Refused, ``coro`` closed unawaited, when the owner
    has no loop yet (PgSaverError) or the caller is on that loop's thread, where waiting would
    block it for good (asyncio.InvalidStateError; ``inside`` names the async methods to use)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None or running is loop:
        coro.close()
        if loop is None:
            raise PgSaverError(
                f"{owner} is not bound to an event loop yet: open it (or call an async "
                "method) inside your loop before using its synchronous methods from other threads"
            )
        raise asyncio.InvalidStateError(
            f"Synchronous calls to {owner} are only allowed from a thread other than "
            f"its event loop's; inside the loop use the async methods ({inside})"
        )
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def bridged(async_cls: type, sync_cls: type) -> tuple[str, ...]:
    """The names of the sync methods ``async_cls`` makes from its coroutine methods."""
    return tuple(
        attr[1:]
        for attr, value in vars(async_cls).items()
        if attr.startswith("a")
        and not attr.startswith("_")
        and (inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value))
        and callable(getattr(sync_cls, attr[1:], None))
    )


def bridge(async_cls: type, sync_cls: type, name: str) -> Any:
    """The sync method ``name`` of ``async_cls``: runs its coroutine ``a<name>`` on the instance's
    loop (``_run_sync``), with ``sync_cls``'s signature and docstring; an async generator's items
    are collected there and yielded."""
    async_name = f"a{name}"
    sync_method = getattr(sync_cls, name)

    if inspect.isasyncgenfunction(getattr(async_cls, async_name)):

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            async def collect() -> list[Any]:
                return [t async for t in getattr(self, async_name)(*args, **kwargs)]

            yield from self._run_sync(collect())

    else:

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return self._run_sync(getattr(self, async_name)(*args, **kwargs))

    method = functools.wraps(sync_method)(method)
    method.__qualname__ = f"{async_cls.__name__}.{name}"
    method.__module__ = async_cls.__module__
    return method


def install(async_cls: type, sync_cls: type) -> tuple[str, ...]:
    """Set a bridge on ``async_cls`` for each name of :func:`bridged`; returns the names."""
    names = bridged(async_cls, sync_cls)
    for name in names:
        setattr(async_cls, name, bridge(async_cls, sync_cls, name))
    return names
