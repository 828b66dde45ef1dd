"""Long threads built fast: a few real checkpoints put by the saver (a real graph), replicated in
SQL into a chain of n checkpoints with increasing ids, parent links, one new value per changed
channel at each step, and the template's pending writes on each checkpoint."""

from __future__ import annotations

from typing import Any

import psycopg

#: checkpoint ids that sort as text in step order, shaped like LangGraph's (uuid6 text)
ID_SQL = "'1f0' || lpad(to_hex(g.i), 5, '0') || '-0000-6000-8000-' || lpad(to_hex(g.i), 12, '0')"


def checkpoint_id(i: int, ns_shift: int = 0) -> str:
    return f"1f0{i:05x}-0000-6000-8000-{i:012x}"


def replicate(
    conn: psycopg.Connection[Any],
    seed_thread: str,
    thread: str,
    n: int,
    *,
    ns: str = "",
    start: int = 1,
    step: int = 1,
) -> None:
    """``n`` checkpoints in ``thread`` / ``ns``, copies of the newest checkpoint of ``seed_thread``
    that has pending writes: checkpoint i (i = start, start + step, ...) has id checkpoint_id(i),
    its parent the one before, a version of its own for every channel of the template, that
    channel's value under it, the template's writes, and metadata step i."""
    params = {"seed": seed_thread, "thread": thread, "ns": ns, "n": n, "start": start, "step": step}
    series = "generate_series(%(start)s, %(start)s + (%(n)s - 1) * %(step)s, %(step)s) AS g(i)"
    template = """
        SELECT c.* FROM pgsaver_checkpoints AS c
        WHERE c.thread_id = %(seed)s AND c.checkpoint_ns = ''
          AND EXISTS (SELECT 1 FROM pgsaver_writes AS w WHERE w.thread_id = c.thread_id
                      AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id)
        ORDER BY c.checkpoint_id DESC LIMIT 1
    """
    version = "lpad(g.i::text, 32, '0') || '.0.5'"
    with conn.transaction():
        conn.execute(
            f"""
            WITH t AS ({template})
            INSERT INTO pgsaver_checkpoints (thread_id, checkpoint_ns, checkpoint_id,
                parent_checkpoint_id, run_id, type, checkpoint, channel_versions, metadata,
                metadata_exact, created_at)
            SELECT %(thread)s, %(ns)s, {ID_SQL},
                   CASE WHEN g.i > %(start)s THEN
                       '1f0' || lpad(to_hex(g.i - %(step)s), 5, '0') || '-0000-6000-8000-'
                       || lpad(to_hex(g.i - %(step)s), 12, '0') END,
                   t.run_id, t.type, t.checkpoint,
                   (SELECT jsonb_object_agg(e.key, to_jsonb({version}))
                    FROM jsonb_each(t.channel_versions) AS e),
                   t.metadata || jsonb_build_object('step', g.i, 'parity', g.i %% 3),
                   t.metadata_exact, now()
            FROM t, {series}
            """,
            params,
        )
        conn.execute(
            f"""
            WITH t AS ({template})
            INSERT INTO pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
            SELECT %(thread)s, %(ns)s, b.channel, {version}, b.type, b.blob
            FROM t
            JOIN pgsaver_blobs AS b ON b.thread_id = t.thread_id AND b.checkpoint_ns = ''
             AND t.channel_versions ->> b.channel = b.version,
            {series}
            """,
            params,
        )
        conn.execute(
            f"""
            WITH t AS ({template})
            INSERT INTO pgsaver_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,
                channel, type, blob, task_path, run_id, replaced_run_ids)
            SELECT %(thread)s, %(ns)s, {ID_SQL}, w.task_id, w.idx, w.channel, w.type, w.blob,
                   w.task_path, w.run_id, w.replaced_run_ids
            FROM t
            JOIN pgsaver_writes AS w ON w.thread_id = t.thread_id AND w.checkpoint_ns = ''
             AND w.checkpoint_id = t.checkpoint_id,
            {series}
            """,
            params,
        )
        conn.execute("ANALYZE pgsaver_checkpoints, pgsaver_blobs, pgsaver_writes")
