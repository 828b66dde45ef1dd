"""list(None, filter=..., limit=...) across threads (migration 0008): first a walk of the newest
checkpoints on the checkpoint-id index (read_tuples_recent, prepared), which is the answer when
enough of them match; else every match when fewer than 5,000 checkpoints match (read_tuples_capped:
the GIN index for a selective filter), sorted; only when more (or none) match, the statement over
the whole table, with the filter and the limit visible to the planner at every call
(read_tuples_global, never prepared), which walks the id index where the statistics say matches
are dense and takes the GIN index where they are sparse. On a table of 30,000 checkpoints with
analyzed statistics the plans are shown; the answers always equal a sort of the whole table's
matches, whatever the shape (dense, sparse, many matches but none of the newest, a `before`)."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
import pytest
from helpers import checkpoint, config, traced
from test_indexes import plan_nodes

from langgraph_pg_saver import PostgresSaver
from langgraph_pg_saver.db import policy
from langgraph_pg_saver.db.sql import WALKS

THREADS, PER_THREAD = 1000, 30
ID_INDEX = "pgsaver_checkpoints_id_idx"
GIN_INDEX = "pgsaver_checkpoints_metadata_idx"


@pytest.fixture
def table(db_dsn: str) -> str:
    """THREADS threads of PER_THREAD checkpoints: one real thread stored by the saver (so rows look
    as it writes them), copied in SQL; metadata {"tenant": "acme", "user": "u-<thread % 1000>",
    "step": n}; analyzed."""
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        cfg = config("t-0")
        for step in range(PER_THREAD):
            cp = checkpoint({"v": step}, {"v": str(step + 1)})
            cfg = saver.put(
                cfg, cp, {"tenant": "acme", "user": "u-0", "step": step}, {"v": str(step + 1)}
            )
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        cols = [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
                " AND table_name = 'pgsaver_checkpoints' ORDER BY ordinal_position"
            ).fetchall()
        ]
        picked = ", ".join(
            "'t-' || g"
            if c == "thread_id"
            else "jsonb_set(metadata, '{user}', to_jsonb('u-' || g))"
            if c == "metadata"
            else c
            for c in cols
        )
        conn.execute(
            f"INSERT INTO pgsaver_checkpoints ({', '.join(cols)}) SELECT {picked}"  # type: ignore[arg-type]
            f" FROM pgsaver_checkpoints CROSS JOIN generate_series(1, {THREADS - 1}) AS g"
            " WHERE thread_id = 't-0'"
        )
        conn.execute(
            "INSERT INTO pgsaver_blobs SELECT 't-' || g, checkpoint_ns, channel, version, type,"
            f" blob FROM pgsaver_blobs CROSS JOIN generate_series(1, {THREADS - 1}) AS g"
            " WHERE thread_id = 't-0'"
        )
        conn.execute("ANALYZE pgsaver_checkpoints")
    return db_dsn


def plan_of_k(
    dsn: str, saver: PostgresSaver, flt: dict[str, Any], phase: int
) -> set[tuple[str, ...]]:
    """How list(None, filter=flt, limit=10)'s statement of ``phase`` (1: the walk of the newest,
    2: every match if fewer than 5,000, 3: over the whole table, planned with these parameters)
    finds its checkpoints: the scan nodes that apply the filter, as (node type, index or table,
    direction). (Each chosen checkpoint is then looked up by its whole key, on either index.)"""
    query = (
        saver._q.recent("read_tuples", ("filter",), 10)
        if phase == 1
        else saver._q.capped("read_tuples", ("filter",))
        if phase == 2
        else saver._q.read_tuples(("filter",))
    )
    assert query is not None
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            b"EXPLAIN (FORMAT JSON) " + query,
            {"filter": json.dumps(flt), "limit": 10},
            prepare=False,
        ).fetchone()
    assert row is not None
    found = set()
    for n in plan_nodes(row[0]):
        conds = " ".join(str(n.get(k, "")) for k in ("Filter", "Index Cond", "Recheck Cond"))
        if "metadata @>" in conds or (
            phase == 1 and n.get("Index Name") == ID_INDEX and "Scan Direction" in n
        ):
            where = n.get("Index Name") or n.get("Relation Name", "?")
            found.add((n["Node Type"], where, n.get("Scan Direction", "")))
    return found


@pytest.mark.slow
def test_the_plan_fits_the_filter_dense_walks_the_id_index_sparse_uses_gin(table: str) -> None:
    with PostgresSaver.from_conn_string(table) as saver:
        # the first phase walks the id index newest first, whatever the filter
        for flt in ({"tenant": "acme"}, {"user": "u-7"}):
            walk = plan_of_k(table, saver, flt, phase=1)
            assert ("Index Scan", ID_INDEX, "Backward") in walk, walk
            assert GIN_INDEX not in {i for _, i, _ in walk}, walk
        # the second, every match if fewer than 5,000: 30 of 30,000 match, so the GIN index (a
        # bitmap); every checkpoint matches, so a scan of the table that stops at the 5,000th
        sparse_all = plan_of_k(table, saver, {"user": "u-7"}, phase=2)
        assert sparse_all == {
            ("Bitmap Index Scan", GIN_INDEX, ""),
            ("Bitmap Heap Scan", "pgsaver_checkpoints", ""),
        }, sparse_all
        dense_all = plan_of_k(table, saver, {"tenant": "acme"}, phase=2)
        assert dense_all == {("Seq Scan", "pgsaver_checkpoints", "")}, dense_all
        # the third: every checkpoint matches, so newest first through the id index, stopping at 10
        dense_plan = plan_of_k(table, saver, {"tenant": "acme"}, phase=3)
        assert dense_plan == {("Index Scan", ID_INDEX, "Backward")}, dense_plan
        # 30 of 30,000 match: the GIN index (a bitmap), then a sort of the 30
        sparse_plan = plan_of_k(table, saver, {"user": "u-7"}, phase=3)
        assert sparse_plan == {
            ("Bitmap Index Scan", GIN_INDEX, ""),
            ("Bitmap Heap Scan", "pgsaver_checkpoints", ""),
        }, sparse_plan

        dense = list(saver.list(None, filter={"tenant": "acme"}, limit=10))
        sparse = list(saver.list(None, filter={"user": "u-7"}, limit=10))
        everything = list(saver.list(None, filter={"user": "u-7"}))
    with psycopg.connect(table) as conn:
        newest = conn.execute(
            "SELECT checkpoint_id FROM pgsaver_checkpoints ORDER BY checkpoint_id DESC LIMIT 10"
        ).fetchall()
    assert [t.config["configurable"]["checkpoint_id"] for t in dense] == [r[0] for r in newest]
    assert len(sparse) == 10
    assert {t.config["configurable"]["thread_id"] for t in everything} == {"t-7"}
    assert len(everything) == PER_THREAD
    assert [t.checkpoint["id"] for t in sparse] == [t.checkpoint["id"] for t in everything[:10]]
    assert all(t.metadata["user"] == "u-7" for t in everything)


@pytest.mark.parametrize("name", ["read_tuples", "list_keys"])
def test_the_first_phase_walks_the_index_even_as_a_generic_plan(table: str, name: str) -> None:
    """The saver prepares the first phase, so after five calls Postgres may run a generic plan.
    Its walk's length is a constant of the statement, and a generic plan must still take the id
    index, on a table whose ids do not follow its physical order. (A hidden limit, costed as a tenth
    of the table, planned the reads of values and writes for that many rows: 63-64 ms at a million
    checkpoints in make bench's defaults and pooler mode. At this table's size the plan's shape
    stays right even then, so what catches that regression here is the walk's row estimate: the
    Limit over the id index is planned for at most the walk's length, not a tenth of the table.)"""
    with psycopg.connect(table, autocommit=True) as conn:
        # rows in an order their ids do not follow: the id index is not correlated with the heap
        conn.execute(
            "CREATE TEMP TABLE shuffled AS SELECT * FROM pgsaver_checkpoints ORDER BY random()"
        )
        conn.execute("DELETE FROM pgsaver_checkpoints")
        conn.execute("INSERT INTO pgsaver_checkpoints SELECT * FROM shuffled")
        conn.execute("VACUUM ANALYZE pgsaver_checkpoints")
        saver = PostgresSaver(conn)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for limit in (1, 10, 100):
            query = saver._q.recent(name, ("filter",), limit)
            assert query is not None
            row = conn.execute(
                b"EXPLAIN (FORMAT JSON) " + query,
                {"filter": '{"tenant": "acme"}', "limit": limit},
                prepare=True,
            ).fetchone()
            assert row is not None
            nodes = plan_nodes(row[0])
            walks = [n for n in nodes if n.get("Index Name") == ID_INDEX and "Scan Direction" in n]
            assert any(n["Scan Direction"] == "Backward" for n in walks), json.dumps(row[0])
            walk = next(w for w in WALKS if w >= 20 * limit)
            bounded = [
                n["Plan Rows"]
                for n in nodes
                if n["Node Type"] == "Limit"
                and any(c.get("Index Name") == ID_INDEX for c in plan_nodes(n.get("Plans", [])))
            ]
            # the walk's Limit and every Limit above it: none planned for more than the walk
            assert bounded, json.dumps(row[0])
            assert max(bounded) <= walk, (walk, bounded, json.dumps(row[0]))
            assert not [
                n
                for n in nodes
                if n["Node Type"] == "Seq Scan" and n["Relation Name"] == "pgsaver_checkpoints"
            ], json.dumps(row[0])
            assert not any(
                n["Node Type"] == "Sort"
                for n in nodes
                if "Plans" in n
                and any(c.get("Relation Name") == "pgsaver_checkpoints" for c in n["Plans"])
            ), json.dumps(row[0])
    # beyond the longest walk there is no first phase
    assert saver._q.recent(name, ("filter",), 6000) is None


def test_a_filter_the_newest_match_ends_with_the_walk_and_every_shape_gives_the_newest_matches(
    table: str,
) -> None:
    """One statement where the newest checkpoints match; two where they do not and fewer than
    5,000 checkpoints match; three where more (or none) do; and the same answer as a sort of all
    matches, for filters dense, sparse, dense among old rows only, none, with a `before`, for
    several limits."""
    with psycopg.connect(table, autocommit=True) as conn:
        # 2,000 newer checkpoints that match nothing but {} and a "source": the tenant's and the
        # users' matches are now all older than the newest rows
        conn.execute(
            "INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id, type,"
            " checkpoint, channel_versions, metadata)"
            " SELECT 'z-' || i, '', 'z-' || lpad(i::text, 6, '0'), 'msgpack', '\\x80', '{}',"
            " jsonb_build_object('source', 'other', 'step', i) FROM generate_series(1, 2000) AS i"
        )
        conn.execute("ANALYZE pgsaver_checkpoints")

        def newest(flt: dict[str, Any] | None, limit: int, before: str | None) -> list[Any]:
            where = ["true"]
            params: list[Any] = []
            if flt:
                where.append("metadata @> %s::jsonb")
                params.append(json.dumps(flt))
            if before:
                where.append("checkpoint_id < %s")
                params.append(before)
            rows = conn.execute(
                f"SELECT checkpoint_id FROM pgsaver_checkpoints WHERE {' AND '.join(where)}"  # type: ignore[arg-type]
                f" ORDER BY checkpoint_id DESC LIMIT {limit}",
                params,
            ).fetchall()
            return [r[0] for r in rows]

        with psycopg.connect(table, autocommit=True) as one:
            saver = PostgresSaver(one)
            mid = newest({"tenant": "acme"}, 20_000, None)[-1]
            for flt in (
                {"source": "other"},
                {"tenant": "acme"},
                {"user": "u-7"},
                {"user": "u-7", "step": 3},
                {"step": 12},
                None,
                {"user": "u-7", "absent": None},
            ):
                for limit in (1, 10, 40):
                    for before in (None, mid):
                        cfg = None if before is None else config("t-3", before)
                        got = [
                            t.config["configurable"]["checkpoint_id"]
                            for t in saver.list(None, filter=flt, limit=limit, before=cfg)
                        ]
                        # (no row has "absent": None matches its absence, as in InMemorySaver)
                        known = flt and {k: v for k, v in flt.items() if v is not None}
                        assert got == newest(known, limit, before), (flt, limit, before)
            # statements: a filter the newest match, one; one they do not, the walk and then
            # every match (fewer than 5,000); one with 5,000 matches or more (30,000 checkpoints
            # of the tenant, none among the newest), or none at all, the whole table after those
            # two. Each t-row found adds one more round trip: it is of an older checkpoint format
            # and has a parent, so its Send packets are read (the z rows are of the current one).
            for flt, trips, found, older in (
                ({"source": "other"}, 1, 10, 0),
                ({"source": "other", "step": 12}, 2, 1, 0),
                ({"user": "u-7"}, 2, 10, 10),
                ({"tenant": "acme"}, 3, 10, 10),
                ({"tenant": "nobody"}, 3, 0, 0),
                (None, 1, 10, 0),
            ):
                with traced(one.pgconn) as trace:
                    assert len(list(saver.list(None, filter=flt, limit=10))) == found
                assert trace.round_trips == trips + older, (flt, trace.round_trips)


def test_list_across_threads_is_never_prepared(
    db_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare_threshold=0 prepares every statement at its first use: the saver's list(None, ...)
    statements still go unprepared, while its other statements are prepared."""
    # tables this small are planned per call (db/sql.PLANNED_BY_STATS): count them as large
    monkeypatch.setattr(policy, "TRUSTED_PAGES", 0)
    with psycopg.connect(db_dsn, autocommit=True, prepare_threshold=0) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        cfg = saver.put(config("p"), checkpoint({"v": 1}), {"k": 1}, {"v": 1})

        def prepared() -> list[str]:
            rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
            return [r[0] for r in rows]

        for flt in ({"k": 1}, {"k": 2}, None):
            assert len(list(saver.list(None, filter=flt, limit=5))) == (0 if flt == {"k": 2} else 1)
        # a filter the saver checks itself (a list value) runs list_keys_global, unprepared too,
        # then reads the matches by key (a statement whose plan no filter changes: prepared)
        assert list(saver.list(None, filter={"k": [1]}, limit=5)) == []
        saver.get_tuple(cfg)
        statements = prepared()
        # the statements across threads are the ones whose limit the planner sees
        assert not [s for s in statements if re.search(r"LIMIT \$\d+::bigint", s)], statements
        assert any("pgsaver_writes" in s for s in statements)  # get_tuple's, prepared
        assert any("unnest(" in s for s in statements)  # read_tuples_keys


def test_migration_8_keeps_an_index_built_concurrently_and_rebuilds_an_invalid_one(
    db_dsn: str,
) -> None:
    """The guide's way on a large table: the index built first with CREATE INDEX CONCURRENTLY,
    then setup(); a concurrent build that failed leaves an invalid index, which setup() builds
    again."""

    def index() -> tuple[int, bool] | None:
        with psycopg.connect(db_dsn) as conn:
            row = conn.execute(
                "SELECT i.indexrelid::int, i.indisvalid FROM pg_index i"
                " WHERE i.indexrelid = to_regclass('public.pgsaver_checkpoints_id_idx')"
            ).fetchone()
        return None if row is None else (row[0], row[1])

    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        saver.put(config("x"), checkpoint({"v": 1}), {}, {"v": 1})
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX pgsaver_checkpoints_id_idx")
        conn.execute(
            "CREATE INDEX CONCURRENTLY pgsaver_checkpoints_id_idx"
            " ON pgsaver_checkpoints (checkpoint_id, thread_id, checkpoint_ns)"
        )
        conn.execute("DELETE FROM pgsaver_migrations WHERE version = 8")
    built = index()
    assert built is not None
    assert built[1]
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
    assert index() == built  # kept, not rebuilt
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        # what a failed CREATE INDEX CONCURRENTLY leaves behind
        conn.execute(
            "UPDATE pg_index SET indisvalid = false"
            " WHERE indexrelid = 'pgsaver_checkpoints_id_idx'::regclass"
        )
        conn.execute("DELETE FROM pgsaver_migrations WHERE version = 8")
    with PostgresSaver.from_conn_string(db_dsn) as saver:
        saver.setup()
        assert len(list(saver.list(None, limit=1))) == 1
        with saver._pool.connection() as conn:  # type: ignore[union-attr]
            applied = conn.execute("SELECT version FROM pgsaver_migrations").fetchall()
    rebuilt = index()
    assert rebuilt is not None
    assert rebuilt[1]
    assert rebuilt[0] != built[0]
    assert (8,) in applied


@pytest.mark.parametrize("filtered", [False, True])
def test_a_limit_that_falls_among_copies_sharing_ids_gives_the_first_of_the_whole_order(
    saver: PostgresSaver, filtered: bool
) -> None:
    """Copies of a thread share its checkpoint ids: list() orders those ties by thread and
    namespace. A limit that cuts through them gives the first of that order, as the list without
    a limit does (each phase: the walk, the capped and the global statement)."""
    parent = None
    for step in range(6):
        cp = checkpoint({"a": step}, {"a": step + 1})
        cfg = parent or config("orig")
        parent = saver.put(cfg, cp, {"source": "loop", "step": step}, cp["channel_versions"])
    for copy in ("zz-copy", "aa-copy", "mm-copy"):
        saver.copy_thread("orig", copy)
    flt = {"source": "loop"} if filtered else None
    whole = [t.config["configurable"] for t in saver.list(None, filter=flt)]
    assert len(whole) == 24
    # every id four times, its threads in order
    assert [c["thread_id"] for c in whole[:4]] == ["aa-copy", "mm-copy", "orig", "zz-copy"]
    for limit in (1, 2, 3, 5, 6, 7, 10, 23):
        got = [t.config["configurable"] for t in saver.list(None, filter=flt, limit=limit)]
        assert got == whole[:limit], limit
