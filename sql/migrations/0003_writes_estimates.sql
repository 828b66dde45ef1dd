-- 0003: keep the planner's estimate of a checkpoint's pending writes small, whatever ANALYZE saw.
-- additive: no table changes shape; code that knows only 0001-0002 runs unchanged against it.
-- get_tuple, list and the DeltaChannel history look up a checkpoint's writes by the first three
-- columns of the writes key. The planner estimates how many rows that matches as rows / n_distinct
-- of checkpoint_id. Statistics taken while the table held a few checkpoints with many writes each (a
-- large fan-out, a load test) said 2 distinct checkpoints in 9,600 rows, and every read then chose a
-- sequential scan of the whole writes table for its three writes: 3 ms instead of 0.37 ms on that
-- small table, growing with the table, until the next ANALYZE. A fixed n_distinct of 10% of the rows
-- (ten writes per checkpoint) keeps the estimate at about ten rows, so the lookup stays on the
-- primary key; ANALYZE uses it from now on instead of its own estimate. Changing the option takes a
-- SHARE UPDATE EXCLUSIVE lock: reads and writes go on.
-- Citus refuses a column's options on a distributed table (`setup --sql` run again, `--from 1` on a
-- schema setup() distributed): there the distribution step sets it on the shards (citus_distribute).
DO $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                   WHERE logicalrelid = '{schema}.pgsaver_writes'::regclass) THEN
            RETURN;
        END IF;
    END IF;
    ALTER TABLE {schema}.pgsaver_writes ALTER COLUMN checkpoint_id SET (n_distinct = -0.1);
END
$$;
ANALYZE {schema}.pgsaver_writes;
