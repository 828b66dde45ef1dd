-- 0018: deletes that stay deleted. A run still in flight when its thread is deleted writes its next
-- checkpoint and writes afterwards; a checkpoint whose state was whole without its ancestors was
-- stored, and the deleted thread came back.
-- additive: a new table and functions; put_writes' and delete_thread's functions replaced with
-- forms that do what they did and keep the record. Code that knows 0001-0017 runs against it; its
-- deletes are not recorded, and where it calls pgsaver_put_writes (behind a pooler, on Citus) a late
-- write raises the function's error (SQLSTATE LGD01) as it is.
--
-- Each delete of a thread (delete_thread, prune(strategy="delete"), retention, the CLI's delete)
-- records the thread and the newest checkpoint id it deleted. Checkpoint ids grow with time
-- (LangGraph's uuid6), so a checkpoint or write of a run that started before the delete names an id
-- at most that one: put's parent, put_writes' checkpoint. Such a put or put_writes whose checkpoint
-- is not stored is refused (SQLSTATE LGD01, the saver's ThreadDeletedError). A new run on the
-- same thread id starts without a parent and its ids are newer: it is not affected. The record
-- goes when retention forgets it (keep_deleted, seven days by default).
-- refused: the ids of checkpoints refused since (newer than last_checkpoint_id: a late run's
-- next checkpoint), whose writes are refused too; a new run's ids stay allowed.
CREATE TABLE IF NOT EXISTS {schema}.pgsaver_deleted_threads (
    thread_id          text COLLATE "C" NOT NULL PRIMARY KEY,
    last_checkpoint_id text COLLATE "C" NOT NULL,
    deleted_at         timestamptz NOT NULL DEFAULT now(),
    refused            text[] COLLATE "C" NOT NULL DEFAULT '{}'
);

CREATE INDEX IF NOT EXISTS pgsaver_deleted_threads_at_idx
    ON {schema}.pgsaver_deleted_threads (deleted_at);

-- When the delete's time of a record that covers checkpoint p_id of the thread (its
-- last_checkpoint_id at least p_id, or p_id refused since), else NULL: whether a write of a run
-- that started before the delete names it. VOLATILE: called in a statement after the thread's
-- shared lock is held, it reads with a snapshot taken after that wait, so it sees a delete that
-- committed while the write waited. On a Citus worker before setup() distributed the table (a
-- moment during an upgrade) there is no table there to read: no record.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_deleted_at(p_thread text, p_id text)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
AS $fn$
DECLARE
    at timestamptz;
BEGIN
    IF p_id IS NULL OR to_regclass('{schema}.pgsaver_deleted_threads') IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT d.deleted_at INTO at FROM {schema}.pgsaver_deleted_threads AS d
    WHERE d.thread_id = p_thread AND (d.last_checkpoint_id >= p_id OR p_id = ANY (d.refused));
    RETURN at;
END
$fn$;

-- Whether a write naming checkpoint p_id of the thread may go in: true, or it raises LGD01 with
-- the record as JSON in its detail. Refused: a record covers the id (as pgsaver_deleted_at reads
-- it) and the checkpoint is not stored. On put_writes' hot path, so as lean as it can be (measured
-- in docs/performance.md): one primary-key probe, no search_path setting (every name is
-- qualified, and it runs with its caller's rights), and no look for the table (the statements
-- call it only on one server; pgsaver_put_writes looks first).
CREATE OR REPLACE FUNCTION {schema}.pgsaver_check_deleted(p_thread text, p_ns text, p_id text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $fn$
DECLARE
    at timestamptz;
BEGIN
    PERFORM 1 FROM {schema}.pgsaver_deleted_threads AS d
    WHERE d.thread_id = p_thread AND (d.last_checkpoint_id >= p_id OR p_id = ANY (d.refused));
    IF NOT FOUND THEN
        RETURN true;
    END IF;
    PERFORM 1 FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    IF FOUND THEN
        RETURN true;
    END IF;
    SELECT d.deleted_at INTO at FROM {schema}.pgsaver_deleted_threads AS d
    WHERE d.thread_id = p_thread;
    RAISE EXCEPTION USING
        ERRCODE = 'LGD01',
        MESSAGE = format('thread %s was deleted at %s', p_thread, at),
        DETAIL = json_build_object('thread_id', p_thread, 'checkpoint_ns', p_ns,
                                   'checkpoint_id', p_id, 'deleted_at', at)::text;
END
$fn$;

-- 0013's put_writes function, with the check after the lock.
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
    -- (no table yet on a Citus worker before setup() distributed it: no record to check)
    IF to_regclass('{schema}.pgsaver_deleted_threads') IS NOT NULL THEN
        PERFORM {schema}.pgsaver_check_deleted(p_thread, p_ns, p_id);
    END IF;
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

-- 0016's delete_thread, recording the delete first (the newest checkpoint id of every namespace;
-- nothing for a thread that holds no checkpoint). A thread deleted again keeps the newer id and
-- time (EXCLUDED's: Citus allows no now() in DO UPDATE).
CREATE OR REPLACE FUNCTION {schema}.pgsaver_delete_thread(p_thread text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(1818718323, hashtext(p_thread));
    INSERT INTO {schema}.pgsaver_deleted_threads AS d (thread_id, last_checkpoint_id)
    SELECT c.thread_id, max(c.checkpoint_id) FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = p_thread GROUP BY c.thread_id
    ON CONFLICT (thread_id) DO UPDATE SET
        last_checkpoint_id = greatest(d.last_checkpoint_id, EXCLUDED.last_checkpoint_id),
        deleted_at = EXCLUDED.deleted_at;
    DELETE FROM {schema}.pgsaver_blobs AS b WHERE b.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_elements AS e WHERE e.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_writes AS w WHERE w.thread_id = p_thread;
    DELETE FROM {schema}.pgsaver_checkpoints AS c WHERE c.thread_id = p_thread;
    PERFORM {schema}.pgsaver_refresh_status(p_thread);
END
$fn$;

-- Whoever may write the checkpoints may keep the records (a role granted pgsaver_blobs by name;
-- default privileges cover the table already).
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.grantee, a.privilege_type
        FROM pg_catalog.pg_class AS c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.oid = '{schema}.pgsaver_blobs'::regclass AND a.grantee <> c.relowner
          AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
    LOOP
        IF r.grantee = 0 THEN
            EXECUTE format('GRANT %s ON {schema}.pgsaver_deleted_threads TO PUBLIC',
                           r.privilege_type);
        ELSE
            EXECUTE format('GRANT %s ON {schema}.pgsaver_deleted_threads TO %s',
                           r.privilege_type, r.grantee::regrole::text);
        END IF;
    END LOOP;
END
$$;
