-- 0013: put_writes' work as a function, for connections that prepare nothing (behind a pooler)
-- and for Citus, which runs a call of it on the thread's worker (docs/scaling.md).
-- additive: a new function only; code that knows 0001-0012 never calls it.
-- It does what put_writes does (queries.sql), in the same order and with the same lock: the
-- thread's advisory lock held shared (key class 1818718323, the lifecycle lock's), so a prune or
-- retention batch of the thread, which holds it exclusively, never runs in the middle of it; on
-- Citus both are taken on the thread's worker. Then the writes: an ordinary write keeps its first
-- value (a retried task writes the same rows again), a special channel's (negative idx) the
-- latest, and a row another run wrote is replaced with that run's id kept in replaced_run_ids.
-- Returns how many rows it inserted or replaced.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_put_writes(
    p_thread text, p_ns text, p_id text, p_task text, p_path text, p_run text,
    p_idxs integer[], p_channels text[], p_types text[], p_blobs bytea[]
) RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    written integer;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1818718323, hashtext(p_thread));
    INSERT INTO {schema}.pgsaver_writes AS t (
        thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob, run_id
    )
    SELECT p_thread, p_ns, p_id, p_task, p_path, w.idx, w.channel, w.type, w.blob, p_run
    FROM unnest(p_idxs, p_channels, p_types, p_blobs) AS w (idx, channel, type, blob)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        channel = EXCLUDED.channel,
        type = EXCLUDED.type,
        blob = EXCLUDED.blob,
        task_path = EXCLUDED.task_path,
        run_id = EXCLUDED.run_id,
        replaced_run_ids = CASE
            WHEN t.run_id IS NOT DISTINCT FROM EXCLUDED.run_id THEN t.replaced_run_ids
            ELSE array_append(t.replaced_run_ids, t.run_id)
        END
    WHERE EXCLUDED.idx < 0;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$fn$;
