-- 0011: plans that stay on their index whatever the statistics say.
-- additive: new settings on the functions of 0004, 0006 and 0007 (their bodies unchanged) and a new
-- function; code that knows 0001-0010 calls the same functions and gets the same results.
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
