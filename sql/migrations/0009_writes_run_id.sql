-- 0009: pending writes record the run that wrote them, for delete_for_runs.
-- additive: two nullable columns and a partial index; code that knows 0001-0008 never names the
-- columns (its writes get NULL: no run known) and runs unchanged against them.
-- A run's writes do not all sit on its own checkpoints: a run with durability="exit" stores its
-- DeltaChannel writes on the checkpoint it started from (another run's), and a run that resumes an
-- interrupt stores its resume values and its tasks' writes on the interrupted checkpoint. put_writes
-- fills run_id by the rule put uses for the checkpoints' run_id (config metadata, configurable,
-- top-level config "run_id"). Rows written before this migration, or by an older release, hold NULL.
-- in a block of its own: on a table Citus distributed, the columns already there, Citus sends the
-- statement's text to the workers, which is the whole script when `setup --sql` runs as one string
DO $$
BEGIN
    ALTER TABLE {schema}.pgsaver_writes
        ADD COLUMN IF NOT EXISTS run_id text COLLATE "C",
        -- a write to a special channel (interrupt, resume, error) stored again by another run replaces
        -- the earlier row; the run ids of the rows it replaced (NULL for a row of no known run), oldest
        -- first: deleting the run cannot bring those back, so delete_for_runs refuses unless it deletes
        -- them too. NULL: it replaced nothing.
        ADD COLUMN IF NOT EXISTS replaced_run_ids text[] COLLATE "C";
END
$$;
-- a column's storage: Citus refuses it on a distributed table (a schema distributed before this
-- migration keeps the default for the new column; ADD COLUMN above is propagated to the shards)
DO $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                   WHERE logicalrelid = '{schema}.pgsaver_writes'::regclass) THEN
            RETURN;
        END IF;
    END IF;
    ALTER TABLE {schema}.pgsaver_writes ALTER COLUMN run_id SET STORAGE MAIN;
END
$$;
-- Which threads a run wrote to: its checkpoints say (pgsaver_checkpoints_run_id_idx), except for a
-- run that stored none, as one that resumed an interrupt and stopped at the next one: it stored only
-- writes to special channels. Only those are indexed, so the hot path's ordinary writes pay nothing.
-- The build reads the whole writes table, and setup() runs it in the transaction of the ALTER
-- above, whose ACCESS EXCLUSIVE lock then lasts until the build ends (reads of the table wait too).
-- On a large table, add the columns and build it first without blocking (docs/guide.md,
-- "Upgrades"); this migration then finds them. A concurrent build that failed leaves an invalid index, built again here.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('{schema}.pgsaver_writes_run_id_idx')
                 AND NOT indisvalid) THEN
        DROP INDEX {schema}.pgsaver_writes_run_id_idx;
    END IF;
END
$$;
CREATE INDEX IF NOT EXISTS pgsaver_writes_run_id_idx
    ON {schema}.pgsaver_writes (run_id) WHERE run_id IS NOT NULL AND idx < 0;
