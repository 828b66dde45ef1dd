-- 0004: the function behind single_writer=True (one writer per thread).
-- additive: a new function only; code that knows 0001-0003 never calls it.
-- A guarded put (source "input" or "loop") must extend its namespace's newest checkpoint. The
-- function takes a second per-thread advisory lock exclusively (key class 1818718324, one above the
-- lifecycle lock's), so guarded puts of a thread run one at a time, and then looks for a newer
-- checkpoint than the parent. It is VOLATILE: its query gets a snapshot of its own, taken after the
-- lock, so it sees a competing put that committed while this one waited (the calling statement's
-- snapshot is older than that wait). A newer checkpoint means another writer got there first: the
-- function raises SQLSTATE LG001, which ends the statement with nothing stored, and the saver raises
-- ConcurrentUpdateError. The checkpoint being put is left out, so a retried put passes.
CREATE OR REPLACE FUNCTION {schema}.pgsaver_claim_head(
    p_thread text, p_ns text, p_parent text, p_child text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    newest text;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        -- a fresh snapshot per query, which the check below needs, is READ COMMITTED's alone
        RAISE EXCEPTION USING
            ERRCODE = 'LG002',
            MESSAGE = format(
                'single_writer needs transactions in READ COMMITTED, not %s (its check would '
                'not see a competing put): set default_transaction_isolation back for the '
                'saver''s role or database, or pass single_writer=False',
                current_setting('transaction_isolation'));
    END IF;
    PERFORM pg_advisory_xact_lock(1818718324, hashtext(p_thread));
    SELECT c.checkpoint_id INTO newest
    FROM {schema}.pgsaver_checkpoints AS c
    WHERE c.thread_id = p_thread AND c.checkpoint_ns = p_ns AND c.checkpoint_id <> p_child
    ORDER BY c.checkpoint_id DESC
    LIMIT 1;
    IF newest IS NOT NULL AND (p_parent IS NULL OR newest > p_parent) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'LG001',
            MESSAGE = format(
                'thread %L (namespace %L) has a newer checkpoint %s than %s, the parent of %s: '
                'another writer extended it first',
                p_thread, p_ns, newest, coalesce(p_parent, 'none'), p_child),
            DETAIL = json_build_array(p_thread, p_ns, p_parent, newest, p_child)::text;
    END IF;
    RETURN true;
END
$fn$;
