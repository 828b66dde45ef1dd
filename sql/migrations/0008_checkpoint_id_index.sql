-- 0008: checkpoints by id across threads, for list(None, ...) (a filter, or none, with a limit).
-- additive: a new index only; code that knows 0001-0007 runs unchanged against it.
-- Without it, list(None, filter=..., limit=10) fetched every checkpoint the GIN index matched and
-- sorted them all to return the newest ten: fine where a filter matches few rows, but a filter that
-- matches most of them ({"source": "loop"}, a tenant) read and sorted the whole table, growing with
-- it. With it, list() walks the newest checkpoints first and stops at the limit where matches are
-- dense (read_tuples_recent), and otherwise lets the planner choose between that walk and the GIN
-- index, with the filter and the limit in sight (read_tuples_global). One B-tree entry more per put.
-- CREATE INDEX takes a SHARE lock: puts wait while it builds (seconds per million checkpoints). On a
-- large table, build it first without blocking (docs/guide.md, "Upgrades"):
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS pgsaver_checkpoints_id_idx
--       ON <schema>.pgsaver_checkpoints (checkpoint_id, thread_id, checkpoint_ns);
-- and this migration then finds it and does nothing. A concurrent build that failed leaves an
-- invalid index of that name, which the planner never uses: it is built again here.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('{schema}.pgsaver_checkpoints_id_idx')
                 AND NOT indisvalid) THEN
        DROP INDEX {schema}.pgsaver_checkpoints_id_idx;
    END IF;
END
$$;
-- The thread and namespace follow the id, so that a lookup of one checkpoint by its whole key is as
-- selective here as on the primary key, whichever the planner takes: copy_thread gives many threads
-- the same checkpoint ids, and an index on the id alone would then hold thousands of entries per id.
CREATE INDEX IF NOT EXISTS pgsaver_checkpoints_id_idx
    ON {schema}.pgsaver_checkpoints (checkpoint_id, thread_id, checkpoint_ns);
