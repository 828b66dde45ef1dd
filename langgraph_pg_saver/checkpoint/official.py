"""The official saver's tables (``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes`` of
``langgraph-checkpoint-postgres``) as the source of an import: the statements that read them into
ours, for the schema they live in (checkpoint/imports.py drives them).

On Citus the official tables are the coordinator's own and ours are distributed: Citus joins the
two in no statement that also walks a chain (a recursive CTE) or writes. There the import goes a
thread at a time: the thread's source rows are read first (``source_rows``) and given back as
arrays (the ``o_*`` CTEs stand for the tables), every reference to our tables names the thread,
so that Citus runs each statement on the thread's worker, and the plan (``decide``) and the copy
(``write``) are two statements of one transaction: the copy has no recursive CTE."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from langgraph_pg_saver.db.sql import Queries, queries_for
from langgraph_pg_saver.db.steps import Stmt

#: the source's rows of one thread as arrays (Citus): checkpoints, writes, values
_SOURCE_ARRAYS = (
    ("oc_threads", "oc_nss", "oc_ids", "oc_parents", "oc_bodies", "oc_metadata"),
    (
        "ow_threads",
        "ow_nss",
        "ow_ids",
        "ow_tasks",
        "ow_idxs",
        "ow_channels",
        "ow_types",
        "ow_blobs",
        "ow_paths",
    ),
    ("ob_threads", "ob_nss", "ob_channels", "ob_versions", "ob_types", "ob_blobs"),
)

#: the CTEs that stand for the official tables on Citus (the arrays of _SOURCE_ARRAYS)
_SOURCE_CTES = {
    "checkpoints": """o_checkpoints AS (
    SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id,
           x.checkpoint::jsonb AS checkpoint, x.metadata::jsonb AS metadata
    FROM unnest(%(oc_threads)s::text[], %(oc_nss)s::text[], %(oc_ids)s::text[],
                %(oc_parents)s::text[], %(oc_bodies)s::text[], %(oc_metadata)s::text[])
        AS x(thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
)""",
    "checkpoint_writes": """o_writes AS (
    SELECT x.* FROM unnest(%(ow_threads)s::text[], %(ow_nss)s::text[], %(ow_ids)s::text[],
                           %(ow_tasks)s::text[], %(ow_idxs)s::integer[], %(ow_channels)s::text[],
                           %(ow_types)s::text[], %(ow_blobs)s::bytea[], %(ow_paths)s::text[])
        AS x(thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
)""",
    "checkpoint_blobs": """o_blobs AS (
    SELECT x.* FROM unnest(%(ob_threads)s::text[], %(ob_nss)s::text[], %(ob_channels)s::text[],
                           %(ob_versions)s::text[], %(ob_types)s::text[], %(ob_blobs)s::bytea[])
        AS x(thread_id, checkpoint_ns, channel, version, type, blob)
)""",
}


#: the end of a copy (``apply``, ``write``): the import record's upsert (the newest id imported
#: only grows; the writes seen at it go with it), then the counts of what was copied
_RECORDED = """    ON CONFLICT (source, thread_id, checkpoint_ns) DO UPDATE
        SET last_id = greatest(pgsaver_imports.last_id, excluded.last_id),
            head_writes = CASE WHEN excluded.last_id >= pgsaver_imports.last_id
                               THEN excluded.head_writes ELSE pgsaver_imports.head_writes END,
            imported_at = excluded.imported_at
        WHERE pgsaver_imports.last_id IS DISTINCT FROM excluded.last_id
           OR pgsaver_imports.head_writes IS DISTINCT FROM excluded.head_writes
    RETURNING 1
)
SELECT (SELECT count(*) FROM (SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes
                              UNION SELECT thread_id FROM blobs
                              UNION SELECT thread_id FROM inline) AS x),
       (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM writes),
       (SELECT count(*) FROM blobs) + (SELECT count(*) FROM inline),
"""


class Source:
    """The official saver's tables in ``schema``, and the statements that read them into ours."""

    def __init__(self, schema: str, *, citus: bool = False) -> None:
        queries_for(schema)  # the schema= option's rule for the name
        self.schema = schema
        self.citus = citus
        s = sql.Identifier(schema).as_string()
        #: the official saver's tables in ``schema``
        self.origin = {
            n: f"{s}.{n}" for n in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        }
        #: what the plan reads as those tables: on Citus the CTEs of one thread's source rows
        self.tables = (
            {n: cte.split(" ", 1)[0] for n, cte in _SOURCE_CTES.items()}
            if citus
            else dict(self.origin)
        )

    def on(self, alias: str) -> str:
        """On Citus, the condition that our table ``alias`` is read for the thread of the
        statement (every reference names it: Citus then runs the statement on its worker);
        nothing on one server, where the joins on thread_id say it."""
        return f" AND {alias}.thread_id = ANY (%(thread_ids)s::text[])" if self.citus else ""

    def _with(self, *, recursive: bool, tables: Sequence[str] = tuple(_SOURCE_CTES)) -> str:
        """A statement's WITH, with the CTEs of the source rows on Citus."""
        head = "WITH RECURSIVE " if recursive else "WITH "
        if not self.citus:
            return head
        return head + ", ".join(_SOURCE_CTES[t] for t in tables) + ",\n"

    def source_rows(self) -> tuple[bytes, bytes, bytes]:
        """Citus: the source's checkpoints, writes and values of ``thread_ids`` (the coordinator's
        tables, read alone), for :meth:`source_params`."""
        o = self.origin
        return (
            f"""SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
       checkpoint::text, metadata::text
FROM {o["checkpoints"]} WHERE thread_id = ANY (%(thread_ids)s::text[])""".encode(),
            f"""SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob,
       task_path
FROM {o["checkpoint_writes"]} WHERE thread_id = ANY (%(thread_ids)s::text[])""".encode(),
            f"""SELECT thread_id, checkpoint_ns, channel, version, type, blob
FROM {o["checkpoint_blobs"]} WHERE thread_id = ANY (%(thread_ids)s::text[])""".encode(),
        )

    @staticmethod
    def source_params(*tables: Sequence[tuple[Any, ...]]) -> dict[str, list[Any]]:
        """The rows of :meth:`source_rows` (checkpoints, writes, values) as the arrays the
        ``o_*`` CTEs read."""
        out: dict[str, list[Any]] = {}
        for names, rows in zip(_SOURCE_ARRAYS, tables, strict=True):
            for i, name in enumerate(names):
                out[name] = [r[i] for r in rows]
        return out

    def exists(self) -> Stmt:
        return Stmt(
            b"SELECT to_regclass(%(c)s) IS NOT NULL AND to_regclass(%(b)s) IS NOT NULL"
            b" AND to_regclass(%(w)s) IS NOT NULL",
            {
                "c": self.origin["checkpoints"],
                "b": self.origin["checkpoint_blobs"],
                "w": self.origin["checkpoint_writes"],
            },
        )

    def threads_after(self) -> bytes:
        c = self.origin["checkpoints"]
        return f"""
WITH RECURSIVE t AS (
    (SELECT thread_id FROM {c} WHERE thread_id > %(after)s ORDER BY thread_id LIMIT 1)
    UNION ALL
    SELECT (SELECT thread_id FROM {c} WHERE thread_id > t.thread_id ORDER BY thread_id LIMIT 1)
    FROM t WHERE t.thread_id IS NOT NULL
)
SELECT thread_id FROM t WHERE thread_id IS NOT NULL LIMIT %(limit)s
""".encode()

    def absent(self) -> bytes:
        """Of ``thread_ids``, those the source does not hold."""
        return f"""
SELECT t.thread_id FROM unnest(%(thread_ids)s::text[]) AS t(thread_id)
WHERE NOT EXISTS (SELECT 1 FROM {self.origin["checkpoints"]} AS c WHERE c.thread_id = t.thread_id)
ORDER BY 1
""".encode()

    def candidates(self, q: Queries, *, dry_run: bool) -> bytes:
        """The source checkpoints of ``thread_ids`` that may be new: neither covered by the record
        of an earlier import nor held here. The locked statement (``apply``) decides. A dry run
        needs only their keys and ``ts``."""
        s = q.schema_sql
        what = (
            "jsonb_build_object('ts', c.checkpoint -> 'ts'), NULL"
            if dry_run
            else "c.checkpoint, c.metadata"
        )
        with_ = f"WITH {_SOURCE_CTES['checkpoints']}" if self.citus else ""
        return f"""{with_}
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, {what}
FROM {self.tables["checkpoints"]} AS c
WHERE c.thread_id = ANY (%(thread_ids)s::text[])
  AND (c.thread_id = ANY (%(reimport)s::text[]) OR NOT EXISTS (
      SELECT 1 FROM {s}.pgsaver_imports AS r
      WHERE r.source = %(source)s AND r.thread_id = c.thread_id{self.on("r")}
        AND r.checkpoint_ns = c.checkpoint_ns AND r.last_id >= c.checkpoint_id))
  AND NOT EXISTS (
      SELECT 1 FROM {s}.pgsaver_checkpoints AS h
      WHERE h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns{self.on("h")}
        AND h.checkpoint_id = c.checkpoint_id)
ORDER BY c.thread_id, c.checkpoint_ns, c.checkpoint_id
""".encode()

    def _plan(self, q: Queries, *, dry_run: bool) -> str:
        """The CTEs that decide, under the threads' locks, what of ``thread_ids`` to copy (the
        rules of the module's docstring): ``imp`` the checkpoints, ``wsrc`` the writes, ``bsrc``
        the values their checkpoints reference, ``bad`` the threads left out as diverged.

        A dry run leaves out of ``wsrc`` and ``bsrc`` the rows already here, to count them; the
        real run lets ``ON CONFLICT`` skip them (a lookup in a table that the same statement is
        filling would read every row it inserted so far, invisible but on the pages)."""
        t = self.tables
        s = q.schema_sql
        new_writes = new_blobs = ""
        if dry_run:
            new_writes = f"""
      AND NOT EXISTS (
          SELECT 1 FROM {s}.pgsaver_writes AS o
          WHERE o.thread_id = w.thread_id AND o.checkpoint_ns = w.checkpoint_ns{self.on("o")}
            AND o.checkpoint_id = w.checkpoint_id AND o.task_id = w.task_id AND o.idx = w.idx)"""
            new_blobs = f"""
    WHERE NOT EXISTS (
        SELECT 1 FROM {s}.pgsaver_blobs AS o
        WHERE o.thread_id = b.thread_id AND o.checkpoint_ns = b.checkpoint_ns{self.on("o")}
          AND o.channel = b.channel AND o.version = b.version)"""
        return f"""
{self._with(recursive=True)}mode AS (
    SELECT t.thread_id, h.newest,
           CASE WHEN t.thread_id = ANY (%(reimport)s::text[]) THEN 'full'
                WHEN EXISTS (SELECT 1 FROM {s}.pgsaver_imports AS r
                             WHERE r.source = %(source)s AND r.thread_id = t.thread_id{self.on("r")})
                    THEN CASE WHEN h.newest IS NULL THEN 'deleted' ELSE 'recorded' END
                WHEN h.newest IS NULL THEN 'full'
                ELSE 'legacy' END AS mode
    FROM unnest(%(thread_ids)s::text[]) AS t(thread_id)
    CROSS JOIN LATERAL (
        SELECT max(c.checkpoint_id) AS newest FROM {s}.pgsaver_checkpoints AS c
        WHERE c.thread_id = t.thread_id{self.on("c")}
    ) AS h
), marks AS (
    -- per namespace of the source: the newest id treated as imported (mark), the checkpoint new
    -- ones must extend (head) and the keys of its writes seen at the last import
    SELECT n.thread_id, n.checkpoint_ns, m.mode,
           CASE m.mode WHEN 'recorded' THEN r.last_id WHEN 'deleted' THEN r.last_id
                       WHEN 'legacy' THEN coalesce(here.newest, m.newest) END AS mark,
           CASE m.mode WHEN 'recorded' THEN r.last_id WHEN 'legacy' THEN here.newest END AS head,
           CASE m.mode WHEN 'recorded' THEN r.head_writes END AS head_writes
    FROM (SELECT DISTINCT c.thread_id, c.checkpoint_ns FROM {t["checkpoints"]} AS c
          WHERE c.thread_id = ANY (%(thread_ids)s::text[])) AS n
    JOIN mode AS m ON m.thread_id = n.thread_id
    LEFT JOIN {s}.pgsaver_imports AS r
        ON r.source = %(source)s AND r.thread_id = n.thread_id AND r.checkpoint_ns = n.checkpoint_ns{self.on("r")}
    CROSS JOIN LATERAL (
        SELECT max(c.checkpoint_id) AS newest FROM {s}.pgsaver_checkpoints AS c
        WHERE c.thread_id = n.thread_id AND c.checkpoint_ns = n.checkpoint_ns{self.on("c")}
    ) AS here
), src AS (
    -- every source checkpoint of these threads; fresh: new since the last import, not held here
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id AS parent,
           mk.mode, mk.head,
           mk.mode <> 'deleted' AND (mk.mark IS NULL OR c.checkpoint_id > mk.mark)
           AND NOT EXISTS (
               SELECT 1 FROM {s}.pgsaver_checkpoints AS h
               WHERE h.thread_id = c.thread_id AND h.checkpoint_ns = c.checkpoint_ns{self.on("h")}
                 AND h.checkpoint_id = c.checkpoint_id) AS fresh
    FROM {t["checkpoints"]} AS c
    JOIN marks AS mk ON mk.thread_id = c.thread_id AND mk.checkpoint_ns = c.checkpoint_ns
    WHERE c.thread_id = ANY (%(thread_ids)s::text[])
), cand AS (
    -- the fresh ones this run read and converted (one written to the source since is left for
    -- the next run)
    SELECT f.*, k.created
    FROM src AS f
    JOIN unnest(%(k_threads)s::text[], %(k_nss)s::text[], %(k_ids)s::text[],
                %(k_created)s::timestamptz[]) AS k(thread_id, checkpoint_ns, checkpoint_id, created)
        ON k.thread_id = f.thread_id AND k.checkpoint_ns = f.checkpoint_ns
       AND k.checkpoint_id = f.checkpoint_id
    WHERE f.fresh
), linked AS (
    -- the new checkpoints of imported threads that extend what is here: from the namespace's
    -- head (still here), or from no parent in a namespace without one, then their children
    SELECT d.thread_id, d.checkpoint_ns, d.checkpoint_id FROM cand AS d
    WHERE d.mode <> 'full'
      AND ((d.parent IS NULL AND d.head IS NULL)
           OR (d.parent = d.head AND EXISTS (
                   SELECT 1 FROM {s}.pgsaver_checkpoints AS h
                   WHERE h.thread_id = d.thread_id AND h.checkpoint_ns = d.checkpoint_ns{self.on("h")}
                     AND h.checkpoint_id = d.parent)))
    UNION ALL
    SELECT d.thread_id, d.checkpoint_ns, d.checkpoint_id
    FROM cand AS d
    JOIN linked AS l
        ON l.thread_id = d.thread_id AND l.checkpoint_ns = d.checkpoint_ns
       AND d.parent = l.checkpoint_id
    WHERE d.mode <> 'full'
), late AS (
    -- writes the source added since the last import at the head it imported then, still here
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx
    FROM marks AS mk
    JOIN {t["checkpoint_writes"]} AS w
        ON w.thread_id = mk.thread_id AND w.checkpoint_ns = mk.checkpoint_ns
       AND w.checkpoint_id = mk.head
    WHERE mk.mode IN ('recorded', 'legacy')
      AND NOT (w.idx::text || ':' || w.task_id) = ANY (coalesce(mk.head_writes, '{{}}'::text[]))
      AND EXISTS (
          SELECT 1 FROM {s}.pgsaver_checkpoints AS h
          WHERE h.thread_id = w.thread_id AND h.checkpoint_ns = w.checkpoint_ns{self.on("h")}
            AND h.checkpoint_id = w.checkpoint_id)
      AND NOT EXISTS (
          SELECT 1 FROM {s}.pgsaver_writes AS o
          WHERE o.thread_id = w.thread_id AND o.checkpoint_ns = w.checkpoint_ns{self.on("o")}
            AND o.checkpoint_id = w.checkpoint_id AND o.task_id = w.task_id AND o.idx = w.idx)
), changed AS (
    -- threads written here since their last import: a checkpoint newer than its namespace's mark
    SELECT DISTINCT c.thread_id
    FROM {s}.pgsaver_checkpoints AS c
    JOIN mode AS m ON m.thread_id = c.thread_id AND m.mode = 'recorded'
    LEFT JOIN {s}.pgsaver_imports AS r
        ON r.source = %(source)s AND r.thread_id = c.thread_id AND r.checkpoint_ns = c.checkpoint_ns{self.on("r")}
    WHERE (r.last_id IS NULL OR c.checkpoint_id > r.last_id){self.on("c")}
), bad AS (
    -- threads with a new checkpoint that does not extend what is here (fewer linked than new),
    -- and threads written here since that have something new in the source
    SELECT d.thread_id
    FROM (SELECT c.thread_id, count(*) AS n FROM cand AS c WHERE c.mode <> 'full' GROUP BY 1) AS d
    LEFT JOIN (SELECT l.thread_id, count(*) AS n FROM linked AS l GROUP BY 1) AS k
        ON k.thread_id = d.thread_id
    WHERE k.n IS DISTINCT FROM d.n
    UNION
    SELECT g.thread_id FROM changed AS g
    WHERE EXISTS (SELECT 1 FROM cand AS d WHERE d.thread_id = g.thread_id)
       OR EXISTS (SELECT 1 FROM late AS l WHERE l.thread_id = g.thread_id)
), imp AS (
    SELECT d.thread_id, d.checkpoint_ns, d.checkpoint_id, d.created FROM cand AS d
    WHERE d.thread_id NOT IN (SELECT b.thread_id FROM bad AS b)
), wsrc AS (
    -- the writes to copy: those of the new checkpoints, the late ones at a head, and on a full
    -- import those of the checkpoints held here
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel,
           coalesce(w.type, 'empty') AS type, w.blob, w.task_path
    FROM marks AS m
    JOIN {t["checkpoint_writes"]} AS w
        ON w.thread_id = m.thread_id AND w.checkpoint_ns = m.checkpoint_ns
       AND (m.mark IS NULL OR w.checkpoint_id >= m.mark)
    WHERE m.mode <> 'deleted' AND m.thread_id NOT IN (SELECT b.thread_id FROM bad AS b)
      AND (EXISTS (SELECT 1 FROM imp AS i
                   WHERE i.thread_id = w.thread_id AND i.checkpoint_ns = w.checkpoint_ns
                     AND i.checkpoint_id = w.checkpoint_id)
           OR EXISTS (SELECT 1 FROM late AS l
                      WHERE l.thread_id = w.thread_id AND l.checkpoint_ns = w.checkpoint_ns
                        AND l.checkpoint_id = w.checkpoint_id AND l.task_id = w.task_id
                        AND l.idx = w.idx)
           OR (m.mode = 'full' AND EXISTS (
                   SELECT 1 FROM {s}.pgsaver_checkpoints AS h
                   WHERE h.thread_id = w.thread_id AND h.checkpoint_ns = w.checkpoint_ns{self.on("h")}
                     AND h.checkpoint_id = w.checkpoint_id))){new_writes}
), refs AS (
    -- the channel versions the new checkpoints reference
    SELECT DISTINCT i.thread_id, i.checkpoint_ns, v.key AS channel, v.value AS version
    FROM imp AS i
    JOIN {t["checkpoints"]} AS c
        ON c.thread_id = i.thread_id AND c.checkpoint_ns = i.checkpoint_ns
       AND c.checkpoint_id = i.checkpoint_id
    CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS v
), bsrc AS (
    SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.blob
    FROM refs AS f
    JOIN {t["checkpoint_blobs"]} AS b
        ON b.thread_id = f.thread_id AND b.checkpoint_ns = f.checkpoint_ns
       AND b.channel = f.channel AND b.version = f.version{new_blobs}
), got AS (
    -- per namespace, the newest source checkpoint held here after this run
    SELECT x.thread_id, x.checkpoint_ns, max(x.checkpoint_id COLLATE "C") AS newest
    FROM (SELECT f.thread_id, f.checkpoint_ns, f.checkpoint_id FROM src AS f
          WHERE f.mode = 'full' AND NOT f.fresh
          UNION ALL
          SELECT i.thread_id, i.checkpoint_ns, i.checkpoint_id FROM imp AS i) AS x
    GROUP BY 1, 2
), kept AS (
    -- every source namespace of the threads that take part, with its new record
    SELECT mk.thread_id, mk.checkpoint_ns, greatest(mk.mark, g.newest) AS last_id
    FROM marks AS mk
    LEFT JOIN got AS g ON g.thread_id = mk.thread_id AND g.checkpoint_ns = mk.checkpoint_ns
    WHERE mk.mode <> 'deleted' AND mk.thread_id NOT IN (SELECT b.thread_id FROM bad AS b)
)"""

    def _tally(self) -> str:
        """The counts every variant returns after its own: already imported, unchanged threads,
        deleted threads, the diverged ones."""
        return """
       (SELECT count(*) FROM src AS f WHERE NOT f.fresh AND f.mode <> 'deleted'),
       (SELECT count(*) FROM mode AS m
        WHERE m.mode IN ('recorded', 'legacy')
          AND NOT EXISTS (SELECT 1 FROM cand AS d WHERE d.thread_id = m.thread_id)
          AND NOT EXISTS (SELECT 1 FROM late AS l WHERE l.thread_id = m.thread_id)),
       (SELECT count(*) FROM mode AS m WHERE m.mode = 'deleted'),
       ARRAY(SELECT DISTINCT b.thread_id FROM bad AS b ORDER BY 1)"""

    def count(self, q: Queries) -> bytes:
        """A dry run of ``apply``: the same decisions, counted; nothing written. Blobs count the
        referenced values and the inline ones (distinct, not here yet), as ``apply`` inserts them."""
        t = self.tables
        s = q.schema_sql
        return f"""{self._plan(q, dry_run=True)}, inline AS (
    SELECT DISTINCT i.thread_id, i.checkpoint_ns, v.key AS channel, cv.value AS version
    FROM imp AS i
    JOIN {t["checkpoints"]} AS c
        ON c.thread_id = i.thread_id AND c.checkpoint_ns = i.checkpoint_ns
       AND c.checkpoint_id = i.checkpoint_id
    CROSS JOIN LATERAL jsonb_each(c.checkpoint -> 'channel_values') AS v
    JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') AS cv ON cv.key = v.key
), blobs AS (
    SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version FROM bsrc AS b
    UNION
    SELECT n.thread_id, n.checkpoint_ns, n.channel, n.version FROM inline AS n
    WHERE NOT EXISTS (
        SELECT 1 FROM {s}.pgsaver_blobs AS o
        WHERE o.thread_id = n.thread_id AND o.checkpoint_ns = n.checkpoint_ns{self.on("o")}
          AND o.channel = n.channel AND o.version = n.version)
)
SELECT (SELECT count(*) FROM (SELECT thread_id FROM imp UNION SELECT thread_id FROM wsrc
                              UNION SELECT thread_id FROM blobs) AS x),
       (SELECT count(*) FROM imp), (SELECT count(*) FROM wsrc), (SELECT count(*) FROM blobs),
       (SELECT count(*) FROM imp WHERE created IS NULL),{self._tally()}
""".encode()

    def apply(self, q: Queries) -> bytes:
        """Copy what the plan chose: the converted checkpoints and their inline values (given),
        the writes and referenced blobs (in SQL), and record what was imported."""
        t = self.tables
        s = q.schema_sql
        return f"""{self._plan(q, dry_run=False)}, blobs AS (
    INSERT INTO {s}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.blob FROM bsrc AS b
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING thread_id
), inline AS (
    INSERT INTO {s}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT n.thread_id, n.checkpoint_ns, n.channel, n.version, n.type, n.blob
    FROM unnest(%(i_threads)s::text[], %(i_nss)s::text[], %(i_ids)s::text[],
                %(i_channels)s::text[], %(i_versions)s::text[], %(i_types)s::text[],
                %(i_blobs)s::bytea[])
        AS n(thread_id, checkpoint_ns, checkpoint_id, channel, version, type, blob)
    WHERE EXISTS (SELECT 1 FROM imp AS i
                  WHERE i.thread_id = n.thread_id AND i.checkpoint_ns = n.checkpoint_ns
                    AND i.checkpoint_id = n.checkpoint_id)
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING thread_id
), writes AS (
    INSERT INTO {s}.pgsaver_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
    SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.type,
           w.blob, w.task_path
    FROM wsrc AS w
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    RETURNING thread_id
), checkpoints AS (
    INSERT INTO {s}.pgsaver_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
        channel_versions, metadata, metadata_exact, created_at
    )
    SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent, c.run_id, c.type, c.body,
           c.versions::jsonb, c.metadata::jsonb, c.exact, coalesce(i.created, now())
    FROM unnest(%(c_threads)s::text[], %(c_nss)s::text[], %(c_ids)s::text[],
                %(c_parents)s::text[], %(c_runs)s::text[], %(c_types)s::text[],
                %(c_bodies)s::bytea[], %(c_versions)s::text[], %(c_metadata)s::text[],
                %(c_exacts)s::bytea[])
        AS c(thread_id, checkpoint_ns, checkpoint_id, parent, run_id, type, body, versions,
             metadata, exact)
    JOIN imp AS i
        ON i.thread_id = c.thread_id AND i.checkpoint_ns = c.checkpoint_ns
       AND i.checkpoint_id = c.checkpoint_id
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING
    RETURNING thread_id
), recorded AS (
    INSERT INTO {s}.pgsaver_imports
        (source, thread_id, checkpoint_ns, last_id, head_writes, imported_at)
    SELECT %(source)s, k.thread_id, k.checkpoint_ns, k.last_id,
           ARRAY(SELECT w.idx::text || ':' || w.task_id FROM {t["checkpoint_writes"]} AS w
                 WHERE w.thread_id = k.thread_id AND w.checkpoint_ns = k.checkpoint_ns
                   AND w.checkpoint_id = k.last_id
                 ORDER BY 1),
           now()
    FROM kept AS k
    WHERE k.last_id IS NOT NULL
{_RECORDED}       (SELECT count(*) FROM imp WHERE created IS NULL),{self._tally()},
       (SELECT count(*) FROM recorded)
""".encode()

    def decide(self, q: Queries) -> bytes:
        """Citus: what ``apply`` copies of one thread, decided (read only, the thread's chain
        walked on its worker): the keys of the checkpoints, writes and values to copy, the
        records to keep, and the tally, for :meth:`write`."""
        return f"""{self._plan(q, dry_run=False)}
SELECT ARRAY(SELECT i.checkpoint_ns FROM imp AS i ORDER BY 1, i.checkpoint_id),
       ARRAY(SELECT i.checkpoint_id FROM imp AS i ORDER BY i.checkpoint_ns, 1),
       ARRAY(SELECT i.created FROM imp AS i ORDER BY i.checkpoint_ns, i.checkpoint_id),
       ARRAY(SELECT w.checkpoint_ns FROM wsrc AS w ORDER BY 1, w.checkpoint_id, w.task_id, w.idx),
       ARRAY(SELECT w.checkpoint_id FROM wsrc AS w ORDER BY w.checkpoint_ns, 1, w.task_id, w.idx),
       ARRAY(SELECT w.task_id FROM wsrc AS w ORDER BY w.checkpoint_ns, w.checkpoint_id, 1, w.idx),
       ARRAY(SELECT w.idx FROM wsrc AS w ORDER BY w.checkpoint_ns, w.checkpoint_id, w.task_id, 1),
       ARRAY(SELECT b.checkpoint_ns FROM bsrc AS b ORDER BY 1, b.channel, b.version),
       ARRAY(SELECT b.channel FROM bsrc AS b ORDER BY b.checkpoint_ns, 1, b.version),
       ARRAY(SELECT b.version FROM bsrc AS b ORDER BY b.checkpoint_ns, b.channel, 1),
       ARRAY(SELECT k.checkpoint_ns FROM kept AS k WHERE k.last_id IS NOT NULL ORDER BY 1),
       ARRAY(SELECT k.last_id FROM kept AS k WHERE k.last_id IS NOT NULL ORDER BY k.checkpoint_ns),
       (SELECT count(*) FROM imp WHERE created IS NULL),{self._tally()}
""".encode()

    #: the parameters :meth:`write` takes from the row of :meth:`decide`, in its order
    DECIDED = (
        "d_i_nss",
        "d_i_ids",
        "d_i_created",
        "d_w_nss",
        "d_w_ids",
        "d_w_tasks",
        "d_w_idxs",
        "d_b_nss",
        "d_b_channels",
        "d_b_versions",
        "d_k_nss",
        "d_k_last",
        "untimed",
        "already",
        "unchanged",
        "deleted",
        "bad",
    )

    def write(self, q: Queries) -> bytes:
        """Citus: ``apply``'s copy of the thread %(thread_id)s as :meth:`decide` chose it, in the
        transaction that decided it (under the thread's lock); the same row as ``apply``."""
        s = q.schema_sql
        return f"""{self._with(recursive=False, tables=("checkpoint_writes", "checkpoint_blobs"))}blobs AS (
    INSERT INTO {s}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, b.checkpoint_ns, b.channel, b.version, b.type, b.blob
    FROM o_blobs AS b
    JOIN unnest(%(d_b_nss)s::text[], %(d_b_channels)s::text[], %(d_b_versions)s::text[])
        AS k(checkpoint_ns, channel, version)
        ON k.checkpoint_ns = b.checkpoint_ns AND k.channel = b.channel AND k.version = b.version
    WHERE b.thread_id = %(thread_id)s
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING thread_id
), inline AS (
    INSERT INTO {s}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT %(thread_id)s, n.checkpoint_ns, n.channel, n.version, n.type, n.blob
    FROM unnest(%(i_threads)s::text[], %(i_nss)s::text[], %(i_ids)s::text[],
                %(i_channels)s::text[], %(i_versions)s::text[], %(i_types)s::text[],
                %(i_blobs)s::bytea[])
        AS n(thread_id, checkpoint_ns, checkpoint_id, channel, version, type, blob)
    JOIN unnest(%(d_i_nss)s::text[], %(d_i_ids)s::text[]) AS i(checkpoint_ns, checkpoint_id)
        ON i.checkpoint_ns = n.checkpoint_ns AND i.checkpoint_id = n.checkpoint_id
    WHERE n.thread_id = %(thread_id)s
    ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
    RETURNING thread_id
), writes AS (
    INSERT INTO {s}.pgsaver_writes
        (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path)
    SELECT %(thread_id)s, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel,
           coalesce(w.type, 'empty'), w.blob, w.task_path
    FROM o_writes AS w
    JOIN unnest(%(d_w_nss)s::text[], %(d_w_ids)s::text[], %(d_w_tasks)s::text[],
                %(d_w_idxs)s::integer[]) AS k(checkpoint_ns, checkpoint_id, task_id, idx)
        ON k.checkpoint_ns = w.checkpoint_ns AND k.checkpoint_id = w.checkpoint_id
       AND k.task_id = w.task_id AND k.idx = w.idx
    WHERE w.thread_id = %(thread_id)s
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    RETURNING thread_id
), checkpoints AS (
    INSERT INTO {s}.pgsaver_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
        channel_versions, metadata, metadata_exact, created_at
    )
    SELECT %(thread_id)s, c.checkpoint_ns, c.checkpoint_id, c.parent, c.run_id, c.type, c.body,
           c.versions::jsonb, c.metadata::jsonb, c.exact, coalesce(i.created, now())
    FROM unnest(%(c_threads)s::text[], %(c_nss)s::text[], %(c_ids)s::text[],
                %(c_parents)s::text[], %(c_runs)s::text[], %(c_types)s::text[],
                %(c_bodies)s::bytea[], %(c_versions)s::text[], %(c_metadata)s::text[],
                %(c_exacts)s::bytea[])
        AS c(thread_id, checkpoint_ns, checkpoint_id, parent, run_id, type, body, versions,
             metadata, exact)
    JOIN unnest(%(d_i_nss)s::text[], %(d_i_ids)s::text[], %(d_i_created)s::timestamptz[])
        AS i(checkpoint_ns, checkpoint_id, created)
        ON i.checkpoint_ns = c.checkpoint_ns AND i.checkpoint_id = c.checkpoint_id
    WHERE c.thread_id = %(thread_id)s
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO NOTHING
    RETURNING thread_id
), recorded AS (
    INSERT INTO {s}.pgsaver_imports
        (source, thread_id, checkpoint_ns, last_id, head_writes, imported_at)
    SELECT %(source)s, %(thread_id)s, k.checkpoint_ns, k.last_id,
           ARRAY(SELECT w.idx::text || ':' || w.task_id FROM o_writes AS w
                 WHERE w.checkpoint_ns = k.checkpoint_ns AND w.checkpoint_id = k.last_id
                 ORDER BY 1),
           now()
    FROM unnest(%(d_k_nss)s::text[], %(d_k_last)s::text[]) AS k(checkpoint_ns, last_id)
{_RECORDED}       %(untimed)s::bigint, %(already)s::bigint, %(unchanged)s::bigint, %(deleted)s::bigint,
       %(bad)s::text[], (SELECT count(*) FROM recorded)
""".encode()
