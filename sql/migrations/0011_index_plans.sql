-- 0011: plans that stay on their index whatever the statistics say.
-- additive: new settings on the functions of 0004, 0006 and 0007 (their bodies unchanged) and two
-- new functions; code that knows 0001-0010 calls the same functions and gets the same results.
-- With statistics taken while the tables were empty or tiny (a fresh deployment, a new tenant
-- schema, ANALYZE right after setup), the planner costs a sequential scan of a table of 0-5 pages
-- below any index scan. A session keeps the plan it made then (a PL/pgSQL function's plans, and a
-- prepared statement's generic plan, live until the next ANALYZE or VACUUM of the table), so the
-- scan went on reading the whole table as it grew: put's parent check took 0.07 ms at first and
-- 0.7 ms 4,000 checkpoints later. Every statement of these functions reads rows by a key that an
-- index leads with, so they never want a sequential scan: enable_seqscan = off (for the calls of
-- the function only, like their search_path: the caller's settings are untouched) makes the index
-- the plan at any table size. It costs about 0.2 us per call (a second setting beside search_path).
ALTER FUNCTION {schema}.pgsaver_put(
    text, text, text, text, text, text, bytea, jsonb, jsonb, bytea, text[], text[], text[], bytea[]
) SET enable_seqscan = off;
ALTER FUNCTION {schema}.pgsaver_get_tuple(text, text, text) SET enable_seqscan = off;
ALTER FUNCTION {schema}.pgsaver_claim_head(text, text, text, text) SET enable_seqscan = off;

-- put's parent check (queries.sql: _put_checked), as a function for the same reason: put_new is a
-- prepared statement on a direct connection, and its generic plan is made once, after five calls,
-- usually while a fresh table is small; no shape of the statement keeps the planner off a
-- sequential scan of a table it believes has no pages, and a statement cannot change a setting for
-- itself alone. The check itself is pgsaver_put's (0006): called after the thread's advisory lock
-- is held (the statement filters its lock's row with it), VOLATILE, so under READ COMMITTED its
-- query takes a snapshot of its own, after that wait; an xmax of 0 proves the parent is still there
-- (every lifecycle deleter holds the lock exclusively); any other xmax takes FOR KEY SHARE, which
-- waits for a deleter still running and rechecks. True when there is no parent to check.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_parent_stored(p_thread text, p_ns text, p_parent text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $fn$
DECLARE
    untouched boolean;
BEGIN
    IF p_parent IS NULL THEN
        RETURN true;
    END IF;
    SELECT p.xmax = '0'::xid INTO untouched FROM {schema}.pgsaver_checkpoints AS p
    WHERE p.thread_id = p_thread AND p.checkpoint_ns = p_ns AND p.checkpoint_id = p_parent;
    IF untouched IS NULL THEN
        RETURN false;
    END IF;
    IF NOT untouched THEN
        PERFORM 1 FROM {schema}.pgsaver_checkpoints AS p
        WHERE p.thread_id = p_thread AND p.checkpoint_ns = p_ns AND p.checkpoint_id = p_parent
        FOR KEY SHARE OF p;
        RETURN FOUND;
    END IF;
    RETURN true;
END
$fn$;

-- get_delta_channel_history's statement (queries.sql: delta_history) as a function, for the same
-- reason: it is prepared on a direct connection, and LangGraph sends it whenever it loads a
-- checkpoint of a graph with DeltaChannels; planned once per session under enable_seqscan = off,
-- its walk stays on the primary keys. Its query is that statement as of this migration, with
-- the target chosen first by p_id (NULL: the namespace's latest checkpoint), returning the same rows in
-- the same order; a later change to the statement needs a migration that replaces this function
-- too (tests/test_stale_plans.py compares both). Hash and merge joins are off as well: the walk's
-- join of the writes is a plain join, which a plan made on small tables hashed, reading every write
-- of the table through its index once the seq scan was off; a nested loop looks the writes of
-- each checkpoint of the walk up by key, whatever the statistics.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_delta_history(
    p_thread text, p_ns text, p_id text, p_channels text[]
)
RETURNS TABLE (
    kind integer, depth integer, task_path text, task_id text, idx integer, channel text,
    type text, blob bytea, thread_id text, checkpoint_ns text, checkpoint_id text, version text
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_parent text;
BEGIN
    -- the target (STABLE: every statement here reads the snapshot of the call)
    IF p_id IS NULL THEN
        SELECT c.parent_checkpoint_id INTO v_parent
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns
        ORDER BY c.checkpoint_id DESC
        LIMIT 1;
    ELSE
        SELECT c.parent_checkpoint_id INTO v_parent
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    END IF;
    IF v_parent IS NULL THEN
        RETURN;  -- no such checkpoint, or one without a parent: no history
    END IF;
    RETURN QUERY
    WITH RECURSIVE walk AS (
        SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, x.channel_versions,
               0 AS depth, w.needing AS wanted,
               ARRAY(SELECT k FROM unnest(w.needing) AS k WHERE NOT (coalesce((
        SELECT b.type <> 'empty' FROM {schema}.pgsaver_blobs AS b
        WHERE b.thread_id = x.thread_id AND b.checkpoint_ns = x.checkpoint_ns
          AND b.channel = k AND b.version = x.channel_versions ->> k
    ), false))) COLLATE "C" AS remaining
        FROM (SELECT p_channels COLLATE "C" AS needing OFFSET 0) AS w
        JOIN {schema}.pgsaver_checkpoints AS x
          ON x.thread_id = p_thread AND x.checkpoint_ns = p_ns AND x.checkpoint_id = v_parent
        UNION ALL
        SELECT x.thread_id, x.checkpoint_ns, x.checkpoint_id, x.parent_checkpoint_id, x.channel_versions,
               w.depth + 1, w.remaining,
               ARRAY(SELECT k FROM unnest(w.remaining) AS k WHERE NOT (coalesce((
        SELECT b.type <> 'empty' FROM {schema}.pgsaver_blobs AS b
        WHERE b.thread_id = x.thread_id AND b.checkpoint_ns = x.checkpoint_ns
          AND b.channel = k AND b.version = x.channel_versions ->> k
    ), false))) COLLATE "C"
        FROM walk AS w
        JOIN {schema}.pgsaver_checkpoints AS x
          ON x.thread_id = w.thread_id AND x.checkpoint_ns = w.checkpoint_ns
         AND x.checkpoint_id = w.parent_checkpoint_id
        WHERE cardinality(w.remaining) > 0
          AND w.depth < 10000000  -- a guard against a parent cycle in corrupted data
    )
    SELECT 0 AS kind, w.depth, wr.task_path, wr.task_id, wr.idx, wr.channel, wr.type, wr.blob,
           w.thread_id, w.checkpoint_ns, w.checkpoint_id, NULL::text AS version
    FROM walk AS w
    JOIN {schema}.pgsaver_writes AS wr
      ON wr.thread_id = w.thread_id AND wr.checkpoint_ns = w.checkpoint_ns AND wr.checkpoint_id = w.checkpoint_id
    WHERE wr.channel = ANY (w.wanted)
    UNION ALL
    SELECT 1 AS kind, w.depth, NULL, NULL, NULL, ch.name, s.type, s.blob,
           w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.channel_versions ->> ch.name
    FROM walk AS w
    CROSS JOIN LATERAL unnest(w.wanted) AS ch (name)
    CROSS JOIN LATERAL (
        SELECT bl.type, bl.blob
        FROM {schema}.pgsaver_blobs AS bl
        WHERE bl.thread_id = w.thread_id AND bl.checkpoint_ns = w.checkpoint_ns
          AND bl.channel = ch.name AND bl.version = w.channel_versions ->> ch.name AND bl.type <> 'empty'
          AND NOT (ch.name = ANY (w.remaining))  -- only channels whose walk stops here
        OFFSET 0
    ) AS s
    ORDER BY 1, 2 DESC, 3, 4, 5;
END
$fn$;
