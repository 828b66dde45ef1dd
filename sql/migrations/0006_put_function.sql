-- 0006: put's work as a function, for connections that prepare nothing (behind a pooler).
-- additive: a new function only; code that knows 0001-0005 never calls it.
-- Unprepared, put's one statement (queries.sql: put_new) is parsed, analysed and planned at every
-- call, which costs more than its execution. A PL/pgSQL function's plans are cached by the server
-- session whatever the client prepares, so the saver sends a short call instead when the
-- connection does not prepare; prepared, put_new stays (a call costs a little more than it).
-- It does what put_new does, in the same order and with the same locks: the thread's advisory lock
-- held shared (key class 1818718323, the lifecycle lock's), then the parent read once the lock is
-- held. The function is VOLATILE, so under READ COMMITTED that read takes a snapshot of its own,
-- after the wait: a prune that committed meanwhile is simply not seen. An xmax of 0 proves the
-- parent is still there (the lifecycle deleters hold the lock exclusively, so none runs until this
-- commits); any other xmax (an unlocked delete_thread in flight, an earlier row lock; or, under
-- REPEATABLE READ, whose snapshot predates the wait, a delete) takes FOR KEY SHARE, which waits for
-- a deleter still running and rechecks, as put_new does (_put_checked). Then plain INSERTs of the blobs and the
-- checkpoint: a row that exists already raises a unique violation, which ends the call with nothing
-- stored, and the saver runs the put upsert instead. Returns false, storing nothing, when the parent
-- is not there (the saver then tries put_orphan). A guarded put (single_writer=True) does not come
-- here: it runs put_new with its claim.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_put(
    p_thread text, p_ns text, p_id text, p_parent text, p_run text, p_type text,
    p_checkpoint bytea, p_versions jsonb, p_metadata jsonb, p_metadata_exact bytea,
    p_channels text[], p_blob_versions text[], p_types text[], p_blobs bytea[]
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
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
    RETURN true;
END
$fn$;
