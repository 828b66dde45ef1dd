-- 0014: threads by status (search_threads): a row for each thread with a root checkpoint.
-- additive: a new table, its index, and a new form of pgsaver_put; code that knows 0001-0013
-- runs unchanged against it (its puts leave the table as it was: docs/guide.md, "Threads by
-- status", says what a rolling upgrade shows until every worker runs this release).
-- A thread's status is read from its newest root checkpoint (namespace ''):
--   error        it holds a write to __error__ (a task of that superstep raised);
--   interrupted  it holds a write to __interrupt__ (a node called interrupt(), in the graph or in
--                a subgraph, whose interrupt the parent's task records too);
--   pending      a trigger channel (__start__, branch:to:<node>) holds a value: nodes are
--                scheduled and have not finished (a run in progress, or one stopped before them:
--                interrupt_before/after, a crash, a cancelled run);
--   idle         none of these (its row says 'idle'; every thread has a row).
-- put keeps the row (pgsaver_put_status, below): a root checkpoint that schedules nodes makes it
-- 'pending' unless it is already (a probe of the primary key: nothing written in the middle of a
-- run); one that schedules none makes it 'idle'; put_writes to __interrupt__ or __error__ of the
-- newest root checkpoint sets 'interrupted' or 'error'. So the table is written about twice per
-- run, not per put, and its checkpoint_id is the thread's newest root checkpoint except while a
-- run is in progress (then the run's first). Readers list threads from it (a thread of thousands
-- of checkpoints costs what one of two costs) and check every row they return against the stored
-- data (queries.sql, _status_rule).
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_thread_status (
    thread_id     text COLLATE "C" NOT NULL PRIMARY KEY,
    status        text NOT NULL CHECK (status IN ('idle', 'pending', 'interrupted', 'error')),
    -- the root checkpoint at which the thread took this status (threads are listed newest first
    -- by it)
    checkpoint_id text COLLATE "C" NOT NULL,
    since         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS pgsaver_thread_status_idx
    ON {schema}.pgsaver_thread_status (status, checkpoint_id, thread_id);
-- every thread newest first (search_threads() without a status)
CREATE INDEX IF NOT EXISTS pgsaver_thread_status_recent_idx
    ON {schema}.pgsaver_thread_status (checkpoint_id, thread_id);

-- The row's upkeep, for a checkpoint p_id of namespace p_ns stored or written to:
-- p_status 'pending' or 'idle' from put (the checkpoint schedules nodes or not), 'interrupted' or
-- 'error' from put_writes (a write to __interrupt__ / __error__), NULL: nothing to do. Only a
-- root checkpoint that is the thread's newest changes the row. 'pending' writes nothing when the
-- row says so already (the middle of a run) or holds a mark of this checkpoint; an interrupt does not replace an error recorded on
-- the same checkpoint (two tasks of one superstep). Its plans keep to the primary keys whatever
-- the statistics (enable_seqscan = off, as migration 0011's functions). Each upsert's condition
-- is checked again on the row as it is when it conflicts (a mark another call inserted after the
-- probe stays). Returns true.
-- SECURITY DEFINER (its owner: the role that ran setup()), as pgsaver_refresh_status: a runtime
-- role granted what an earlier release needed (docs/guide.md, "Roles without DDL rights") keeps
-- writing without a grant on the new table; both run with search_path pg_catalog, pg_temp and
-- name every table with its schema.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_put_status(
    p_thread text, p_ns text, p_id text, p_status text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $fn$
BEGIN
    IF p_status IS NULL OR p_ns <> '' OR EXISTS (
        SELECT 1 FROM {schema}.pgsaver_checkpoints AS n
        WHERE n.thread_id = p_thread AND n.checkpoint_ns = '' AND n.checkpoint_id > p_id
    ) THEN
        RETURN true;  -- a subgraph's checkpoint, or an older one than the thread's newest
    END IF;
    -- a mark of this very checkpoint stays: its writes may be stored before it (LangGraph
    -- stores a checkpoint and the writes of its tasks from a background thread)
    -- nor does a mark of a newer one (a late call for an older checkpoint, before the newer one
    -- is stored)
    IF p_status = 'idle' THEN
        INSERT INTO {schema}.pgsaver_thread_status AS s (thread_id, status, checkpoint_id)
        VALUES (p_thread, 'idle', p_id)
        ON CONFLICT (thread_id) DO UPDATE
            SET status = 'idle', checkpoint_id = EXCLUDED.checkpoint_id, since = EXCLUDED.since
            WHERE s.checkpoint_id < EXCLUDED.checkpoint_id;
    ELSIF p_status = 'pending' THEN
        IF NOT EXISTS (SELECT 1 FROM {schema}.pgsaver_thread_status AS s
                       WHERE s.thread_id = p_thread
                         AND (s.status = 'pending' OR s.checkpoint_id >= p_id)) THEN
            INSERT INTO {schema}.pgsaver_thread_status AS s (thread_id, status, checkpoint_id)
            VALUES (p_thread, 'pending', p_id)
            ON CONFLICT (thread_id) DO UPDATE
                SET status = 'pending', checkpoint_id = EXCLUDED.checkpoint_id, since = EXCLUDED.since
                -- the probe's rule again, on the row as it is now: a mark another call inserted
                -- after the probe (a task's error, stored from another thread) stays
                WHERE s.status <> 'pending' AND s.checkpoint_id < EXCLUDED.checkpoint_id;
        END IF;
    ELSIF p_status IN ('interrupted', 'error') THEN
        INSERT INTO {schema}.pgsaver_thread_status AS s (thread_id, status, checkpoint_id)
        VALUES (p_thread, p_status, p_id)
        ON CONFLICT (thread_id) DO UPDATE
            SET status = EXCLUDED.status, checkpoint_id = EXCLUDED.checkpoint_id, since = EXCLUDED.since
            WHERE s.checkpoint_id <= EXCLUDED.checkpoint_id
              AND (s.status <> 'error' OR s.checkpoint_id < EXCLUDED.checkpoint_id)
              AND (s.status <> EXCLUDED.status OR s.checkpoint_id < EXCLUDED.checkpoint_id);
    END IF;
    RETURN true;
END
$fn$;

-- The row set again from what is stored, for a thread whose checkpoints a lifecycle job changed
-- (delete_for_runs, copy_thread, an import, a delete): the rule of this file's head, read from
-- its newest root checkpoint (queries.sql's _status_rule says it again for the readers). Returns
-- the status ('idle' for a thread without a root checkpoint, whose row it deletes).
CREATE OR REPLACE FUNCTION {schema}.pgsaver_refresh_status(p_thread text) RETURNS text
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
DECLARE
    head_id text;
    versions jsonb;
    found_status text;
    k text;
    v text;
BEGIN
    SELECT c.checkpoint_id, c.channel_versions INTO head_id, versions
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = p_thread AND c.checkpoint_ns = ''
    ORDER BY c.checkpoint_id DESC
    LIMIT 1;
    IF head_id IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                   WHERE w.thread_id = p_thread AND w.checkpoint_ns = ''
                     AND w.checkpoint_id = head_id AND w.channel = '__error__') THEN
            found_status := 'error';
        ELSIF EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                      WHERE w.thread_id = p_thread AND w.checkpoint_ns = ''
                        AND w.checkpoint_id = head_id AND w.channel = '__interrupt__') THEN
            found_status := 'interrupted';
        ELSE
            -- each trigger channel's value at its version: one probe of the primary key each
            FOR k, v IN SELECT e.key, e.value FROM jsonb_each_text(versions) AS e
                        WHERE e.key = '__start__' OR starts_with(e.key, 'branch:to:') LOOP
                IF EXISTS (SELECT 1 FROM {schema}.pgsaver_blobs AS b
                           WHERE b.thread_id = p_thread AND b.checkpoint_ns = ''
                             AND b.channel = k AND b.version = v AND b.type <> 'empty') THEN
                    found_status := 'pending';
                    EXIT;
                END IF;
            END LOOP;
        END IF;
    END IF;
    IF head_id IS NULL THEN
        DELETE FROM {schema}.pgsaver_thread_status AS s WHERE s.thread_id = p_thread;
        RETURN 'idle';
    END IF;
    found_status := coalesce(found_status, 'idle');
    INSERT INTO {schema}.pgsaver_thread_status AS s (thread_id, status, checkpoint_id)
    VALUES (p_thread, found_status, head_id)
    ON CONFLICT (thread_id) DO UPDATE
        SET status = EXCLUDED.status, checkpoint_id = EXCLUDED.checkpoint_id, since = EXCLUDED.since
        WHERE s.status <> EXCLUDED.status OR s.checkpoint_id <> EXCLUDED.checkpoint_id;
    RETURN found_status;
END
$fn$;

-- put's function with the thread's status (p_status: 'pending', 'idle', or NULL for a checkpoint
-- of a subgraph's namespace): 0006's work, then pgsaver_put_status.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_put(
    p_thread text, p_ns text, p_id text, p_parent text, p_run text, p_type text,
    p_checkpoint bytea, p_versions jsonb, p_metadata jsonb, p_metadata_exact bytea,
    p_channels text[], p_blob_versions text[], p_types text[], p_blobs bytea[], p_status text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $fn$
DECLARE
    untouched boolean;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1818718323, hashtext(p_thread));
    IF p_parent IS NOT NULL THEN
        SELECT p.xmax = '0'::xid INTO untouched FROM {schema}.pgsaver_checkpoints AS p
        WHERE p.thread_id = p_thread AND p.checkpoint_ns = p_ns AND p.checkpoint_id = p_parent;
        IF untouched IS NULL THEN
            RETURN false;
        END IF;
        IF NOT untouched THEN
            PERFORM 1 FROM {schema}.pgsaver_checkpoints AS p
            WHERE p.thread_id = p_thread AND p.checkpoint_ns = p_ns
              AND p.checkpoint_id = p_parent
            FOR KEY SHARE OF p;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
        END IF;
    END IF;
    INSERT INTO {schema}.pgsaver_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
    SELECT p_thread, p_ns, b.channel, b.version, b.type, b.blob
    FROM unnest(p_channels, p_blob_versions, p_types, p_blobs) AS b (channel, version, type, blob);
    INSERT INTO {schema}.pgsaver_checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id,
        type, checkpoint, channel_versions, metadata, metadata_exact
    ) VALUES (
        p_thread, p_ns, p_id, p_parent, p_run,
        p_type, p_checkpoint, p_versions, p_metadata, p_metadata_exact
    );
    IF p_status IS NOT NULL AND p_ns = '' THEN
        PERFORM {schema}.pgsaver_put_status(p_thread, p_ns, p_id, p_status);
    END IF;
    RETURN true;
END
$fn$;

-- The threads already stored: each one's newest root checkpoint, classified as above. One pass
-- over the checkpoints' primary key (seconds per million checkpoints, once). On tables Citus has
-- distributed already (this script run again on a distributed schema), a thread at a time through
-- pgsaver_refresh_status: Citus plans none of the set's correlated subqueries there.
DO $backfill$
DECLARE
    distributed boolean := false;
    t text;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1)'
            INTO distributed USING '{schema}.pgsaver_checkpoints'::regclass;
    END IF;
    IF distributed THEN
        FOR t IN SELECT DISTINCT c.thread_id FROM {schema}.pgsaver_checkpoints AS c
                 WHERE c.checkpoint_ns = '' LOOP
            PERFORM {schema}.pgsaver_refresh_status(t);
        END LOOP;
        RETURN;
    END IF;
    INSERT INTO {schema}.pgsaver_thread_status (thread_id, status, checkpoint_id)
    SELECT h.thread_id, s.status, h.checkpoint_id
    FROM (
        SELECT c.thread_id, max(c.checkpoint_id) AS checkpoint_id
        FROM {schema}.pgsaver_checkpoints AS c
        WHERE c.checkpoint_ns = ''
        GROUP BY c.thread_id
    ) AS h
    JOIN {schema}.pgsaver_checkpoints AS c
      ON c.thread_id = h.thread_id AND c.checkpoint_ns = '' AND c.checkpoint_id = h.checkpoint_id
    CROSS JOIN LATERAL (
        SELECT CASE
            WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                         WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
                           AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__error__')
                THEN 'error'
            WHEN EXISTS (SELECT 1 FROM {schema}.pgsaver_writes AS w
                         WHERE w.thread_id = c.thread_id AND w.checkpoint_ns = ''
                           AND w.checkpoint_id = c.checkpoint_id AND w.channel = '__interrupt__')
                THEN 'interrupted'
            WHEN EXISTS (SELECT 1 FROM jsonb_each_text(c.channel_versions) AS e
                         JOIN {schema}.pgsaver_blobs AS b
                           ON b.thread_id = c.thread_id AND b.checkpoint_ns = ''
                          AND b.channel = e.key AND b.version = e.value
                         WHERE (e.key = '__start__' OR starts_with(e.key, 'branch:to:'))
                           AND b.type <> 'empty')
                THEN 'pending'
            ELSE 'idle'
        END AS status
    ) AS s
    ON CONFLICT (thread_id) DO NOTHING;
END
$backfill$;

-- delete_thread in one call: the thread's rows of the three tables, then its status row (through
-- pgsaver_refresh_status, which finds no checkpoint left and deletes it). SECURITY INVOKER: the
-- deletes need the caller's own privileges, as the statement's (queries.sql: delete_thread), and
-- the caller's search_path stays (a trigger of the caller's on our tables runs as it did); every
-- name here carries its schema.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_delete_thread(p_thread text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $fn$
BEGIN
    DELETE FROM {schema}.pgsaver_blobs AS b WHERE b.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_writes AS w WHERE w.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_checkpoints AS c WHERE c.thread_id = p_thread;
    PERFORM {schema}.pgsaver_refresh_status(p_thread);
END
$fn$;
