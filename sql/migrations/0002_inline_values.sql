-- 0002: keep rows whole in the table instead of spreading them over the TOAST table.
-- With the default storage (EXTENDED) a row over ~2 KB is shrunk by moving its attributes out of line,
-- biggest first and down to any text over ~24 bytes: a 2 KB channel value and then even the 50-byte
-- version or 36-byte checkpoint id each cost a second index lookup and heap fetch in the TOAST table
-- to read. MAIN keeps attributes inline (compressed when that helps) and moves them out of line only
-- when the row does not fit in a page; the biggest, the value, then goes first. The JSONB columns of
-- checkpoints keep the default. Rows written before this migration keep their storage until rewritten.
-- A table Citus has distributed already (`setup --sql` run again, or `--from 1` on a schema that
-- setup() distributed) is left as it is: Citus refuses these column settings on a distributed table
-- ("alter table command is currently unsupported"), and its shards were made from the table as it
-- was when distributed. Elsewhere the statements change nothing the second time.
DO $$
DECLARE
    distributed boolean := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = '
             || 'ANY (ARRAY[$1::regclass, $2::regclass, $3::regclass]))'
            INTO distributed
            USING '{schema}.pgsaver_blobs', '{schema}.pgsaver_writes', '{schema}.pgsaver_checkpoints';
    END IF;
    IF distributed THEN
        RAISE NOTICE 'the tables are distributed by Citus: their column storage is kept';
        RETURN;
    END IF;
    ALTER TABLE {schema}.pgsaver_blobs
        ALTER COLUMN thread_id SET STORAGE MAIN,
        ALTER COLUMN checkpoint_ns SET STORAGE MAIN,
        ALTER COLUMN channel SET STORAGE MAIN,
        ALTER COLUMN version SET STORAGE MAIN,
        ALTER COLUMN type SET STORAGE MAIN,
        ALTER COLUMN blob SET STORAGE MAIN;
    ALTER TABLE {schema}.pgsaver_writes
        ALTER COLUMN thread_id SET STORAGE MAIN,
        ALTER COLUMN checkpoint_ns SET STORAGE MAIN,
        ALTER COLUMN checkpoint_id SET STORAGE MAIN,
        ALTER COLUMN task_id SET STORAGE MAIN,
        ALTER COLUMN channel SET STORAGE MAIN,
        ALTER COLUMN type SET STORAGE MAIN,
        ALTER COLUMN blob SET STORAGE MAIN,
        ALTER COLUMN task_path SET STORAGE MAIN;
    ALTER TABLE {schema}.pgsaver_checkpoints
        ALTER COLUMN thread_id SET STORAGE MAIN,
        ALTER COLUMN checkpoint_ns SET STORAGE MAIN,
        ALTER COLUMN checkpoint_id SET STORAGE MAIN,
        ALTER COLUMN parent_checkpoint_id SET STORAGE MAIN,
        ALTER COLUMN run_id SET STORAGE MAIN,
        ALTER COLUMN type SET STORAGE MAIN,
        ALTER COLUMN checkpoint SET STORAGE MAIN;

    -- lz4 compresses and decompresses several times faster than the default pglz. PostgreSQL 14+
    -- built with lz4 only; elsewhere the columns keep the server's default method.
    IF current_setting('server_version_num')::int >= 140000 THEN
        BEGIN
            EXECUTE 'ALTER TABLE {schema}.pgsaver_blobs ALTER COLUMN blob SET COMPRESSION lz4';
            EXECUTE 'ALTER TABLE {schema}.pgsaver_writes ALTER COLUMN blob SET COMPRESSION lz4';
            EXECUTE 'ALTER TABLE {schema}.pgsaver_checkpoints '
                 || 'ALTER COLUMN checkpoint SET COMPRESSION lz4, '
                 || 'ALTER COLUMN metadata SET COMPRESSION lz4, '
                 || 'ALTER COLUMN channel_versions SET COMPRESSION lz4';
        EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
            RAISE NOTICE 'lz4 is not available on this server: keeping the default compression';
        END;
    END IF;
END
$$;
