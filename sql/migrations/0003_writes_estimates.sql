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
ALTER TABLE {schema}.pgsaver_writes ALTER COLUMN checkpoint_id SET (n_distinct = -0.1);
ANALYZE {schema}.pgsaver_writes;
