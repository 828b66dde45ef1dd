"""The verification of an import: what the official saver reads against what we do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.ops.reports import Record


@dataclass(frozen=True)
class ImportVerification(Record):
    threads: int
    checkpoints: int
    different: list[str]


def verify_import(
    saver: PostgresSaver, source_schema: str, start_after: str = ""
) -> ImportVerification:
    """Every checkpoint imported and still held here, as the official saver reads it and as we
    do: the same checkpoint, metadata, parent and pending writes (writes added here since aside),
    and the same DeltaChannel history at the newest of them in each namespace. Checkpoints
    pruned or deleted here, or written here, are not compared. Needs langgraph-checkpoint-postgres
    (an ImportError without it). The official saver reads on a connection of its own, to the
    saver's database, so its search_path and prepared statements never reach the saver's
    connections, and a saver on one connection or a pool of one does not wait for itself."""
    from langgraph.checkpoint.postgres import PostgresSaver as OfficialSaver

    q = saver._driver.q
    different: list[str] = []
    compared = 0
    with _source_connection(saver) as conn, conn.cursor() as cur:
        # the official saver names its tables unqualified
        cur.execute(q["ops_search_path"], {"path": sql.Identifier(source_schema).as_string()})
        cur.execute(q["ops_source_threads"], {"after": start_after})
        ids = [r[0] for r in cur.fetchall()]
        official = OfficialSaver(conn)
        for thread in ids:
            held, same = _compare_thread(official, saver, thread)
            compared += held
            if not same:
                different.append(thread)
    return ImportVerification(len(ids), compared, different)


def _source_connection(saver: PostgresSaver) -> psycopg.Connection[Any]:
    """A new connection to the saver's database, in autocommit, with its pool's settings."""
    driver = saver._driver
    if driver.pool is not None:
        # psycopg_pool takes either as a value or as a function called per connection
        given, extra = driver.pool.conninfo, driver.pool.kwargs
        conninfo = given() if callable(given) else given
        extra = (extra() if callable(extra) else extra) or {}
        kwargs = {k: v for k, v in extra.items() if k not in _NOT_CONNINFO}
    else:
        assert driver.conn is not None  # a driver holds a pool or a connection
        info = driver.conn.info
        conninfo = make_conninfo(info.dsn, **({"password": info.password} if info.password else {}))
        kwargs = {}
    return psycopg.connect(conninfo, **{**kwargs, "autocommit": True})


#: the pool's connection arguments that are not connection parameters
_NOT_CONNINFO = frozenset(
    {"autocommit", "row_factory", "cursor_factory", "context", "prepare_threshold"}
)


def _compare_thread(official: Any, saver: PostgresSaver, thread: str) -> tuple[int, bool]:
    """How many checkpoints of ``thread`` both hold, and whether they read the same."""
    cfg: Any = {"configurable": {"thread_id": thread}}
    theirs = {_key(t): t for t in official.list(cfg)}
    ours = {_key(t): t for t in saver.list(cfg)}
    held = sorted(set(theirs) & set(ours))
    if not all(_same_checkpoint(theirs[k], ours[k]) for k in held):
        return len(held), False
    newest: dict[str, str] = {}
    for ns, cid in held:
        newest[ns] = max(cid, newest.get(ns, cid))
    for ns, cid in newest.items():
        channels = sorted(
            {
                ch
                for (n, _), t in theirs.items()
                if n == ns
                for ch in t.metadata.get("counters_since_delta_snapshot") or {}
            }
        )
        if channels:
            at: Any = {
                "configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}
            }
            if official.get_delta_channel_history(
                config=at, channels=channels
            ) != saver.get_delta_channel_history(config=at, channels=channels):
                return len(held), False
    return len(held), True


def _key(t: Any) -> tuple[str, str]:
    c = t.config["configurable"]
    return (c.get("checkpoint_ns", ""), c["checkpoint_id"])


def _same_checkpoint(theirs: Any, ours: Any) -> bool:
    """One checkpoint as both savers read it; our pending writes may hold more (written here
    since), theirs in the same order among them."""
    if (theirs.config, theirs.checkpoint, theirs.metadata, theirs.parent_config) != (
        ours.config,
        ours.checkpoint,
        ours.metadata,
        ours.parent_config,
    ):
        return False
    mine = iter(ours.pending_writes or [])
    return all(any(w == m for m in mine) for w in theirs.pending_writes or [])
