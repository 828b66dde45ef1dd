"""A role with a tight server-side statement_timeout (250 ms, ``ALTER ROLE ... SET
statement_timeout``) reads the whole history of a 50,000-checkpoint thread, through the savers and
through a compiled graph, and copies it: list pages, copy_thread batches within one transaction.
What still runs as one long statement fails with StatementTimeoutError naming the remedy."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from graphs import two_nodes
from longthread import replicate
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver, StatementTimeoutError

N = 50_000
#: a subgraph namespace of the long thread: every 100th step, the same ids as the root's there
SUB_NS = "inner:6f1c"
SUB_N = N // 100

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def long_dsn(db_dsn: str) -> Iterator[tuple[str, str]]:
    """(admin DSN, DSN of a role whose statement_timeout is 250 ms) of a database holding thread
    "long": N root checkpoints and SUB_N of a subgraph namespace whose ids tie with root ids."""
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        # about 1 KB of text per value, as a chat turn (words, so compression saves what it
        # saves on text)
        rng = random.Random(50_000)
        words = [f"w{rng.randrange(10**6)}" for _ in range(2_000)]
        payload = " ".join(rng.choice(words) for _ in range(150))
        for turn in range(2):
            graph.invoke({"foo": payload, "bar": [payload, str(turn)]}, _cfg("seed"))
    role = f"lgps_st_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(db_dsn, autocommit=True) as admin:
        replicate(admin, "seed", "long", N)
        replicate(admin, "seed", "long", SUB_N, ns=SUB_NS, start=50, step=100)
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON pgsaver_checkpoints, pgsaver_blobs, "
            f"pgsaver_elements, pgsaver_writes, pgsaver_migrations, pgsaver_deleted_threads TO {role}"
        )
        admin.execute(f"ALTER ROLE {role} SET statement_timeout = '250ms'")
    params = conninfo_to_dict(db_dsn)
    params["user"] = role
    try:
        yield db_dsn, make_conninfo(**params)  # type: ignore[arg-type]
    finally:
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
            )
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def _cfg(thread: str, ns: str | None = None, **extra: Any) -> Any:
    configurable: dict[str, Any] = {"thread_id": thread, **extra}
    if ns is not None:
        configurable["checkpoint_ns"] = ns
    return {"configurable": configurable}


def _order(dsn: str, thread: str, ns: str | None = None) -> list[tuple[str, str]]:
    """(namespace, id) of a thread's checkpoints in list()'s order: id descending, then namespace."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT checkpoint_ns, checkpoint_id FROM pgsaver_checkpoints WHERE thread_id = %s"
            " AND (%s::text IS NULL OR checkpoint_ns = %s)"
            ' ORDER BY checkpoint_id COLLATE "C" DESC, checkpoint_ns COLLATE "C"',
            (thread, ns, ns),
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


def _keys(tuples: Any) -> list[tuple[str, str]]:
    return [
        (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"])
        for t in tuples
    ]


def test_sync_history_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    admin, app = long_dsn
    expected = _order(admin, "long")
    assert len(expected) == N + SUB_N
    root = [k for k in expected if k[0] == ""]
    with PostgresSaver.from_conn_string(app) as saver:
        # the whole thread, every namespace: id descending, ties by namespace
        tuples = list(saver.list(_cfg("long")))
        assert _keys(tuples) == expected
        assert tuples[-1].parent_config is None
        # every page opens its values and writes (the template's: the seed's newest with writes)
        assert all(len(t.checkpoint["channel_values"]["bar"]) > 2 for t in tuples[::499])
        assert all(t.pending_writes for t in tuples[::499])
        del tuples
        # one namespace, a limit above a page
        assert _keys(saver.list(_cfg("long", ""), limit=N - 7)) == root[: N - 7]
        # before, and a filter the SQL prefilter cannot select exactly (the saver checks the
        # candidates' metadata, page by page)
        before = _cfg("long", "", checkpoint_id=root[N // 2][1])
        odd = {"parity": 1, "nope": None}
        assert _keys(saver.list(_cfg("long", ""), before=before, filter=odd)) == [
            k for k in root[N // 2 + 1 :] if int(k[1][-12:], 16) % 3 == 1
        ]
        # lazily: a caller that stops early reads only the first page
        assert _keys([next(iter(saver.list(_cfg("long"))))]) == expected[:1]


def test_sync_state_history_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    admin, app = long_dsn
    root = [k[1] for k in _order(admin, "long", "")]
    with PostgresSaver.from_conn_string(app) as saver:
        graph = two_nodes().compile(checkpointer=saver)
        ids = [
            s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(_cfg("long"))
        ]
        assert ids == root


async def test_async_history_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    admin, app = long_dsn
    expected = _order(admin, "long")
    parity = [k for k in expected if int(k[1][-12:], 16) % 3 == 1]
    async with AsyncPostgresSaver.from_conn_string(app) as saver:
        # a filter the prefilter selects exactly, with a limit above a page
        found = [t async for t in saver.alist(_cfg("long"), filter={"parity": 1}, limit=15_000)]
        assert _keys(found) == parity[:15_000]
        del found
        graph = two_nodes().compile(checkpointer=saver)
        history = [s async for s in graph.aget_state_history(_cfg("long"))]
        assert [s.config["configurable"]["checkpoint_id"] for s in history] == [
            k[1] for k in expected if k[0] == ""
        ]


def _dump(dsn: str, thread: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of a thread, without its thread id, sorted."""
    with psycopg.connect(dsn) as conn:
        return {
            table: sorted(
                conn.execute(
                    f"SELECT {cols} FROM {table} WHERE thread_id = %s ORDER BY 1, 2, 3", (thread,)
                ).fetchall()
            )
            for table, cols in (
                (
                    "pgsaver_checkpoints",
                    "checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type,"
                    " checkpoint, channel_versions::text, metadata::text, metadata_exact",
                ),
                ("pgsaver_blobs", "checkpoint_ns, channel, version, type, blob"),
                (
                    "pgsaver_writes",
                    "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path,"
                    " run_id, replaced_run_ids",
                ),
            )
        }


def test_sync_copy_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    admin, app = long_dsn
    source = _dump(admin, "long")
    with PostgresSaver.from_conn_string(app) as saver:
        report = saver.copy_thread("long", "copy")
        assert (report.checkpoints, report.writes, report.blobs) == (
            len(source["pgsaver_checkpoints"]),
            len(source["pgsaver_writes"]),
            len(source["pgsaver_blobs"]),
        )
        assert _dump(admin, "copy") == source
        # the copy reads as the source does
        assert [t.checkpoint for t in saver.list(_cfg("copy"), limit=3)] == [
            t.checkpoint for t in saver.list(_cfg("long"), limit=3)
        ]


async def test_async_copy_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    admin, app = long_dsn
    source = _dump(admin, "long")
    async with AsyncPostgresSaver.from_conn_string(app) as saver:
        report = await saver.acopy_thread("long", "copy")
        assert report.checkpoints == N + SUB_N
        assert _dump(admin, "copy") == source


def test_delete_thread_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    """delete_thread is one statement; when the server's statement_timeout cancels it (here made
    certain: a trigger sleeps 0.3 s after a statement deletes more than 5,000 checkpoints), the
    saver deletes the thread again in short statements, in one transaction."""
    admin, app = long_dsn
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(SLOW_BIG_DELETES)
    with PostgresSaver.from_conn_string(app) as saver:
        saver.delete_thread("long")
        assert saver.get_tuple(_cfg("long")) is None
    assert _dump(admin, "long") == {
        "pgsaver_checkpoints": [],
        "pgsaver_blobs": [],
        "pgsaver_writes": [],
    }
    assert len(_dump(admin, "seed")["pgsaver_checkpoints"]) > 0


def test_a_long_statement_names_the_timeout(long_dsn: tuple[str, str]) -> None:
    """What is still one statement (prune with strategy="delete": the threads in one statement)
    fails with the library's error, which names the server's statement_timeout and what to do;
    the saver's own timeout keeps its own message."""
    admin, app = long_dsn
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(SLOW_BIG_DELETES)
    with PostgresSaver.from_conn_string(app) as saver:
        with pytest.raises(StatementTimeoutError, match="the server cancelled") as info:
            saver.prune(["long"], strategy="delete")
        assert isinstance(info.value.__cause__, psycopg.errors.QueryCanceled)
        assert "ALTER ROLE" in str(info.value)
        assert "prune(keep_latest)" in str(info.value)
        assert saver.get_tuple(_cfg("long")) is not None  # nothing of it was stored


async def test_async_delete_thread_of_a_long_thread(long_dsn: tuple[str, str]) -> None:
    admin, app = long_dsn
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(SLOW_BIG_DELETES)
    async with AsyncPostgresSaver.from_conn_string(app) as saver:
        await saver.adelete_thread("long")
        assert await saver.aget_tuple(_cfg("long")) is None
        # any statement the server cancels at its statement_timeout: the library's error
        with pytest.raises(StatementTimeoutError, match="the server cancelled"):
            await _slow(saver)


async def _slow(saver: AsyncPostgresSaver) -> None:
    """A statement the server cancels (pg_sleep past the role's 250 ms), sent by the driver."""
    await saver._driver.execute(b"SELECT pg_sleep(0.5)", {})


#: an AFTER DELETE statement trigger that sleeps past the role's statement_timeout when one
#: statement deletes more than 5,000 checkpoints
SLOW_BIG_DELETES = """
CREATE FUNCTION lgps_slow_big_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM gone) > 5000 THEN PERFORM pg_sleep(0.3); END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER lgps_slow_big_deletes AFTER DELETE ON pgsaver_checkpoints
REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION lgps_slow_big_deletes();
"""
